#!/usr/bin/env bash
# The wheels of the real SGLang server for Molecule's `engine` scenario, once per machine: every package of
# molecule/resources/engine/requirements-cpu.txt (SGLang 0.5.23 and its CPU dependency set, 175 wheels, about
# 3.2 GB) and the role's pinned uv, downloaded into a cache OUTSIDE the clone, so a fresh clone or CI run reuses
# them. The scenario mounts that directory read-only into its hosts and gives it to role sglang_stack as its
# wheelhouse. Prints the directory.
#
#   SGLANG_DEPLOY_ENGINE_WHEELHOUSE  where the wheels go (default /var/cache/sglang-deploy/engine-wheelhouse)
#
# The set is recorded beside the directory (<dir>.complete: the lock's and uv's digest; inside it, the role would take
# it for a wheel to copy); a changed lock downloads again into a fresh directory that then replaces the old one. First fill: about 50 s and 3.2 GB here (pip takes torch and the
# nvidia-* wheels from this machine's local index when it has one, the rest from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${SGLANG_DEPLOY_ENGINE_WHEELHOUSE:-/var/cache/sglang-deploy/engine-wheelhouse}
lock=extensions/molecule/resources/engine/requirements-cpu.txt
uv=$(sed -n 's/^sglang_stack_uv_version: "\(.*\)"/\1/p' roles/sglang_stack/defaults/main.yml)
want="$(sha256sum "$lock" | cut -c1-16) uv==$uv"
# shellcheck source=scripts/machine-cache.sh
. scripts/machine-cache.sh
# uv's cache for the scenario's hosts (molecule.yml mounts it): made here, emptied when the wheels change (uv knows
# a local wheel by its path and time, so the old entries would only take space).
uv_cache=${SGLANG_DEPLOY_ENGINE_UV_CACHE:-/var/cache/sglang-deploy/engine-uv-cache}
mkdir -p "$uv_cache"
cache_reuse "$dest" "$want" -d "$dest"
cache_begin "$dest"
rm -rf "${uv_cache:?}"/* "${uv_cache:?}"/.[!.]* 2>/dev/null || true
echo "engine wheelhouse: downloading the real SGLang's CPU dependency set into $dest (about 3.2 GB, once)" >&2
# The wheels of the set it replaces are taken from there; only what the lock changed is downloaded.
reuse=()
[ -d "$dest" ] && reuse=(--find-links "$dest")
"$pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: "${reuse[@]}" -d "$fresh" -r "$lock" \
  "uv==$uv" \
  2>&1 | grep -v "^WARNING: Location" >&2 || true
expected=$(grep -c -E '^[A-Za-z0-9]' "$lock")
found=$(find "$fresh" -name '*.whl' | wc -l)
if [ "$found" -ne "$((expected + 1))" ]; then
  echo "engine wheelhouse: $found wheels downloaded, $((expected + 1)) expected ($lock and uv==$uv)" >&2
  exit 1
fi
chmod 0755 "$fresh" && chmod 0644 "$fresh"/*.whl
cache_commit "$dest" "$want"
