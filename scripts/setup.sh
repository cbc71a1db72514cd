#!/usr/bin/env bash
# Install and start everything sglang-deploy's demo and tests need, on a bare Debian 12 machine as
# root: Debian packages (Docker engine, debootstrap, numactl), a running dockerd, the pinned Python toolchain
# in .venv, the tests' ansible-core 2.20 and 2.21 controllers in .cache/core-2.20 and .cache/core-2.21 (pyenv's
# Python 3.12 and 3.13), the pinned Ansible collections in .cache/collections, the systemd image, and the
# wheelhouse with the SGLang simulator, the sandbox's GPU device nodes. Every step is skipped when
# already done.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
mkdir -p .cache
log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

need_pkgs=()
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
command -v shellcheck >/dev/null || need_pkgs+=(shellcheck)  # ansible-test sanity's shellcheck test
python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkgs+=(python3-venv)
# promtool (rule checks and tests) and the Prometheus server the monitoring tests run themselves.
command -v promtool >/dev/null || need_pkgs+=(prometheus)
# numactl: the probe's test of SGLang's NUMA helper (tests/unit/plugins/modules/test_sglang_probe.py) runs the real one.
command -v numactl >/dev/null || need_pkgs+=(numactl)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "apt-get install ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # No service starts from a package's maintainer scripts (Prometheus' own would listen on :9090).
  no_start=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    no_start=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$no_start" && chmod 755 "$no_start"
  fi
  apt-get install -y -q --no-install-recommends "${need_pkgs[@]}" >/dev/null
  [ -z "$no_start" ] || rm -f "$no_start"
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (log: .cache/dockerd.log)"
  nohup dockerd >"$ROOT/.cache/dockerd.log" 2>&1 &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -20 .cache/dockerd.log >&2; exit 1; }
fi

stamp=".venv/.requirements-$(sha256sum requirements.txt | cut -c1-16)"
if [ ! -e "$stamp" ]; then
  log "python toolchain -> .venv (requirements.txt)"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c 'import ansible, molecule, testinfra'  # the install above must have worked
  touch "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"

# ansible-test sanity, offline (scripts/sanity.sh): ansible-core in .cache/sanity-venv, and the pinned requirements
# of its sanity tests with the pip it bootstraps them with, as wheels that its own test environments install from.
sanity_stamp=".cache/sanity-venv/.requirements-$(sha256sum requirements-sanity.txt | cut -c1-16)"
if [ ! -e "$sanity_stamp" ]; then
  log "ansible-test sanity toolchain -> .cache/sanity-venv, .cache/sanity-wheels (requirements-sanity.txt)"
  rm -rf .cache/sanity-venv .cache/sanity-wheels
  python3 -m venv .cache/sanity-venv
  .cache/sanity-venv/bin/pip install -q --disable-pip-version-check "$(grep '^ansible-core==' requirements-sanity.txt)" \
    2>&1 | grep -v "^WARNING: Location" || true
  sanity_pip=$(.cache/sanity-venv/bin/python -c '
from types import SimpleNamespace
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(SimpleNamespace(version="3.11"))["pip"])')
  sanity_reqs=()
  for file in .cache/sanity-venv/lib/python3*/site-packages/ansible_test/_data/requirements/sanity.*.txt; do
    sanity_reqs+=(-r "$file")
  done
  .cache/sanity-venv/bin/pip wheel -q --disable-pip-version-check -w .cache/sanity-wheels "pip==$sanity_pip" \
    -r requirements-sanity.txt "${sanity_reqs[@]}" 2>&1 | grep -v "^WARNING: Location" || true
  .cache/sanity-venv/bin/pip install -q --disable-pip-version-check --no-index --find-links .cache/sanity-wheels \
    -r requirements-sanity.txt "${sanity_reqs[@]}"
  touch "$sanity_stamp"
fi

