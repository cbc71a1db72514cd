#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait until an SGLang systemd unit serves a real generation; fail fast when it cannot."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_ready
short_description: Wait for an SGLang unit to be ready, failing fast on a crash
author: sglang-deploy contributors (@sglang-deploy)
description:
  - Follows one invocation of a systemd unit running SGLang. On every poll it reads the unit's
    C(ActiveState), C(SubState), C(NRestarts) and C(InvocationID) and calls the server's health
    endpoint, which runs a real one-token generation (C(/health_generate)). The port being open,
    C(/ping) and C(/model_info) are never taken as ready.
  - It succeeds only for the invocation that started after O(previous_invocation_id). It fails
    within one poll interval when that invocation exits, fails, is restarted by systemd, or is
    replaced, and puts the invocation's last journal lines in the message.
  - It fails as soon as a load phase makes no progress for longer than its bound in
    O(stall_timeouts), quoting the last progress line, instead of waiting out the whole O(timeout).
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
    description:
      - Seconds the new invocation may take to answer a generation, counted from its main process's start
        (systemd's C(ExecMainStartTimestampMonotonic)), that is the model load. The load times the waiter
        records for the next budget are counted from the same start.
      - Until that process has started, the wait allows O(stop_timeout) more, for the process it replaces
        to stop.
    type: int
    default: 1080
  stop_timeout:
    description:
      - Seconds the process being replaced may take to stop, the unit's C(TimeoutStopSec=) (after it,
        systemd kills it). Allowed on top of O(timeout) while no new invocation has started, so a slow
        stop does not shorten the load's own budget.
    type: int
    default: 0
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
  observed_file:
    description:
      - When the server is ready, the waiter writes what its start measured there (RV(startup), with the
        time, the invocation, O(identity) and the load phases), for the capacity plan of the next run to
        calibrate from. Written only for a start whose figures could be read.
    type: path
  identity:
    description: The settings of the configuration that decide the memory before the KV pool, kept in O(observed_file).
    type: dict
    default: {}
  stall_timeouts:
    description:
      - Seconds each load phase may go without progress before the load counts as hung and the wait
        fails, quoting the last progress line. Keys C(starting), C(distributed_init),
        C(loading_weights) (between two shard updates), C(kv_cache), C(cuda_graphs) (between two
        captured batch sizes), C(host_kv_pool), C(warmup). A phase without a key is bounded only by
        O(timeout). A load that is slow but moving keeps waiting. The journal is read again before a
        silence counts, so a poll that took long itself is not mistaken for one.
    type: dict
    default: {}
  shard_progress:
    description:
      - Whether this host sees the weight loader's shard progress (global rank 0 does; the other nodes
        of a multi-node server do not), so that C(loading_weights) can be bounded between shards.
    type: bool
    default: true
  jid:
    description:
      - Poll mode. The async job id of a running waiter; returns C(finished=false) and the
        progress from O(status_file) while it runs, or the waiter's own result once it ended.
      - A job whose file is not written yet while a process of Ansible's async wrapper for it runs
        is still starting (the starting task returns after at most 2.5 s either way); with neither,
        the poll fails.
    type: str
  async_dir:
    description: Directory of Ansible's async job files (poll mode).
    type: path
    default: ~/.ansible_async
requirements:
  - systemd with C(journalctl)
extends_documentation_fragment: [sglang.deploy.attributes, sglang.deploy.attributes.read_only]
"""

EXAMPLES = r"""
- name: Start the readiness wait (detached)
  sglang.deploy.sglang_ready:
    unit: sglang-kimi.service
    url: http://127.0.0.1:30000/health_generate
    previous_invocation_id: "{{ previous.stdout }}"
    timeout: 1080
    stop_timeout: 390  # the unit's TimeoutStopSec
    status_file: /run/sglang-deploy/sglang-kimi.service.ready.json
  async: 1590  # timeout + stop_timeout + 120
  poll: 0
  register: ready_job

- name: Wait, showing progress
  sglang.deploy.sglang_ready:
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
  description: Whether the wait has ended; always true in wait mode.
  type: bool
  returned: always
  sample: true
ready:
  description: The unit answered a real generation.
  type: bool
  returned: when finished
  sample: true
unit:
  description: The unit waited for.
  type: str
  returned: when finished
  sample: sglang-kimi.service
