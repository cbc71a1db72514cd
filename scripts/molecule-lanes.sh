#!/usr/bin/env bash
# Runs the Molecule scenarios in parallel lanes: the scenarios of one lane one after another, the lanes
# side by side. Each scenario has its own containers, Docker network and Molecule state, and its drills
# wait on observable state rather than on time, so a busier machine makes them slower, never different.
# The lanes are balanced by the scenarios' measured wall times (docs/tests.md).
#
#   scripts/molecule-lanes.sh                      # the lanes below
#   scripts/molecule-lanes.sh "default multinode" rolling   # lanes given as arguments, one per word list
#   scripts/molecule-lanes.sh engine                        # the real SGLang alone
#   scripts/molecule-lanes.sh multinode@2.21                # a scenario on another ansible-core controller
#
# A scenario written <name>@<release> runs whole (Molecule's create and destroy too) with the ansible-core of
# .cache/core-<release> (scripts/setup.sh) first on PATH: every ansible-playbook and ansible that Molecule, testinfra
# and the drills start is that release's. The default lanes run multinode so on the newest release (issue 52: the
# async readiness wait, the handlers and a rolling change of a multi-node server), the others on requirements.txt's.
#
# Each scenario's whole output goes to .cache/molecule-logs/<scenario>.log and, prefixed with its name,
# to stdout. A lane stops at its first failing scenario; the other lanes finish. The exit status is
# non-zero when any scenario failed, and the summary names it, the tail of its log and, last, its failed
# tests with their assertion lines.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# The scenarios are in extensions/molecule (the top-level molecule is a symlink to it): without this glob Molecule
# sees ./molecule, warns that collection scenarios belong in extensions/molecule and reaches them through the link.
export MOLECULE_GLOB="${MOLECULE_GLOB:-extensions/molecule/**/molecule.yml}"

if [[ $# -gt 0 ]]; then
  lanes=("$@")
else
  lanes=("rolling" "survival default multinode@2.21" "engine install")
fi
logs=.cache/molecule-logs
rm -rf "$logs" && mkdir -p "$logs"

run_scenario() {  # <name> or <name>@<ansible-core release>
  local name=${1%@*} release=${1#*@}
  if [[ $release == "$1" ]]; then
    molecule test -s "$name"
    return
  fi
  local bin=$PWD/.cache/core-$release/bin
  if [[ ! -x $bin/ansible-playbook ]]; then
    echo "no ansible-core $release controller at .cache/core-$release: run make setup" >&2
    return 1
  fi
  echo "scenario $name on $("$bin/ansible-playbook" --version | head -n 1)"
  PATH=$bin:$PATH molecule test -s "$name"
}

run_lane() {
  local scenario start rc
  for scenario in $1; do
    start=$SECONDS
    run_scenario "$scenario" > >(tee "$logs/$scenario.log" | sed -u "s/^/[$scenario] /") 2>&1
    rc=$?
    echo "$scenario $rc $((SECONDS - start))" > "$logs/$scenario.status"
    [[ $rc -eq 0 ]] || return "$rc"
  done
}

pids=()
for lane in "${lanes[@]}"; do
  run_lane "$lane" &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid"
done

echo
echo "Molecule lanes: scenario, exit status, wall seconds"
failed=0
for lane in "${lanes[@]}"; do
  for scenario in $lane; do
    if [[ -f $logs/$scenario.status ]]; then
      read -r name rc seconds < "$logs/$scenario.status"
      printf '  %-10s rc=%s  %ss\n' "$name" "$rc" "$seconds"
      [[ $rc -eq 0 ]] || failed=1
    else
      printf '  %-10s not run (an earlier scenario of its lane failed)\n' "$scenario"
    fi
  done
done
if [[ $failed -ne 0 ]]; then
  for status in "$logs"/*.status; do
    read -r name rc _ < "$status"
    [[ $rc -eq 0 ]] && continue
    echo
    echo "=== $name failed; the end of $logs/$name.log:"
    tail -n 60 "$logs/$name.log"
  done
  # Last, where a CI page that shows only the end of the output still has it: which tests failed, and how.
  for status in "$logs"/*.status; do
    read -r name rc _ < "$status"
    [[ $rc -eq 0 ]] && continue
    echo
    echo "=== $name: the failed tests (pytest's failures, the first 40 lines):"
    grep -E '^(FAILED|ERROR) |::test_.* (FAILED|ERROR)|^E  ' "$logs/$name.log" | cut -c1-300 | head -n 40
  done
  exit 1
fi
