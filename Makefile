# sglang-deploy. Two commands matter (see README): `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(CURDIR)/.venv/bin:$(PATH)
export ANSIBLE_FORCE_COLOR ?= $(if $(CI),0,1)
export PY_COLORS ?= $(if $(CI),0,1)

.PHONY: help setup sandbox demo test lint unit molecule clean
help:
	@echo "make demo   - set everything up, deploy to a local sandbox container, show the unit and a health answer"
	@echo "make test   - every test: lint, pytest, Molecule"
	@echo "make setup | sandbox | lint | unit | molecule | clean"

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

unit: setup
	pytest

molecule: setup
	molecule test --all

test: lint unit molecule

clean:
	-ansible-playbook playbooks/sandbox-destroy.yml
	rm -rf .cache/wheelhouse