elapsed_s:
  description: Seconds from the start of the wait to the answer (or the failure).
  type: float
  returned: when finished
  sample: 412.3
phase:
  description: Last load phase seen in the journal.
  type: str
  returned: when finished
  sample: fired up
describe:
  description: The phase in words, with the shard progress while weights load.
  type: str
  returned: when finished
  sample: loading weights 45% (29/64 shards)
progress:
  description: Last safetensors progress seen; null before the first shard.
  type: dict
  returned: when finished
  contains:
    percent:
      description: Percentage of shards loaded.
      type: int
      sample: 45
    done:
      description: Shards loaded.
      type: int
      sample: 29
    total:
      description: Shards in all.
      type: int
      sample: 64
phases:
  description: Each phase seen, in order, with the seconds since the wait started.
  type: list
  elements: dict
  returned: when finished
  contains:
    phase:
      description: The phase.
      type: str
      sample: loading weights
    key:
      description: The stall bound it falls under (a key of O(stall_timeouts)).
      type: str
      sample: loading_weights
    at_s:
      description: Seconds since the wait started.
      type: float
      sample: 12.5
  sample: [{"phase": "loading weights", "key": "loading_weights", "at_s": 12.5},
           {"phase": "fired up", "key": "warmup", "at_s": 398.0}]
stall_key:
  description: The stall bound the current phase falls under (a key of O(stall_timeouts)).
  type: str
  returned: when finished
  sample: warmup
last_progress_line:
  description: The last journal line that showed progress.
  type: str
  returned: when finished
  sample: "The server is fired up and ready to roll!"
invocation_id:
  description: The invocation followed (the one that became ready, or failed).
  type: str
  returned: when finished
  sample: 0b6c0f7d4e2a4b8c9d1e2f3a4b5c6d7e
active_state:
  description: systemd's ActiveState of the unit at the last poll.
  type: str
  returned: when finished
  sample: active
sub_state:
  description: systemd's SubState of the unit at the last poll.
  type: str
  returned: when finished
  sample: running
health:
  description: The last health answer, an HTTP status or why there was none.
  type: str
  returned: when finished
  sample: HTTP 200
main_pid:
  description: Main PID of the invocation that became ready.
  type: int
  returned: when ready
  sample: 48213
n_restarts:
  description: systemd's NRestarts counter for the unit.
  type: int
  returned: when ready
  sample: 0
startup:
  description:
    - What the start measured, read from its journal (module_utils sglang_startup), minimum across the
      ranks of this host; null when the journal lacks the weight-load lines.
  type: dict
  returned: when ready
  contains:
    pre_load_free_bytes:
      description: Free GPU memory before the weights loaded.
      type: int
      sample: 100738457928
    after_weights_free_bytes:
      description: Free GPU memory after the last weights loaded before the KV pool.
      type: int
      sample: 21249213972
    weights_bytes:
      description: What the weights took, the difference of the two.
      type: int
      sample: 79489243955
    kv_tokens:
      description: Tokens of the target's KV pool, per rank.
      type: int
      sample: 154998
    ranks:
      description: TP ranks whose lines were read.
      type: int
      sample: 8
    loads:
      description: Each weight load, with the architecture, seconds (SGLang's elapsed=) and memory used.
      type: list
      elements: dict
      sample: [{"architecture": "KimiK25ForConditionalGeneration", "elapsed_s": 244.1, "usage_bytes": 79006171217}]
    server_args:
      description: The memory-deciding settings of the start's server_args line, when it has one.
      type: dict
      sample: {"tp_size": 8, "mem_fraction_static": 0.85}
  sample: {"pre_load_free_bytes": 100738457928, "after_weights_free_bytes": 21249213972, "kv_tokens": 154998}
load:
  description:
    - The load's timings (module_utils _load), kept in O(observed_file) for the next deploy's readiness budget
      and stall bounds and for status.yml.
  type: dict
  returned: when ready
  contains:
    total_s:
      description:
        - Seconds from the start of the invocation's main process (systemd's C(ExecMainStartTimestampMonotonic))
          to the ready answer. Not the drain of the process it replaced, nor the wait for it.
        - Where systemd does not give that start, from the earlier of the invocation's first journal line and
          the first poll that saw the invocation.
      type: float
      sample: 712.4
    phases_s:
      description: Seconds spent under each stall key (C(starting) until the first phase).
      type: dict
      sample: {"starting": 3.1, "distributed_init": 9.8, "loading_weights": 664.0, "kv_cache": 4.2,
               "cuda_graphs": 21.5, "warmup": 9.8}
    silence_s:
      description: The longest time each stall key went without a progress line.
      type: dict
      sample: {"loading_weights": 11.2, "cuda_graphs": 6.0}
    weights_load_s:
      description: SGLang's own weight-load time, its C(elapsed=) summed over the model and the draft.
      type: float
      sample: 663.9
    weights_bytes:
      description: The size of the model's and the draft's safetensors on this host.
      type: int
      sample: 587354357760
    read_gb_per_s:
      description: The rate the weights were read at, RV(load.weights_bytes) over RV(load.weights_load_s), in GB/s.
      type: float
      sample: 0.885
  sample: {"total_s": 712.4, "weights_load_s": 663.9, "read_gb_per_s": 0.885}
