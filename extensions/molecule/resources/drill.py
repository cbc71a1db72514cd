"""What the Molecule verify tests share: running a playbook of this repository through the CLI,
against the scenario's inventory, as a user does. Each run's whole output is kept in
.cache/drill-logs/<scenario>/ (numbered in run order) for reading after a failure or a timing question."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
LOGS = PROJECT / ".cache" / "drill-logs" / os.environ.get("MOLECULE_SCENARIO_NAME", "scenario")
shutil.rmtree(LOGS, ignore_errors=True)  # this verify run's logs only
# A failed task's result line: "fatal: [host]: FAILED! => {...}" or, in a loop, "failed: [host] (item=...) => {...}".
FAILED_RESULT = re.compile(r"^(?:fatal|failed): \[[^\]]+\].*? => (\{.*\})$", re.MULTILINE)
_last_log: list[Path] = []


def _playbook(name: str, extra: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    return ["ansible-playbook", name, "-i", os.path.dirname(INVENTORY), *extra], env


def _keep(name: str, argv: list[str], output: str, rc: int | None, seconds: float) -> None:
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{len(list(LOGS.glob('*.log'))) + 1:03d}-{Path(name).stem}.log"
    log.write_text(f"$ {' '.join(argv)}\n{output}")
    print(f"\n$ {' '.join(argv)}  ->  rc={rc} in {seconds:.1f} s  (output: {log.relative_to(PROJECT)})")
    _last_log[:] = [log]


def run_playbook(name: str, *extra: str) -> tuple[int, str, float]:
    """ansible-playbook NAME -i <scenario inventory> EXTRA...: (rc, stdout+stderr, seconds). Results are
    printed as JSON, so a message stays on one line for the tests to read."""
    argv, env = _playbook(name, extra)
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    _keep(name, argv, proc.stdout + proc.stderr, proc.returncode, seconds)
    return proc.returncode, proc.stdout + proc.stderr, seconds


class Running:
    """An ansible-playbook run in the background (start_playbook): its output as it comes, its PID, its end."""

    def __init__(self, name: str, *extra: str) -> None:
        self.name = name
        self.argv, env = _playbook(name, extra)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, cwd=PROJECT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.ended: float | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        """Read the output to its end, then note when the run itself ended (whenever finish() is called)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
        self.proc.wait()
        self.ended = time.monotonic()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def finish(self, timeout: float = 1800) -> tuple[int, str, float]:
        """Wait for the run's end: (rc, output, seconds to the run's own end, however late this is called); the
        output is kept as run_playbook keeps it."""
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=30)
        seconds = (self.ended or time.monotonic()) - self.started
        _keep(self.name, self.argv, self.output, rc, seconds)
        return rc, self.output, seconds


def start_playbook(name: str, *extra: str) -> Running:
    """ansible-playbook NAME ... in the background, as run_playbook runs it (its PID is ansible-playbook's)."""
    return Running(name, *extra)


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
