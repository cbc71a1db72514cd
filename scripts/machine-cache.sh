# shellcheck shell=bash
# A directory cached once per machine, outside the clone (scripts/engine-wheelhouse.sh, scripts/cuda-toolchain.sh):
# recorded beside it as <dir>.complete, holding what it was filled for; a changed record fills a fresh directory
# that then replaces the old one whole, so a run killed half-way leaves the last complete one. Sourced, from the
# repository's root.

# cache_reuse DEST WANT TEST PATH: print DEST and end the script when it holds WANT and `test TEST PATH` holds
# (-d DEST: the directory is there; -x DEST/bin/nvcc: its compiler can run).
cache_reuse() {
  if [ -f "$1.complete" ] && test "$3" "$4" && [ "$(cat "$1.complete")" = "$2" ]; then
    echo "$1"
    exit 0
  fi
}

# cache_begin DEST: sets `fresh` (a new directory beside DEST, removed if the script ends before cache_commit)
# and `pip` (the project's, else the machine's).
cache_begin() {
  pip=.venv/bin/pip
  [ -x "$pip" ] || pip=pip3
  mkdir -p "$(dirname "$1")"
  fresh=$(mktemp -d "$1.new.XXXXXX")
  trap 'rm -rf "$fresh"' EXIT
}

# cache_commit DEST WANT: `fresh` replaces DEST, recorded as holding WANT; prints DEST.
cache_commit() {
  rm -rf "$1" "$1.complete"
  mv "$fresh" "$1"
  trap - EXIT
  echo "$2" > "$1.complete"
  echo "$1"
}