fired_up_to_ready_s:
  description: Seconds from SGLang's "fired up and ready to roll" log line to the ready answer.
  type: float
  returned: when ready and the line was seen
  sample: 6.2
sglang_progress:
  description:
    - Poll mode, while the waiter runs - its last status from O(status_file) (empty before the first
      poll), which the C(sglang.deploy.sglang_progress) callback prints.
    - It has the keys unit, phase, describe, progress, elapsed_s, invocation_id, active_state, sub_state,
      health, phases, stall_key and last_progress_line, as documented above.
  type: dict
  returned: in poll mode while the wait runs
  sample: {"unit": "sglang-kimi.service", "phase": "loading weights", "describe": "loading weights 45% (29/64 shards)",
           "elapsed_s": 131.0, "health": "[Errno 111] Connection refused"}
"""

import json
import os
import re
import time
from http.client import HTTPException
from typing import Any, NoReturn, Protocol
from urllib.error import HTTPError, URLError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import open_url
from ansible_collections.sglang.deploy.plugins.module_utils import _load as load
from ansible_collections.sglang.deploy.plugins.module_utils._json_file import read_object, replace_atomically
from ansible_collections.sglang.deploy.plugins.module_utils._stall import ALLOWED as STALL_ALLOWED
from ansible_collections.sglang.deploy.plugins.module_utils._stall import stall_bounds
from ansible_collections.sglang.deploy.plugins.module_utils._systemd import SystemctlError
from ansible_collections.sglang.deploy.plugins.module_utils._systemd import show as systemctl_show
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_startup import StartupLogError, relevant
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_startup import read as read_startup

# SGLang's own log lines, in load order, as the pinned wheels 0.5.9 .. 0.5.23 write them (read from the
# wheels: srt/model_executor/model_runner.py, srt/distributed/bootstrap.py, srt/mem_cache/*,
# srt/managers/scheduler.py, srt/entrypoints/http_server.py; tests/fixtures/sglang-logs/ holds one
# startup log per version). Each phase: what it is called, the stall bound it falls under, and its markers.
PHASES = tuple((re.compile("|".join(markers), re.IGNORECASE), name, stall) for name, stall, markers in (
    ("initialising torch.distributed", "distributed_init", (r"Init torch distributed begin", r"Init parallel begin")),
    ("loading weights", "loading_weights",
     (r"Load weight begin", r"Loading safetensors checkpoint shards", r"Multi-thread loading shards")),
    ("weights loaded", "kv_cache", (r"Load weight end",)),
    ("allocating KV cache", "kv_cache",
     (r"KV Cache is allocated", r"KV Cache VA upper bound", r"Memory pool end", r"of the KV budget")),
    ("capturing CUDA graphs", "cuda_graphs", (r"Capture .*cuda graph begin",)),
    ("CUDA graphs captured", "cuda_graphs", (r"Capture .*cuda graph end",)),
    ("starting HTTP server", "host_kv_pool", (r"max_total_num_tokens=",)),
    ("allocating host KV pool", "host_kv_pool",
     (r"host memory for hierarchical KV cache", r"hierarchical KV host pool", r"HiCache auto-sizing")),
    ("warming up", "warmup", (r"Uvicorn running on", r"Application startup complete")),
    ("fired up", "warmup", (r"The server is fired up and ready to roll",)),
))
# Lines that show the load moving without starting a phase: the end of distributed init, the memory
# baseline (0.5.23), the per-batch-size CUDA-graph bars (tqdm on TP rank 0).
PROGRESS_RE = re.compile(r"Init (torch distributed|parallel) ends|Memory baseline taken|"
                         r"Capturing (batches|prefill shape|num tokens)", re.IGNORECASE)
# tqdm bar of the weight loader: "safetensors checkpoint" before 0.5.12, "Multi-thread loading" after.
# Only global rank 0 draws it: the other nodes of a multi-node server see no shard progress.
SHARDS_RE = re.compile(
    r"(?:Loading safetensors checkpoint|Multi-thread loading) shards:\s*(\d+)% Completed \| (\d+)/(\d+)")
# ExecMainStartTimestampMonotonic: when the main process of the current invocation started (microseconds of
# CLOCK_MONOTONIC), 0 until it has (systemd resets it with the invocation ID: tests/fixtures/systemd/README.md).
SHOW_PROPS = ("ActiveState", "SubState", "NRestarts", "InvocationID", "MainPID", "ExecMainStatus",
              "ExecMainCode", "Result", "LoadState", "ExecMainStartTimestampMonotonic")


class WaitFailed(Exception):
    """The unit cannot become ready in this invocation."""


class Progress:
    """Load progress of one invocation, read incrementally from the journal."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.phase_index = -1
        self.phase = "starting"
        self.stall_key = "starting"
        self.progress: dict[str, int] | None = None
        self.phases: list[dict[str, Any]] = []
        self.fired_up_at: float | None = None
        self.cursor: str | None = None
        self.moved_at: float | None = None  # the last sign of progress (journal time)
        self.last_line = ""
        self.startup_lines: list[str] = []  # the lines sglang_startup reads (memory figures, server_args)
        self.silence: dict[str, float] = {}  # stall key -> its longest time without a progress line
        self.origin: float | None = None  # the invocation's first journal line: where its load began

    def begin(self, now: float) -> None:
        """The followed invocation runs: the stall clock starts now, in phase "starting"."""
        if self.moved_at is None:
            self.moved_at = now

    def feed(self, message: str, timestamp: float) -> None:
        if self.origin is None:
            self.origin = timestamp
        for line in re.split(r"[\r\n]+", message):
            if relevant(line):
                self.startup_lines.append(line)  # what sglang_startup reads once the server is ready
            moved = self._shards(line)
            for index, (marker, name, stall) in enumerate(PHASES):
                if not marker.search(line):
                    continue
                moved = True  # a draft model's lines come after the target's later phases: progress all the same
                if index > self.phase_index:
                    self._silent_until(timestamp)  # the silence before a new phase was the old phase's
                    self.phase_index, self.phase, self.stall_key = index, name, stall
                    if not self.phases or self.phases[-1]["phase"] != name:
                        self.phases.append({"phase": name, "key": stall, "at_s": round(timestamp - self.started, 1)})
                    if name == "fired up":
                        self.fired_up_at = timestamp
            if moved or PROGRESS_RE.search(line):
                self._silent_until(timestamp)
                self.moved_at = max(self.moved_at or timestamp, timestamp)
                self.last_line = line.strip()[:300]

    def _silent_until(self, timestamp: float) -> None:
        """The current phase was silent from the last progress line until ``timestamp``."""
        if self.moved_at is not None:
            idle = max(timestamp - self.moved_at, 0.0)
            self.silence[self.stall_key] = max(self.silence.get(self.stall_key, 0.0), idle)

    def _shards(self, line: str) -> bool:
        match = SHARDS_RE.search(line)
        if not match:
            return False
        progress = {"percent": int(match.group(1)), "done": int(match.group(2)), "total": int(match.group(3))}
        moved = progress != self.progress
        self.progress = progress
        return moved

    def stalled(self, now: float, bounds: dict[str, int], shard_progress: bool = True) -> str | None:
        """Why the load counts as hung: no progress in the current phase for longer than its bound."""
        bound = bounds.get(self.stall_key)
        if self.moved_at is None or not bound or (self.stall_key == "loading_weights" and not shard_progress):
            return None
        idle = now - self.moved_at
        if idle <= bound:
            return None
        last = f"'{self.last_line}' {now - self.moved_at:.0f} s ago" if self.last_line else "none since the start"
        return (f"made no progress for {idle:.0f} s while {self.describe()} (stall bound "
                f"sglang_service_stall_timeouts.{self.stall_key} = {bound} s); last progress line: {last}")

    def describe(self) -> str:
        text = self.phase
        if self.progress and self.phase == "loading weights":
            text += " {percent}% ({done}/{total} shards)".format(**self.progress)
        return text


