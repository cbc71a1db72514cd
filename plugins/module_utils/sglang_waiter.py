# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The readiness waiter of module sglang_ready: follow one invocation of an SGLang unit until it answers a real
generation, and fail fast when it cannot.

``Waiter`` polls a ``Host`` (the unit's state, its journal, the health URL; ``SystemdHost`` reads the real one
through the module's run_command and open_url) on a ``Clock`` (the ``time`` module, or a test's fake).
``Progress`` reads SGLang's load phases and shard progress from the invocation's journal lines. A ready
start's timings come from module_utils _load, its memory figures from sglang_startup; the stall bounds are
those of _stall; the status and record files are written with _json_file.
"""

from __future__ import annotations

import json
import re
import time
from http.client import HTTPException
from typing import Any, Protocol
from urllib.error import HTTPError, URLError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import open_url
from ansible_collections.sglang.deploy.plugins.module_utils import _load as load
from ansible_collections.sglang.deploy.plugins.module_utils._json_file import replace_atomically
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
            self._line(line, timestamp)

    def _line(self, line: str, timestamp: float) -> None:
        if relevant(line):
            self.startup_lines.append(line)  # what sglang_startup reads once the server is ready
        moved = self._shards(line)
        for index, (marker, name, stall) in enumerate(PHASES):
            if marker.search(line):
                moved = True  # a draft model's lines come after the target's later phases: progress all the same
                self._enter(index, name, stall, timestamp)
        if moved or PROGRESS_RE.search(line):
            self._silent_until(timestamp)
            self.moved_at = max(self.moved_at or timestamp, timestamp)
            self.last_line = line.strip()[:300]

    def _enter(self, index: int, name: str, stall: str, timestamp: float) -> None:
        """A line of phase ``index``: the load has reached it, unless it is already past it."""
        if index <= self.phase_index:
            return
        self._silent_until(timestamp)  # the silence before a new phase was the old phase's
        self.phase_index, self.phase, self.stall_key = index, name, stall
        if not self.phases or self.phases[-1]["phase"] != name:
            self.phases.append({"phase": name, "key": stall, "at_s": round(timestamp - self.started, 1)})
        if name == "fired up":
            self.fired_up_at = timestamp

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


class Clock(Protocol):
    """The waiter's time: the ``time`` module, or a test's fake clock."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


def message_text(value: Any) -> str:
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
                        "message": message_text(entry.get("MESSAGE"))})
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
        """GET the health URL; an https one is verified against the module's ``ca_path`` (the server's CA, TLS on),
        so a wrong certificate is a failed check, never a trusted answer."""
        ca_path = self.module.params.get("ca_path") or None
        try:
            with open_url(url, method="GET", timeout=timeout, validate_certs=True, ca_path=ca_path) as answer:
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


def exit_text(state: dict[str, str]) -> str:
    """How the unit's main process ended, from systemd's ExecMainCode (CLD_* of waitid) and ExecMainStatus."""
    code, status = state.get("ExecMainCode", ""), state.get("ExecMainStatus", "")
    return {"1": f"status {status}", "2": f"killed by signal {status}",
            "3": f"dumped core, signal {status}"}.get(code, f"code {code} status {status}")


class Waiter:
    """One wait: follow the new invocation until it answers a generation or cannot.

    ``params`` are the module's wait-mode options, with the stall bounds already checked (_stall.stall_bounds).
    """

    def __init__(self, params: dict[str, Any], host: Host, clock: Clock = time) -> None:
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
        if self.state.get("LoadState") == "not-found":
            raise self.fail("does not exist")
        if self.followed or self.follow_new_invocation():
            self.check_followed()

    def follow_new_invocation(self) -> bool:
        """Follow the unit's invocation from this poll on when it is a new one; False while there is none yet."""
        invocation = self.state.get("InvocationID", "")
        if not invocation or invocation == self.previous:
            self.check_start()
            return False
        # Followed from this poll on, and checked at once: a waiter that starts late (a busy host) may first
        # see the new invocation already crashed and waiting in auto-restart.
        self.followed = invocation
        self.baseline_restarts = int(self.state.get("NRestarts") or 0)
        self.seen_at = self.clock.time()
        return True

    def check_start(self) -> None:
        """No new invocation yet: raise WaitFailed when systemd refused the start or the grace has passed."""
        active = self.state.get("ActiveState")
        # A start systemd refuses keeps the stopped invocation's ID (tests/fixtures/systemd): no grace.
        if active == "failed" and self.state.get("Result") == "start-limit-hit":
            raise self.fail("was not started: systemd refused the start as one too many within "
                            "StartLimitIntervalSec= (StartLimitBurst=, Result=start-limit-hit)")
        if active in ("inactive", "failed") and self.clock.time() - self.started > self.p["start_grace"]:
            raise self.fail(f"did not start (state {active})")

    def check_followed(self) -> None:
        """Raise WaitFailed when the followed invocation was replaced, crashed, failed or stopped."""
        state = self.state
        invocation = state.get("InvocationID", "")
        if invocation != self.followed:
            raise self.fail(f"was restarted (invocation {self.followed[:8]} replaced by {invocation[:8]})")
        if int(state.get("NRestarts") or 0) > self.baseline_restarts or state.get("SubState") == "auto-restart":
            raise self.fail(f"crashed during start (exit {exit_text(state)}); systemd is restarting it")
        if state.get("ActiveState") == "failed":
            raise self.fail(f"failed (exit {exit_text(state)}, result {state.get('Result')})")
        if state.get("ActiveState") in ("inactive", "deactivating"):
            raise self.fail(f"stopped (state {state.get('ActiveState')}, exit {exit_text(state)})")

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
        result["load"] = self.load_timings(now, result["startup"])
        if result["startup"] and self.p.get("observed_file"):
            self.record(now, result)
        return result

    def load_timings(self, now: float, startup: dict[str, Any] | None) -> dict[str, Any]:
        """The load's timings (_load.timings), on the load's own clock: it starts with the invocation (a wait that
        starts late, on a busy controller, still sees the whole load; one that starts before the restart does not
        count the old process's drain)."""
        identity = self.p.get("identity") or {}
        origin = self.load_origin()
        since_origin = [dict(p, at_s=max(round(p["at_s"] + self.started - origin, 1), 0.0))
                        for p in self.progress.phases]
        return load.timings(
            since_origin, round(now - origin, 1), (startup or {}).get("loads") or [],
            load.safetensors_bytes(identity.get("model_path"), identity.get("speculative_draft_model_path")),
            self.progress.silence)

    def record(self, now: float, result: dict[str, Any]) -> None:
        """What the start measured, in O(observed_file), for the next plan and readiness budget."""
        replace_atomically(self.p["observed_file"], mode=0o644, data={  # no secret in it: readable by all
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), "unit": self.p["unit"],
            "invocation_id": self.followed, "identity": self.p.get("identity") or {}, "startup": result["startup"],
            "phases": result["phases"], "ready_after_s": result["elapsed_s"], "load": result["load"]})
