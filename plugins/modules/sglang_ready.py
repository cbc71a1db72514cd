#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait until an SGLang systemd unit serves a real generation; fail fast when it cannot."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_ready
short_description: Wait for an SGLang unit to be ready, failing fast on a crash
description:
  - Follows one invocation of a systemd unit running SGLang. On every poll it reads the unit's
    C(ActiveState), C(SubState), C(NRestarts) and C(InvocationID) and calls the server's health
    endpoint, which runs a real one-token generation (C(/health_generate)). The port being open,
    C(/ping) and C(/model_info) are never taken as ready.
  - It succeeds only for the invocation that started after O(previous_invocation_id). It fails
    within one poll interval when that invocation exits, fails, is restarted by systemd, or is
    replaced, and puts the invocation's last journal lines in the message.
  - It reads SGLang's load progress from the journal (phase, safetensors shard percentage) and
    writes it to O(status_file) on every poll.
  - Meant to run as an Ansible async job (C(async), C(poll=0)) so a dropped connection during a
    15-minute load does not stop it. Poll it with O(jid) set, which returns the progress while
    it runs and the waiter's result (or failure) once it ends.
version_added: "1.0.0"
options:
  unit:
    description: The systemd unit, for example C(sglang-kimi.service).
    type: str
    required: true
  url:
    description: Health URL that runs a generation, for example C(http://127.0.0.1:30000/health_generate).
    type: str
  previous_invocation_id:
    description:
      - InvocationID of the unit before a restart was requested. Readiness then counts only for a
        newer invocation. Empty when no restart was requested (the current invocation is followed).
    type: str
    default: ""
  timeout:
    description: Seconds to wait in all, including the previous process's drain and the model load.
    type: int
    default: 1080
  interval:
    description: Seconds between polls.
    type: float
    default: 2
  start_grace:
    description: Seconds an inactive unit with no pending job may take to begin starting.
    type: int
    default: 30
  health_timeout:
    description: Seconds one health request may take (SGLang's own generation health timeout is 20 s).
    type: int
    default: 30
  journal_lines:
    description: Journal lines of the failed invocation quoted in a failure message.
    type: int
    default: 25
  status_file:
    description: JSON file the waiter writes its progress to on every poll.
    type: path
  jid:
    description:
      - Poll mode. The async job id of a running waiter; returns C(finished=false) and the
        progress from O(status_file) while it runs, or the waiter's own result once it ended.
    type: str
  async_dir:
    description: Directory of Ansible's async job files (poll mode).
    type: path
    default: ~/.ansible_async
author: sglang-deploy contributors
"""

EXAMPLES = r"""
- name: Start the readiness wait (detached)
  sglang_ready:
    unit: sglang-kimi.service
    url: http://127.0.0.1:30000/health_generate
    previous_invocation_id: "{{ previous.stdout }}"
    timeout: 1080
    status_file: /run/sglang-deploy/sglang-kimi.service.ready.json
  async: 1200
  poll: 0
  register: ready_job

- name: Wait, showing progress
  sglang_ready:
    unit: sglang-kimi.service
    jid: "{{ ready_job.ansible_job_id }}"
    status_file: /run/sglang-deploy/sglang-kimi.service.ready.json
  register: ready
  until: ready.finished
  retries: 400
  delay: 3
"""

RETURN = r"""
finished:
  description: Whether the wait has ended (poll mode); always true in wait mode.
  type: bool
  returned: always
ready:
  description: The unit answered a real generation.
  type: bool
  returned: when finished
elapsed_s:
  description: Seconds from the start of the wait to the answer.
  type: float
  returned: always
phase:
  description: Last load phase seen in the journal (for example C(loading weights), C(fired up)).
  type: str
  returned: always
progress:
  description: Last safetensors progress seen, C({percent, done, total}), or null.
  type: dict
  returned: always
invocation_id:
  description: The invocation that became ready.
  type: str
  returned: when finished
main_pid:
  description: Main PID of that invocation.
  type: int
  returned: when finished
n_restarts:
  description: systemd's NRestarts counter for the unit.
  type: int
  returned: when finished
fired_up_to_ready_s:
  description: Seconds from SGLang's "fired up and ready to roll" log line to the ready answer.
  type: float
  returned: when ready and the line was seen
phases:
  description: Each phase seen with the seconds since the wait started.
  type: list
  returned: always
"""

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

from ansible.module_utils.basic import AnsibleModule

# SGLang's own log lines, in load order, as written by 0.5.9 .. 0.5.23 (srt/model_executor/model_runner.py,
# srt/mem_cache/*, srt/managers/scheduler.py, srt/entrypoints/http_server.py).
PHASES = tuple((re.compile(pattern, re.IGNORECASE), name) for pattern, name in (
    (r"Load weight begin", "loading weights"),
    (r"(Loading safetensors checkpoint|Multi-thread loading) shards", "loading weights"),
    (r"Load weight end", "weights loaded"),
    (r"KV Cache (is allocated|VA upper bound)", "allocating KV cache"),
    (r"host memory for hierarchical KV cache|hierarchical KV host pool", "allocating host KV pool"),
    (r"Capture .*cuda graph begin", "capturing CUDA graphs"),
    (r"Capture .*cuda graph end", "CUDA graphs captured"),
    (r"max_total_num_tokens=", "starting HTTP server"),
    (r"Uvicorn running on", "warming up"),
    (r"The server is fired up and ready to roll", "fired up"),
))
# tqdm bar of the weight loader: "safetensors checkpoint" before 0.5.12, "Multi-thread loading" after.
SHARDS_RE = re.compile(
    r"(?:Loading safetensors checkpoint|Multi-thread loading) shards:\s*(\d+)% Completed \| (\d+)/(\d+)")
SHOW_PROPS = ("ActiveState", "SubState", "NRestarts", "InvocationID", "MainPID", "ExecMainStatus",
              "ExecMainCode", "Result", "LoadState")


class WaitFailed(Exception):
    """The unit cannot become ready in this invocation."""


class Progress:
    """Load progress of one invocation, read incrementally from the journal."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.phase_index = -1
        self.phase = "starting"
        self.progress: dict[str, int] | None = None
        self.phases: list[dict[str, Any]] = []
        self.fired_up_at: float | None = None
        self.cursor: str | None = None

    def feed(self, message: str, timestamp: float) -> None:
        for line in re.split(r"[\r\n]+", message):
            match = SHARDS_RE.search(line)
            if match:
                self.progress = {"percent": int(match.group(1)), "done": int(match.group(2)),
                                 "total": int(match.group(3))}
            for index, (marker, name) in enumerate(PHASES):
                if index > self.phase_index and marker.search(line):
                    self.phase_index, self.phase = index, name
                    if not self.phases or self.phases[-1]["phase"] != name:
                        self.phases.append({"phase": name, "at_s": round(timestamp - self.started, 1)})
                    if name == "fired up":
                        self.fired_up_at = timestamp

    def describe(self) -> str:
        text = self.phase
        if self.progress and self.phase == "loading weights":
            text += " {percent}% ({done}/{total} shards)".format(**self.progress)
        return text


def _run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, errors="replace")
    if proc.returncode != 0:
        raise OSError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def unit_state(unit: str) -> dict[str, str]:
    out = _run(["systemctl", "show", unit, "--property=" + ",".join(SHOW_PROPS)])
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def _message_text(value: Any) -> str:
    """journalctl -o json gives MESSAGE as a byte array when it holds control characters (\\r)."""
    if isinstance(value, list):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


def journal(invocation: str, cursor: str | None = None, lines: int | None = None) -> list[dict[str, Any]]:
    """Entries of one invocation: the service's own output and systemd's messages about it."""
    argv = ["journalctl", "--no-pager", "-o", "json", "_SYSTEMD_INVOCATION_ID=" + invocation, "+",
            "INVOCATION_ID=" + invocation]
    if cursor:
        argv.append("--after-cursor=" + cursor)
    if lines:
        argv.extend(["-n", str(lines)])
    entries = []
    for raw in _run(argv).splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        entries.append({"cursor": entry.get("__CURSOR"),
                        "ts": int(entry.get("__REALTIME_TIMESTAMP", "0")) / 1e6,
                        "message": _message_text(entry.get("MESSAGE"))})
    return entries


def journal_excerpt(invocation: str, count: int) -> str:
    if not invocation:
        return "(no invocation: the unit never started)"
    try:
        entries = journal(invocation, lines=count * 4)
    except OSError as exc:
        return f"(journal unavailable: {exc})"
    lines = [part for entry in entries for part in re.split(r"[\r\n]+", entry["message"]) if part.strip()]
    return "\n".join(lines[-count:]) or "(no journal lines)"


def health(url: str, timeout: int) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout) as answer:
            return answer.status == 200, f"HTTP {answer.status}"
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, str(reason)