class HostError(Exception):
    """A command on the host failed."""


class Host(Protocol):
    """What the waiter reads on the host: the unit's state, its journal and the health answer."""

    def unit_state(self, unit: str) -> dict[str, str]: ...

    def journal(self, invocation: str, cursor: str | None = None, lines: int | None = None) -> list[dict[str, Any]]:
        ...

    def health(self, url: str, timeout: int) -> tuple[bool, str]: ...


def _message_text(value: Any) -> str:
    """journalctl -o json gives MESSAGE as a byte array when it holds control characters (\\r)."""
    if isinstance(value, list):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


def journal_argv(journalctl: str, invocation: str, cursor: str | None, lines: int | None) -> list[str]:
    """Entries of one invocation: the service's own output and systemd's messages about it."""
    argv = [journalctl, "--no-pager", "-o", "json", "_SYSTEMD_INVOCATION_ID=" + invocation, "+",
            "INVOCATION_ID=" + invocation]
    if cursor:
        argv.append("--after-cursor=" + cursor)
    if lines:
        argv.extend(["-n", str(lines)])
    return argv


def parse_journal(text: str) -> list[dict[str, Any]]:
    """journalctl -o json lines -> [{cursor, ts (seconds), message}]; lines that are not JSON are skipped."""
    entries = []
    for raw in text.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        entries.append({"cursor": entry.get("__CURSOR"),
                        "ts": int(entry.get("__REALTIME_TIMESTAMP", "0")) / 1e6,
                        "message": _message_text(entry.get("MESSAGE"))})
    return entries


