"""What the Molecule verify tests share: running a playbook of this repository through the CLI,
against the scenario's inventory, as a user does. Each run's whole output is kept in
.cache/drill-logs/<scenario>/ (numbered in run order) for reading after a failure or a timing question."""

from __future__ import annotations

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
    return proc.returncode, proc.stdout + proc.stderr, seconds


def recap(output: str, host: str) -> dict[str, int]:
    """The host's counts (ok, changed, failed, ...) from the last PLAY RECAP of a playbook's output."""
    match = re.search(rf"{re.escape(host)}\s*:\s*(.*)", output.rsplit("PLAY RECAP", maxsplit=1)[-1])
    assert match, output[-3000:]
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", match.group(1))}