def write_status(path: str | None, status: dict[str, Any]) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(status, handle)
    os.replace(tmp, path)


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class Waiter:
    """One wait: follow the new invocation until it answers a generation or cannot."""

    def __init__(self, params: dict[str, Any], clock: Any = time) -> None:
        self.p = params
        self.clock = clock
        self.started = clock.time()
        self.progress = Progress(self.started)
        self.previous = params["previous_invocation_id"] or ""
        self.followed = ""
        self.baseline_restarts = 0
        self.last_health = "not asked yet"
        self.state: dict[str, str] = {}

    def elapsed(self) -> float:
        return round(self.clock.time() - self.started, 1)

    def status(self) -> dict[str, Any]:
        return {"unit": self.p["unit"], "phase": self.progress.phase, "progress": self.progress.progress,
                "describe": self.progress.describe(), "elapsed_s": self.elapsed(),
                "invocation_id": self.followed, "active_state": self.state.get("ActiveState"),
                "sub_state": self.state.get("SubState"), "health": self.last_health,
                "phases": self.progress.phases}

    def fail(self, why: str) -> WaitFailed:
        self.clock.sleep(0.5)  # let journald take in the last lines the process wrote
        excerpt = journal_excerpt(self.followed or self.state.get("InvocationID", ""), self.p["journal_lines"])
        return WaitFailed(f"{self.p['unit']} {why} after {self.elapsed():.0f} s; last progress: "
                          f"{self.progress.describe()}\n--- journal of the invocation ---\n{excerpt}")

    def check_unit(self) -> None:
        """Raise WaitFailed when the followed invocation is gone; start following a new one."""
        state = self.state
        invocation = state.get("InvocationID", "")
        if state.get("LoadState") == "not-found":
            raise self.fail("does not exist")
        if not self.followed:
            if invocation and invocation != self.previous:
                self.followed = invocation
                self.baseline_restarts = int(state.get("NRestarts") or 0)
            elif state.get("ActiveState") in ("inactive", "failed") and \
                    self.clock.time() - self.started > self.p["start_grace"]:
                raise self.fail(f"did not start (state {state.get('ActiveState')})")
            return
        if invocation != self.followed:
            raise self.fail(f"was restarted (invocation {self.followed[:8]} replaced by {invocation[:8]})")
        if int(state.get("NRestarts") or 0) > self.baseline_restarts or state.get("SubState") == "auto-restart":
            raise self.fail(f"crashed during start (exit {self.exit_text()}); systemd is restarting it")
        if state.get("ActiveState") == "failed":
            raise self.fail(f"failed (exit {self.exit_text()}, result {state.get('Result')})")
        if state.get("ActiveState") in ("inactive", "deactivating"):
            raise self.fail(f"stopped (state {state.get('ActiveState')}, exit {self.exit_text()})")

    def exit_text(self) -> str:
        code, status = self.state.get("ExecMainCode", ""), self.state.get("ExecMainStatus", "")
        return {"1": f"status {status}", "2": f"killed by signal {status}",
                "3": f"dumped core, signal {status}"}.get(code, f"code {code} status {status}")

    def read_journal(self) -> None:
        if not self.followed:
            return
        try:
            entries = journal(self.followed, self.progress.cursor)
        except OSError:
            return
        for entry in entries:
            self.progress.feed(entry["message"], entry["ts"])
            self.progress.cursor = entry["cursor"] or self.progress.cursor

    def poll(self) -> bool:
        self.state = unit_state(self.p["unit"])
        self.check_unit()
        self.read_journal()
        if self.followed and self.state.get("ActiveState") == "active" and self.p["url"]:
            ok, self.last_health = health(self.p["url"], self.p["health_timeout"])
            if ok:
                self.state = unit_state(self.p["unit"])
                self.check_unit()  # the answer must come from the invocation we follow
                return True
        return False

    def run(self) -> dict[str, Any]:
        deadline = self.started + self.p["timeout"]
        while True:
            ready = self.poll()
            write_status(self.p["status_file"], self.status())
            if ready:
                return self.result()
            if self.clock.time() >= deadline:
                raise self.fail(f"was not ready within {self.p['timeout']} s (last health answer: {self.last_health})")
            self.clock.sleep(self.p["interval"])

    def result(self) -> dict[str, Any]:
        now = self.clock.time()
        self.read_journal()
        result = self.status()
        result.update({"ready": True, "finished": True, "changed": False, "elapsed_s": round(now - self.started, 1),
                       "main_pid": int(self.state.get("MainPID") or 0),
                       "n_restarts": int(self.state.get("NRestarts") or 0)})
        if self.progress.fired_up_at is not None:
            result["fired_up_to_ready_s"] = round(now - self.progress.fired_up_at, 2)
        return result