class SystemdHost:
    """The host itself, read through the module: systemctl, journalctl and the health URL."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module

    def unit_state(self, unit: str) -> dict[str, str]:
        return systemctl_show(self.module, unit, SHOW_PROPS)

    def journal(self, invocation: str, cursor: str | None = None, lines: int | None = None) -> list[dict[str, Any]]:
        journalctl = self.module.get_bin_path("journalctl")
        if not journalctl:
            raise HostError("journalctl is not installed")
        argv = journal_argv(journalctl, invocation, cursor, lines)
        rc, out, err = self.module.run_command(argv, errors="surrogate_or_replace")
        if rc != 0:
            raise HostError(f"{' '.join(argv)} failed ({rc}): {err.strip()}")
        return parse_journal(out)

    def health(self, url: str, timeout: int) -> tuple[bool, str]:
        try:
            with open_url(url, method="GET", timeout=timeout) as answer:
                return answer.status == 200, f"HTTP {answer.status}"
        except HTTPError as exc:
            return False, f"HTTP {exc.code}"
        except (URLError, OSError, HTTPException, UrlsConnectionError) as exc:
            return False, str(getattr(exc, "reason", exc))


def journal_excerpt(host: Host, invocation: str, count: int) -> str:
    if not invocation:
        return "(no invocation: the unit never started)"
    try:
        entries = host.journal(invocation, lines=count * 4)
    except HostError as exc:
        return f"(journal unavailable: {exc})"
    lines = [part for entry in entries for part in re.split(r"[\r\n]+", entry["message"]) if part.strip()]
    return "\n".join(lines[-count:]) or "(no journal lines)"


def write_status(path: str | None, status: dict[str, Any]) -> None:
    if path:
        replace_atomically(path, status)


class Waiter:
    """One wait: follow the new invocation until it answers a generation or cannot."""

    def __init__(self, params: dict[str, Any], host: Host, clock: Any = time) -> None:
        self.p = params
        self.host = host
        self.clock = clock
        self.started = clock.time()
        self.progress = Progress(self.started)
        self.previous = params["previous_invocation_id"] or ""
        self.followed = ""
        self.baseline_restarts = 0
        self.last_health = "not asked yet"
        self.state: dict[str, str] = {}
        self.seen_at: float | None = None  # the first poll that saw the followed invocation
        self.main_started_at: float | None = None  # its main process's start (systemd), on this clock

    def elapsed(self) -> float:
        return round(self.clock.time() - self.started, 1)

    def describe(self) -> str:
        """The load's progress; before the new invocation, that the one it replaces has yet to stop."""
        if not self.followed and self.previous and self.state.get("InvocationID") == self.previous:
            return (f"waiting for the server it replaces to stop ({self.state.get('ActiveState')}/"
                    f"{self.state.get('SubState')})")
        return self.progress.describe()

    def status(self) -> dict[str, Any]:
        return {"unit": self.p["unit"], "phase": self.progress.phase, "progress": self.progress.progress,
                "describe": self.describe(), "elapsed_s": self.elapsed(),
                "invocation_id": self.followed, "active_state": self.state.get("ActiveState"),
                "sub_state": self.state.get("SubState"), "health": self.last_health,
                "phases": self.progress.phases, "stall_key": self.progress.stall_key,
                "last_progress_line": self.progress.last_line}

    def fail(self, why: str) -> WaitFailed:
        self.clock.sleep(0.5)  # let journald take in the last lines the process wrote
        invocation = self.followed or self.state.get("InvocationID", "")
        excerpt = journal_excerpt(self.host, invocation, self.p["journal_lines"])
        return WaitFailed(f"{self.p['unit']} {why} after {self.elapsed():.0f} s; last progress: "
                          f"{self.progress.describe()}\n--- journal of the invocation ---\n{excerpt}")

    def check_unit(self) -> None:
        """Raise WaitFailed when the followed invocation is gone; start following a new one."""
        state = self.state
        invocation = state.get("InvocationID", "")
        if state.get("LoadState") == "not-found":
            raise self.fail("does not exist")
        if not self.followed:
            if not invocation or invocation == self.previous:
                # A start systemd refuses keeps the stopped invocation's ID (tests/fixtures/systemd): no grace.
                if state.get("ActiveState") == "failed" and state.get("Result") == "start-limit-hit":
                    raise self.fail("was not started: systemd refused the start as one too many within "
                                    "StartLimitIntervalSec= (StartLimitBurst=, Result=start-limit-hit)")
                if state.get("ActiveState") in ("inactive", "failed") and \
                        self.clock.time() - self.started > self.p["start_grace"]:
                    raise self.fail(f"did not start (state {state.get('ActiveState')})")
                return
            # Followed from this poll on, and checked at once: a waiter that starts late (a busy host) may first
            # see the new invocation already crashed and waiting in auto-restart.
            self.followed = invocation
            self.baseline_restarts = int(state.get("NRestarts") or 0)
            self.seen_at = self.clock.time()
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
            entries = self.host.journal(self.followed, self.progress.cursor)
        except HostError:
            return
        for entry in entries:
            self.progress.feed(entry["message"], entry["ts"])
            self.progress.cursor = entry["cursor"] or self.progress.cursor

    def poll(self) -> bool:
        self.state = self.host.unit_state(self.p["unit"])
        self.check_unit()
        self.note_main_start()
        self.read_journal()
        if self.followed:
            self.progress.begin(self.clock.time())
        if self.followed and self.state.get("ActiveState") == "active" and self.p["url"]:
            ok, self.last_health = self.host.health(self.p["url"], self.p["health_timeout"])
            if ok:
                self.state = self.host.unit_state(self.p["unit"])
                self.check_unit()  # the answer must come from the invocation we follow
                return True
        return False

    def deadline(self) -> float:
        """When the wait gives up: O(timeout) after the new invocation's start (the load's own clock, that of the
        budget learned from earlier loads); until one has started, O(stop_timeout) later than that after the
        wait's start, as the process it replaces may first take that long to stop. systemd kills it then: in
        systemd-stable v252.31 src/core/service.c, service_enter_signal arms the stop-sigterm timer at
        now + timeout_stop_usec, and service_dispatch_timer sends SIGKILL when it fires; the restart, and so the
        stop, was asked for before this wait began."""
        if self.followed:
            return self.load_origin() + self.p["timeout"]
        return self.started + self.p["stop_timeout"] + self.p["timeout"]

    def timed_out(self) -> WaitFailed:
        if self.followed:
            return self.fail(f"was not ready within {self.p['timeout']} s of its start "
                             f"(last health answer: {self.last_health})")
        total = self.p["stop_timeout"] + self.p["timeout"]
        return self.fail(f"was not ready within {total} s: no new invocation started (the unit is "
                         f"{self.state.get('ActiveState')}/{self.state.get('SubState')}, invocation "
                         f"{self.state.get('InvocationID', '')[:8] or 'none'}; last health answer: {self.last_health})")

    def run(self) -> dict[str, Any]:
        while True:
            ready = self.poll()
            write_status(self.p["status_file"], self.status())
            if ready:
                return self.result()
            stalled = self.stalled()
            if stalled:
                # A poll may itself take long (a health request that waits its timeout, a slow systemctl): what
                # the journal received meanwhile is read before the silence counts as a hang.
                self.read_journal()
                stalled = self.stalled()
            if stalled:
                raise self.fail(stalled)
            if self.clock.time() >= self.deadline():
                raise self.timed_out()
            self.clock.sleep(self.p["interval"])

    def note_main_start(self) -> None:
        """When the followed invocation's main process started, once systemd has started it. The state was read
        with the invocation check_unit has just matched, and systemd resets the timestamp to 0 when it gives a start
        its invocation ID: a value here is this invocation's, never the process it replaced."""
        if not self.followed or self.main_started_at is not None:
            return
        try:
            microseconds = int(self.state.get("ExecMainStartTimestampMonotonic") or 0)
        except ValueError:
            return
        if microseconds > 0:
            # The same CLOCK_MONOTONIC as systemd's (time.monotonic on Linux), moved onto the journal's wall clock.
            self.main_started_at = self.clock.time() - (self.clock.monotonic() - microseconds / 1e6)

    def load_origin(self) -> float:
        """Where the load began: the main process's start, or else the earliest sign of the invocation (its first
        journal line, the poll that first saw it). Never the start of the wait, which precedes the stop and drain
        of the process the new one replaces."""
        if self.main_started_at is not None:
            return self.main_started_at
        signs = [at for at in (self.progress.origin, self.seen_at) if at is not None]
        return min(signs) if signs else self.started

    def stalled(self) -> str | None:
        return self.progress.stalled(self.clock.time(), self.p["stall_timeouts"] or {}, self.p["shard_progress"])

    def result(self) -> dict[str, Any]:
        now = self.clock.time()
        self.read_journal()
        result = self.status()
        result.update({"ready": True, "finished": True, "changed": False, "elapsed_s": round(now - self.started, 1),
                       "main_pid": int(self.state.get("MainPID") or 0),
                       "n_restarts": int(self.state.get("NRestarts") or 0)})
        if self.progress.fired_up_at is not None:
            result["fired_up_to_ready_s"] = round(now - self.progress.fired_up_at, 2)
        try:
            result["startup"] = read_startup("\n".join(self.progress.startup_lines)).as_dict()
        except StartupLogError:
            result["startup"] = None
        identity = self.p.get("identity") or {}
        # The load's own clock starts with the invocation (a wait that starts late, on a busy controller, still sees
        # the whole load; one that starts before the restart does not count the old process's drain).
        origin = self.load_origin()
        since_origin = [dict(p, at_s=max(round(p["at_s"] + self.started - origin, 1), 0.0))
                        for p in self.progress.phases]
        result["load"] = load.timings(
            since_origin, round(now - origin, 1), (result["startup"] or {}).get("loads") or [],
            load.safetensors_bytes(identity.get("model_path"), identity.get("speculative_draft_model_path")),
            self.progress.silence)
        if result["startup"] and self.p.get("observed_file"):
            replace_atomically(self.p["observed_file"], mode=0o644, data={  # no secret in it: readable by all
                "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), "unit": self.p["unit"],
                "invocation_id": self.followed, "identity": identity, "startup": result["startup"],
                "phases": result["phases"], "ready_after_s": result["elapsed_s"], "load": result["load"]})
        return result


