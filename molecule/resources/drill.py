"""What the Molecule verify tests share: running a playbook of this repository through the CLI,
against the scenario's inventory, as a user does. Each run's whole output is kept in
.cache/drill-logs/<scenario>/ (numbered in run order) for reading after a failure or a timing question."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
LOGS = PROJECT / ".cache" / "drill-logs" / os.environ.get("MOLECULE_SCENARIO_NAME", "scenario")
shutil.rmtree(LOGS, ignore_errors=True)  # this verify run's logs only
# A failed task's result line: "fatal: [host]: FAILED! => {...}" or, in a loop, "failed: [host] (item=...) => {...}".
FAILED_RESULT = re.compile(r"^(?:fatal|failed): \[[^\]]+\].*? => (\{.*\})$", re.MULTILINE)
_last_log: list[Path] = []


def run_playbook(name: str, *extra: str) -> tuple[int, str, float]:
    """ansible-playbook NAME -i <scenario inventory> EXTRA...: (rc, stdout+stderr, seconds). Results are
    printed as JSON, so a message stays on one line for the tests to read."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    argv = ["ansible-playbook", name, "-i", os.path.dirname(INVENTORY), *extra]
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{len(list(LOGS.glob('*.log'))) + 1:03d}-{Path(name).stem}.log"
    log.write_text(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}")
    print(f"\n$ {' '.join(argv)}  ->  rc={proc.returncode} in {seconds:.1f} s  (output: {log.relative_to(PROJECT)})")
    _last_log[:] = [log]
    return proc.returncode, proc.stdout + proc.stderr, seconds


def failed_messages(output: str, limit: int = 700) -> list[str]:
    """The messages of the tasks that failed in a run, in order, each cut at its journal excerpt and at
    ``limit`` characters (the output's end, which why() adds, still holds the excerpt)."""
    messages = []
    for match in FAILED_RESULT.finditer(output):
        try:
            result = json.loads(match.group(1))
        except ValueError:
            continue
        text = str(result.get("msg") or result.get("stderr") or "")
        messages.append(text.split("\n--- journal", 1)[0][:limit])
    return messages


def why(output: str) -> str:
    """An assertion message for a run that did not do what a drill expected: why its tasks failed first
    (a CI summary shows only the start of a message), then the output's end, then where the whole
    output is kept."""
    causes = "\n".join(f"FAILED TASK {index}: {text}" for index, text in enumerate(failed_messages(output), 1))
    where = f"\n(whole output: {_last_log[0].relative_to(PROJECT)})" if _last_log else ""
    return f"{causes or 'no task failed'}\n--- end of the output ---\n{output[-3000:]}{where}"


def recap(output: str, host: str) -> dict[str, int]:
    """The host's counts (ok, changed, failed, ...) from the last PLAY RECAP of a playbook's output."""
    match = re.search(rf"{re.escape(host)}\s*:\s*(.*)", output.rsplit("PLAY RECAP", maxsplit=1)[-1])
    assert match, why(output)
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", match.group(1))}