def poll_job(module: AnsibleModule) -> None:
    """Poll mode: report the detached waiter's progress, or its result once it has ended."""
    p = module.params
    job_path = os.path.join(os.path.expanduser(p["async_dir"]), p["jid"])
    job = read_json(job_path)
    status = read_json(p["status_file"]) if p["status_file"] else None
    if job is None and not os.path.exists(job_path):
        module.fail_json(msg=f"no async job {p['jid']} in {p['async_dir']}", finished=True)
    if job is None or ("started" in job and not job.get("finished")):
        module.exit_json(changed=False, finished=False, sglang_progress=status or {}, **(status or {}))
    os.remove(job_path)
    job.pop("invocation", None)
    job["finished"] = True
    if job.get("failed"):
        module.fail_json(**job)
    module.exit_json(**job)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "required": True},
            "url": {"type": "str"},
            "previous_invocation_id": {"type": "str", "default": ""},
            "timeout": {"type": "int", "default": 1080},
            "interval": {"type": "float", "default": 2},
            "start_grace": {"type": "int", "default": 30},
            "health_timeout": {"type": "int", "default": 30},
            "journal_lines": {"type": "int", "default": 25},
            "status_file": {"type": "path"},
            "jid": {"type": "str"},
            "async_dir": {"type": "path", "default": "~/.ansible_async"},
        },
        required_by={"jid": ("status_file",)},
        supports_check_mode=True,
    )
    if module.params["jid"]:
        poll_job(module)
    if not module.params["url"]:
        module.fail_json(msg="url is required unless jid is given")
    waiter = Waiter(module.params)
    try:
        result = waiter.run()
    except WaitFailed as exc:
        status = waiter.status()
        write_status(module.params["status_file"], dict(status, failed=True))
        module.fail_json(msg=str(exc), ready=False, finished=True, **status)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