def finished_job(path: str) -> dict[str, Any] | None:
    """The waiter's result once its async job has ended; None while it runs.

    Ansible's async wrapper writes ``{"started": true, "finished": false}`` to the job file when the job
    starts, and replaces it with the module's result (or a failure of its own, such as its time limit)
    when it ends; a file it is still writing does not parse. async_status reads it by the same rules.
    """
    job = read_object(path)
    if job is None or ("started" in job and not job.get("finished")):
        return None
    job.pop("invocation", None)  # the waiter's own arguments, not part of its result
    return dict(job, finished=True)


PROC = "/proc"


def wrapper_running(jid: str) -> bool:
    """Whether a process of Ansible's async wrapper for job `jid` runs.

    The task that starts a job returns after at most 2.5 s whether the wrapper has written the job file yet
    or not (async_wrapper.py), so on a busy host the first poll can come before the file. Every process of
    the job has the argv ``<python> .../async_wrapper.py <jid without .pid> <limit> <module> <args>`` from
    before the file is written until the job ends (tests/fixtures/ansible/).
    """
    first = jid.rsplit(".", 1)[0].encode()
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        try:
            with open(os.path.join(entry.path, "cmdline"), "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:  # the process ended meanwhile
            continue
        for index, arg in enumerate(argv[:-1]):
            if os.path.basename(arg).startswith(b"async_wrapper") and argv[index + 1] == first:
                return True
    return False


def poll_job(module: AnsibleModule) -> NoReturn:
    """Poll mode: the detached waiter's progress while it runs; its result or failure once it has ended,
    when its job file is removed (async_status mode=cleanup). A job whose wrapper runs but has not written
    its file yet is still starting; a job with neither is gone."""
    p = module.params
    path = os.path.join(p["async_dir"], p["jid"])
    # The file is looked for again after the processes: a job that wrote it and ended meanwhile is not gone.
    if not os.path.exists(path) and not wrapper_running(p["jid"]) and not os.path.exists(path):
        module.fail_json(msg=f"no async job {p['jid']} in {p['async_dir']} and no process of it runs",
                         finished=True)
    result = finished_job(path)
    if result is None:
        module.exit_json(changed=False, finished=False, sglang_progress=read_object(p["status_file"]) or {})
    os.remove(path)
    if result.get("failed"):
        module.fail_json(msg=result.pop("msg", "the readiness waiter failed"), **result)
    module.exit_json(**result)


def wait(module: AnsibleModule) -> NoReturn:
    """Wait mode: follow the unit until it answers a generation, or fail with why it cannot."""
    if not module.params["url"]:
        module.fail_json(msg="url is required unless jid is given")
    for name in ("timeout", "stop_timeout"):
        if module.params[name] < 0:
            module.fail_json(msg=f"{name} must be 0 or more seconds, got {module.params[name]}")
    bounds, problems = stall_bounds(module.params["stall_timeouts"])
    if problems:
        module.fail_json(msg=f"stall_timeouts: {'; '.join(problems)}; allowed: {STALL_ALLOWED}")
    waiter = Waiter(dict(module.params, stall_timeouts=bounds), SystemdHost(module))
    try:
        result = waiter.run()
    except (WaitFailed, SystemctlError) as exc:
        status = waiter.status()
        write_status(module.params["status_file"], dict(status, failed=True))
        module.fail_json(msg=str(exc), ready=False, finished=True, **status)
    module.exit_json(**result)


ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "unit": {"type": "str", "required": True},
    "url": {"type": "str"},
    "previous_invocation_id": {"type": "str", "default": ""},
    "timeout": {"type": "int", "default": 1080},
    "stop_timeout": {"type": "int", "default": 0},
    "interval": {"type": "float", "default": 2},
    "start_grace": {"type": "int", "default": 30},
    "health_timeout": {"type": "int", "default": 30},
    "journal_lines": {"type": "int", "default": 25},
    "status_file": {"type": "path"},
    "observed_file": {"type": "path"},
    "identity": {"type": "dict", "default": {}},
    "stall_timeouts": {"type": "dict", "default": {}},
    "shard_progress": {"type": "bool", "default": True},
    "jid": {"type": "str"},
    "async_dir": {"type": "path", "default": "~/.ansible_async"},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_by={"jid": ("status_file",)},
                           supports_check_mode=True)
    if module.params["jid"]:
        poll_job(module)
    wait(module)


if __name__ == "__main__":
    main()
