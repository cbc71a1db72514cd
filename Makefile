# sglang-deploy. Two commands matter (see README): `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(CURDIR)/.venv/bin:$(PATH)
export ANSIBLE_FORCE_COLOR ?= $(if $(CI),0,1)
export PY_COLORS ?= $(if $(CI),0,1)
# The Molecule scenarios live in extensions/molecule (a collection's place for them); the top-level molecule is a
# symlink to it. Molecule looks there only when no ./molecule exists, and warns otherwise: this glob (its own for
# collections) makes it use extensions/molecule without the warning (docs/tests.md).
export MOLECULE_GLOB ?= extensions/molecule/**/molecule.yml

.PHONY: help setup sandbox demo test static lint changelog-lint sanity collection ee unit molecule bench clean release \
	release-check
help:
	@echo "make demo   - set everything up, deploy to a local sandbox container, show the unit and a health answer"
	@echo "make test   - every test: lint, ansible-test sanity, the built collection, the EE context, pytest, Molecule"
	@echo "make setup | sandbox | static (lint sanity collection ee) | lint | changelog-lint | sanity | collection | ee | unit | molecule | clean"
	@echo "make bench  - time the no-op deploy and a roll on fleets of 1 and 5 sandbox hosts (BENCH_HOSTS=1,5)"
	@echo "make release REPOSITORY_URL=https://... [DOCUMENTATION_URL= HOMEPAGE_URL= ISSUES_URL=] - the release tarball"
	@echo "make release-check REPOSITORY_URL=https://... - that tarball through galaxy-importer and antsibull-docs"

setup:
	@bash scripts/setup.sh

sandbox: setup
	ansible-playbook playbooks/sandbox.yml

demo: sandbox
	ansible-playbook deploy.yml -e hicache_ratio=2.0
	@bash scripts/demo-show.sh

lint: setup
	yamllint --strict .
	ansible-lint
	ruff check .
	ansible-playbook --syntax-check deploy.yml playbooks/*.yml
	$(MAKE) --no-print-directory changelog-lint

# The fragments and changelogs/changelog.yaml linted, and CHANGELOG.rst as antsibull-changelog generates it from
# them (docs/development.md): an edit by hand, or a release without the regenerated file, fails here.
changelog-lint:
	antsibull-changelog lint
	antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
	mkdir -p .cache && antsibull-changelog generate --output .cache/CHANGELOG.rst --output-format rst
	diff -u CHANGELOG.rst .cache/CHANGELOG.rst \
		|| { echo "CHANGELOG.rst is stale: run antsibull-changelog generate" >&2; exit 1; }

# ansible-test sanity on a copy of the collection, offline (scripts/sanity.sh).
sanity: setup
	bash scripts/sanity.sh

# The collection as its users get it: built by ansible-galaxy (galaxy.yml's build_ignore), installed into an
# empty collections path, and its check, plan and render playbooks run from that copy by their FQCN against the
# installed example inventory, from another directory so that nothing of this checkout's ansible.cfg (roles,
# collections, callbacks) applies. The render must give the golden files. (tests/playbooks/test_collection_build.py
# does the same from outside the checkout.)
COLLECTION := .cache/collection
INSTALLED := cd $(COLLECTION)/run && env -u ANSIBLE_CONFIG ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/$(COLLECTION)/installed \
	ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
EXAMPLE := $(CURDIR)/$(COLLECTION)/installed/ansible_collections/sglang/deploy/inventory/example
collection: setup
	rm -rf $(COLLECTION) && mkdir -p $(COLLECTION)/installed $(COLLECTION)/run
	ansible-galaxy collection build --output-path $(COLLECTION) .
	mv $(COLLECTION)/sglang-deploy-*.tar.gz $(COLLECTION)/sglang-deploy.tar.gz
	$(INSTALLED) ansible-galaxy collection install --offline -p ../installed ../sglang-deploy.tar.gz
	$(INSTALLED) ansible-playbook sglang.deploy.deploy -i $(EXAMPLE) --syntax-check
	$(INSTALLED) ansible-playbook sglang.deploy.check -i $(EXAMPLE)
	$(INSTALLED) ansible-playbook sglang.deploy.plan -i $(EXAMPLE)
	$(INSTALLED) ansible-playbook sglang.deploy.render -i $(EXAMPLE) \
		-e render_dir=$(CURDIR)/$(COLLECTION)/render -e hicache_ratio=2.0
	diff -r tests/golden/example $(COLLECTION)/render/gpu-node-1

# The build context of the execution environment (execution-environment.yml) with that collection; building the
# image needs a container registry, so CI stops at the context.
ee: collection
	rm -rf .cache/ee
	ansible-builder create -f execution-environment.yml --context .cache/ee

# Two workers, each test module whole on one of them (its module-scoped fixtures run once).
unit: setup
	pytest -n 2 --dist loadfile --durations=20

molecule: setup
	bash scripts/molecule-lanes.sh

# The static checks (one after another) beside pytest, each one's output printed whole when it ends; then the
# Molecule lanes. The two cores are shared: pytest's processes wait on servers and playbooks as much as they
# compute, and the checks are single-threaded, so together they take about two thirds of their sum.
test: setup
	$(MAKE) --no-print-directory -j2 --output-sync=target static unit
	$(MAKE) --no-print-directory molecule

static: setup
	$(MAKE) --no-print-directory -j1 lint sanity collection ee

# Not part of make test: how the deploy's cost grows with the fleet (tools/bench_fleet.py, docs/benchmarks.md).
BENCH_HOSTS ?= 1,5
bench: setup
	python tools/bench_fleet.py --hosts $(BENCH_HOSTS) --repeat 3 --json .cache/bench-fleet.json

# The release (docs/development.md, "Releasing"). galaxy.yml names no public URL (the project has no public hosting);
# the release names them on the command line, and tools/release.py writes them into a copy of the checkout and builds
# the tarball from it (it refuses without REPOSITORY_URL): .cache/release/sglang-deploy-<version>.tar.gz.
# release-check runs galaxy-importer (no containers) and antsibull-docs on that tarball and fails on any error or
# warning. Not part of make test: it needs the release's URLs, and its tools (requirements-release.txt: Sphinx,
# flake8, aiohttp, a second ansible-lint; about 220 MB) are installed into .cache/release-venv from PyPI on its first
# run; a check takes several minutes (ansible-lint over the whole collection).
RELEASE := .cache/release
RELEASE_VENV := .cache/release-venv
RELEASE_STAMP := $(RELEASE_VENV)/.requirements-$(shell sha256sum requirements-release.txt | cut -c1-16)
release: setup
	python tools/release.py build --out $(RELEASE) --repository "$(REPOSITORY_URL)" \
		$(if $(DOCUMENTATION_URL),--documentation "$(DOCUMENTATION_URL)") $(if $(HOMEPAGE_URL),--homepage "$(HOMEPAGE_URL)") \
		$(if $(ISSUES_URL),--issues "$(ISSUES_URL)")

$(RELEASE_STAMP): requirements-release.txt
	rm -rf $(RELEASE_VENV) && python3 -m venv $(RELEASE_VENV)
	$(RELEASE_VENV)/bin/pip install -q --disable-pip-version-check -r requirements-release.txt
	touch $@

release-check: release $(RELEASE_STAMP)
	python tools/release.py check $(RELEASE)/sglang-deploy-*.tar.gz --venv $(RELEASE_VENV) --work .cache/release-check

clean:
	-ansible-playbook playbooks/sandbox-destroy.yml
	rm -rf .cache/wheelhouse