# The newer controllers the tests also run the collection on (tests/playbooks/test_controllers.py): ansible-core 2.20
# and 2.21 need Python >= 3.12, which Debian 12 lacks, so each venv is made with a pyenv interpreter.
pyenv_root=$(pyenv root 2>/dev/null || echo /root/.pyenv)
for core in 2.20:3.12 2.21:3.13; do
  release=${core%%:*} python=${core#*:}
  venv=".cache/core-$release"
  core_stamp="$venv/.requirements-$(sha256sum "requirements-core-$release.txt" | cut -c1-16)"
  [ -e "$core_stamp" ] && continue
  log "ansible-core $release controller -> $venv (requirements-core-$release.txt, Python $python)"
  interpreter=$(find "$pyenv_root/versions" -maxdepth 3 -path "*/versions/$python.*/bin/python3" 2>/dev/null \
    | sort -V | tail -1)
  if [ -z "$interpreter" ]; then
    echo "no Python $python for the ansible-core $release controller: expected $pyenv_root/versions/$python.*/bin/python3" \
      "(install it with pyenv: pyenv install $python)" >&2
    exit 1
  fi
  rm -rf "$venv"
  "$interpreter" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "requirements-core-$release.txt" 2>&1 \
    | grep -v "^WARNING: Location" || true
  "$venv/bin/python" -c "import ansible.release as r; assert r.__version__.startswith('$release.'), r.__version__"
  touch "$core_stamp"
done

if ! ansible-galaxy collection install -r requirements.yml -p .cache/collections >.cache/galaxy.log 2>&1; then
  log "Galaxy unreachable: collections from the ansible 12.3.0 wheel on PyPI"
  .venv/bin/pip download -q --no-deps -d .cache/wheels ansible==12.3.0 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python - <<'PY'
import glob, zipfile, yaml
wanted = [c["name"].replace(".", "/") for c in yaml.safe_load(open("requirements.yml"))["collections"]]
wheel = zipfile.ZipFile(sorted(glob.glob(".cache/wheels/ansible-12.3.0-*.whl"))[-1])
prefixes = tuple(f"ansible_collections/{w}/" for w in wanted)
wheel.extractall(".cache/collections", [n for n in wheel.namelist() if n.startswith(prefixes)])
PY
  # Now present at the pinned versions: this must say "Nothing to do" without touching the network.
  ansible-galaxy collection install -r requirements.yml -p .cache/collections >.cache/galaxy.log 2>&1 \
    || { cat .cache/galaxy.log >&2; exit 1; }
fi

# The sandbox hosts' GPU device nodes, given to each container with `docker --device` (which also lets
# the container open them): major 195 like the NVIDIA driver's, and a free dynamic major for nvidia-uvm.
# No driver stands behind them, so an open() that the unit's device policy allows fails with ENXIO,
# and one it denies with EPERM: the simulator tells the two apart, so the policy really decides.
log "sandbox GPU device nodes (.cache/sandbox-dev)"
uvm_major=509
for major in 195 "$uvm_major"; do
  if awk -v m="$major" '/^Block devices:/{exit} $1 == m {found=1} END{exit !found}' /proc/devices; then
    echo "major $major is registered on this machine (/proc/devices); the sandbox's fake GPU nodes would reach" \
      "a real driver. Run the sandbox on a machine without NVIDIA devices." >&2
    exit 1
  fi
done
mkdir -p .cache/sandbox-dev
node() { [ -c ".cache/sandbox-dev/$1" ] || mknod -m 0666 ".cache/sandbox-dev/$1" c "$2" "$3"; }
node nvidiactl 195 255
for minor in 0 1 2 3 4 5 6 7; do node "nvidia$minor" 195 "$minor"; done
node nvidia-uvm "$uvm_major" 0
node nvidia-uvm-tools "$uvm_major" 1

# This checkout is the collection sglang.deploy: link it where ansible.cfg's collections_path finds it.
mkdir -p .cache/collections/ansible_collections/sglang
ln -sfn ../../../.. .cache/collections/ansible_collections/sglang/deploy

log "systemd image"
bash scripts/build-image.sh

pin() { sed -n "s/^$1: \"\(.*\)\"/\1/p" "$2"; }
log "wheelhouse: the SGLang simulator, stand-ins of FlashInfer's prebuilt kernels, tvm-ffi, and sglang-router with its dependencies"
version=$(pin sglang_version roles/sglang/defaults/main.yml)
# Like the real wheel, the simulator requires ninja (SGLang's JIT builds run it from the virtualenv's
# bin; the real ninja wheel, pinned here as the real sglang leaves it unpinned) and the pinned
# flashinfer-python, which the wheelhouse holds as a stand-in with FlashInfer's prebuilt kernels.
ninja_version=1.13.2
companions=(--requires "ninja==$ninja_version")
# And, like the real wheel, apache-tvm-ffi (the real one): the probe builds and loads a module against it as SGLang's
# JIT does.
tvm_ffi=$(grep -E "^apache-tvm-ffi==" "roles/sglang_stack/files/constraints/sglang-$version.txt")
companions+=(--requires "$tvm_ffi")
for name in flashinfer-python flashinfer-cubin flashinfer-jit-cache; do
  line=$(grep -E "^$name==" "roles/sglang_stack/files/constraints/sglang-$version.txt")
  companions+=(--companion "$line")
  [ "$name" = flashinfer-python ] && companions+=(--requires "$line")
done
# FlashInfer 0.7.2's jit-cache is a shim that requires one kernel package per GPU architecture, each pinned to its
# own version (flashinfer/__main__.py, _read_jit_cache_provider_tags): the stand-in shim requires two, and the
# wheelhouse holds only the sandbox's (sm120f), as an air-gapped site's does; installed with its dependencies, it
# cannot resolve (role sglang_stack installs the kernel packages with --no-deps).
jit=$(sed -n 's/^flashinfer-jit-cache==//p' "roles/sglang_stack/files/constraints/sglang-$version.txt")
companions+=(--companion "flashinfer-jit-cache-sm120f==$jit")
for tag in sm100a sm120f; do
  companions+=(--companion-requires "flashinfer-jit-cache=flashinfer-jit-cache-$tag==$jit")
done
python3 extensions/molecule/resources/simulator/build_wheel.py --version "$version" --out .cache/wheelhouse "${companions[@]}"
if ! ls .cache/wheelhouse/ninja-"$ninja_version"-*.whl >/dev/null 2>&1; then
  .venv/bin/pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d .cache/wheelhouse \
    "ninja==$ninja_version" 2>&1 | grep -v "^WARNING: Location" || true
fi
ls .cache/wheelhouse/ninja-"$ninja_version"-*.whl >/dev/null
if ! ls .cache/wheelhouse/apache_tvm_ffi-"${tvm_ffi#*==}"-*.whl >/dev/null 2>&1; then
  .venv/bin/pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d .cache/wheelhouse \
    "$tvm_ffi" "$(grep -E '^typing.extensions==' requirements.txt)" 2>&1 | grep -v "^WARNING: Location" || true
fi
ls .cache/wheelhouse/apache_tvm_ffi-"${tvm_ffi#*==}"-*.whl >/dev/null
uv=$(pin sglang_stack_uv_version roles/sglang_stack/defaults/main.yml)
if ! ls .cache/wheelhouse/uv-"$uv"-*.whl >/dev/null 2>&1; then
  .venv/bin/pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d .cache/wheelhouse \
    "uv==$uv" 2>&1 | grep -v "^WARNING: Location" || true
fi
ls .cache/wheelhouse/uv-"$uv"-*.whl >/dev/null
log "NVIDIA's CUDA 13.0 compiler for the probe's toolchain tests (scripts/cuda-toolchain.sh, a cache outside the clone)"
bash scripts/cuda-toolchain.sh >/dev/null
router=$(pin sglang_router_version roles/sglang_router/defaults/main.yml)
if ! ls .cache/wheelhouse-router/sglang_router-"$router"-*.whl >/dev/null 2>&1; then
  .venv/bin/pip download -q --disable-pip-version-check --only-binary=:all: -d .cache/wheelhouse-router \
    -c "roles/sglang_router/files/constraints-$router.txt" "sglang-router==$router" 2>&1 | grep -v "^WARNING: Location" || true
fi
ls .cache/wheelhouse-router/sglang_router-"$router"-*.whl >/dev/null
