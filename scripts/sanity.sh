#!/usr/bin/env bash
# `ansible-test sanity` on this collection, offline: `bash scripts/sanity.sh [ansible-test sanity options]`,
# for example `--test validate-modules` or `--list-tests`. scripts/setup.sh first installs ansible-core in
# .cache/sanity-venv and the pinned requirements of every sanity test as wheels in .cache/sanity-wheels.
#
# Why a copy: ansible-test takes the collection's name from a path ending in ansible_collections/sglang/deploy
# and resolves symlinks, so the copy under .cache/sanity is what it tests: the files git tracks and the new
# ones it does not ignore, as they are in the working tree. The copy is a git repository of its own (git
# init, nothing committed), so ansible-test lists its files with git instead of walking up to this checkout,
# where git ignores .cache and ansible-test would find no file at all.
#
# Why offline: ansible-test runs most tests in a virtual environment of its own per test, which it
# creates under ~/.ansible/test/venv and fills with pip: first pip itself, from a get-pip.py it downloads
# from ci-files.testing.ansible.com, then the test's pinned requirements from PyPI. Here HOME is
# .cache/sanity-home, so those environments are kept with the project, pip reads this project's pip.conf
# (no index, the wheels of .cache/sanity-wheels) and get-pip.py is a local stand-in that installs pip
# from the same wheels. ansible-test passes no other environment variable to pip (only HOME and PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.cache/sanity-venv
WHEELS=$ROOT/.cache/sanity-wheels
COPY=$ROOT/.cache/sanity/ansible_collections/sglang/deploy
export HOME=$ROOT/.cache/sanity-home

if [ ! -x "$VENV/bin/ansible-test" ] || ! ls "$WHEELS"/pip-*.whl >/dev/null 2>&1; then
  echo "$VENV or $WHEELS is missing: run scripts/setup.sh (make setup) first" >&2
  exit 1
fi

rm -rf "$ROOT/.cache/sanity"
mkdir -p "$COPY"
# .ansible/ is ansible-lint's cache, not content. molecule is a symlink to extensions/molecule, which is copied:
# ansible-test refuses a symlink to a directory (its symlinks test), and the built collection leaves it out too.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' path; do
  case $path in .ansible/* | molecule) continue ;; esac
  if [ -e "$path" ] || [ -L "$path" ]; then printf '%s\0' "$path"; fi  # a tracked file deleted in the tree is gone
done | tar --null --files-from=- -cf - | tar -xf - -C "$COPY"
git -C "$COPY" init -q

mkdir -p "$HOME/.config/pip" "$HOME/.ansible/test/cache"
printf '[global]\nno-index = true\nfind-links = %s\ndisable-pip-version-check = true\n' "$WHEELS" \
  >"$HOME/.config/pip/pip.conf"
# The one pip wheel there is the pip ansible-test bootstraps (scripts/setup.sh asks ansible-test which).
pip_wheel=$(echo "$WHEELS"/pip-*.whl)
pip_version=${pip_wheel##*/pip-}
pip_version=${pip_version%%-*}
# ansible-test runs it as `python get_pip_<version>.py [pip options] pip==<version> --no-setuptools --no-wheel`.
cat >"$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py" <<PY
"""Stand-in for get-pip.py: installs the requested pip from $pip_wheel."""
import sys

sys.path.insert(0, "$pip_wheel")
from pip._internal.cli.main import main

sys.exit(main(["install", *(arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel"))]))
PY

cd "$COPY"
exec "$VENV/bin/ansible-test" sanity --python 3.11 --color no "$@"
