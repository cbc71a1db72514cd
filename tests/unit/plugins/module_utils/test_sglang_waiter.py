"""The readiness waiter (module_utils sglang_waiter): follows one invocation, fails fast, reads progress from the
journal, records what a start measured."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_waiter
from ansible_collections.sglang.deploy.plugins.module_utils._stall import STALL_KEYS, stall_bounds
from ansible_collections.sglang.deploy.plugins.module_utils._systemd import parse_show
from helpers import ROOT, FakeClock

START = 1_000.0  # the fake clock's time when a test begins


class FakeHost:
    """A scripted unit: each poll advances to the next state; the journal grows with it."""

    def __init__(self, states: list[dict[str, str]], journal: list[tuple[str, str]] | None = None,
                 health_from: int | None = None) -> None:
        self.states = states
        self.journal_entries = journal or []  # (invocation, message)
        self.health_from = health_from
        self.polls = 0
        self.health_calls = 0

    def unit_state(self, unit: str) -> dict[str, str]:
        state = self.states[min(self.polls, len(self.states) - 1)]
        self.polls += 1
        return {"LoadState": "loaded", "NRestarts": "0", "ExecMainCode": "0", "ExecMainStatus": "0", **state}

    def journal(self, invocation: str, cursor: str | None = None, lines: int | None = None) -> list[dict[str, Any]]:
        start = int(cursor) + 1 if cursor else 0
        return [{"cursor": str(i), "ts": 1_000.0 + i, "message": msg}
                for i, (inv, msg) in enumerate(self.journal_entries) if i >= start and inv == invocation]

    def health(self, url: str, timeout: int) -> tuple[bool, str]:
        self.health_calls += 1
        if self.health_from is not None and self.polls >= self.health_from:
            return True, "HTTP 200"
        return False, "[Errno 111] Connection refused"


PARAMS = {"unit": "sglang-kimi.service", "url": "http://127.0.0.1:30000/health_generate",
          "previous_invocation_id": "old", "timeout": 60, "stop_timeout": 0, "interval": 2, "start_grace": 10,
          "health_timeout": 30, "journal_lines": 5, "status_file": None, "stall_timeouts": {},
          "shard_progress": True}


def active(inv: str, sub: str = "running", restarts: str = "0") -> dict[str, str]:
    return {"ActiveState": "active", "SubState": sub, "InvocationID": inv, "NRestarts": restarts, "MainPID": "42"}


LOAD = [
    ("new", "[2026-11-29 10:00:00 TP0] Load weight begin. avail mem=94.12 GB"),
    ("new", "Loading safetensors checkpoint shards:  45% Completed | 29/64 [00:03<00:04,  8.00it/s]"),
    ("new", "[2026-11-29 10:00:09] The server is fired up and ready to roll!"),
]


def test_waits_through_the_old_process_and_accepts_only_the_new_invocation() -> None:
    # old is still active (draining), then deactivating, then the new invocation loads and answers.
    fake = FakeHost([active("old"), {"ActiveState": "deactivating", "SubState": "stop-sigterm",
                                     "InvocationID": "old"}, active("new"), active("new"), active("new")],
                    journal=LOAD, health_from=4)
    result = sglang_waiter.Waiter(dict(PARAMS), fake, FakeClock(START)).run()
    assert result["ready"] and result["invocation_id"] == "new" and result["main_pid"] == 42
    assert result["phase"] == "fired up"
    assert result["progress"] == {"percent": 45, "done": 29, "total": 64}
    assert "fired_up_to_ready_s" in result
    assert fake.health_calls == 2  # asked only once the new invocation ran (polls 3 and 4)


def test_health_of_the_old_invocation_never_counts() -> None:
    fake = FakeHost([active("old")], health_from=0)
    with pytest.raises(sglang_waiter.WaitFailed, match="was not ready within 60 s: no new invocation started"):
        sglang_waiter.Waiter(dict(PARAMS), fake, FakeClock(START)).run()


def test_crash_during_load_fails_at_the_next_poll() -> None:
    crash = LOAD[:2] + [("new", "RuntimeError: CUDA error: an illegal memory access was encountered"),
                        ("new", "sglang-kimi.service: Main process exited, code=exited, status=1/FAILURE")]
    fake = FakeHost([active("new"), active("new"),
                     {"ActiveState": "activating", "SubState": "auto-restart", "InvocationID": "new",
                      "NRestarts": "1", "ExecMainCode": "1", "ExecMainStatus": "1"}], journal=crash)
    clock = FakeClock(START)
    with pytest.raises(sglang_waiter.WaitFailed) as failure:
        sglang_waiter.Waiter(dict(PARAMS), fake, clock).run()
    message = str(failure.value)
    assert "crashed during start (exit status 1)" in message
    assert "loading weights 45% (29/64 shards)" in message
    assert "CUDA error" in message and "--- journal of the invocation ---" in message
    assert clock.now - 1_000.0 <= 2 * PARAMS["interval"] + 1  # two polls, then the failure


def test_a_waiter_that_first_sees_the_new_invocation_already_crashed_says_so() -> None:
    """A busy host starts the waiter late: its first poll finds the new invocation in auto-restart, its restart
    already counted. That is the crash, not the later replacement by systemd's restart (CI saw this once)."""
    crash = LOAD[:2] + [("new", "RuntimeError: CUDA error: an illegal memory access was encountered")]
    fake = FakeHost([{"ActiveState": "activating", "SubState": "auto-restart", "InvocationID": "new",
                      "NRestarts": "1", "ExecMainCode": "1", "ExecMainStatus": "1"}, active("newer", restarts="1")],
                    journal=crash)
    with pytest.raises(sglang_waiter.WaitFailed) as failure:
        sglang_waiter.Waiter(dict(PARAMS), fake, FakeClock(START)).run()
    assert "crashed during start (exit status 1)" in str(failure.value)
    assert fake.polls == 1


def test_a_replaced_invocation_is_a_failure() -> None:
    fake = FakeHost([active("new"), active("newer")])
    with pytest.raises(sglang_waiter.WaitFailed, match="was restarted"):
        sglang_waiter.Waiter(dict(PARAMS), fake, FakeClock(START)).run()


def test_a_failed_unit_is_reported_with_its_result() -> None:
    fake = FakeHost([active("new"), {"ActiveState": "failed", "SubState": "failed", "InvocationID": "new",
                                     "Result": "start-limit-hit", "ExecMainCode": "2", "ExecMainStatus": "9"}])
    with pytest.raises(sglang_waiter.WaitFailed, match=r"failed \(exit killed by signal 9, result start-limit-hit\)"):
        sglang_waiter.Waiter(dict(PARAMS), fake, FakeClock(START)).run()


def test_a_start_systemd_refuses_at_its_start_limit_fails_at_once() -> None:
    """The real state systemd 252 shows after refusing a start (tests/fixtures/systemd): failed, result
    start-limit-hit, and the stopped invocation's ID, the one the waiter was told to look past."""
    text = (ROOT / "tests/fixtures/systemd/show-start-limit-hit-252.txt").read_text()
    refused = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    fake = FakeHost([refused])
    with pytest.raises(sglang_waiter.WaitFailed) as failure:
        sglang_waiter.Waiter(dict(PARAMS, previous_invocation_id=refused["InvocationID"]), fake, FakeClock(START)).run()
    assert "was not started: systemd refused the start as one too many" in str(failure.value)
    assert "Result=start-limit-hit" in str(failure.value)
    assert fake.polls == 1  # not after the start grace


def restart_snapshots() -> list[tuple[float, dict[str, str]]]:
    """The real `systemctl show` of a unit across a restart on systemd 252 (tests/fixtures/systemd): the old
    invocation running, draining, the new one in ExecStartPre, then its main process running. Each with the
    container's CLOCK_MONOTONIC when it was taken."""
    text = (ROOT / "tests/fixtures/systemd/show-restart-252.txt").read_text()
    blocks = [block.split("\n", 1) for block in text.split("# ")[1:]]  # "<what> monotonic_s=<s>", then the show
    return [(float(head.rsplit("monotonic_s=", 1)[1]), parse_show(show)) for head, show in blocks]


class SnapshotClock(FakeClock):
    """The fake clock, with the fixture's CLOCK_MONOTONIC: fake START is the first snapshot's monotonic time."""

    def __init__(self, monotonic_at_start: float) -> None:
        super().__init__(START)
        self.offset = monotonic_at_start - START

    def monotonic(self) -> float:
        return self.now + self.offset


def test_the_load_is_timed_from_the_new_main_process_not_the_drain_of_the_old() -> None:
    """A wait starts before the restart: the old process drains, the new invocation runs ExecStartPre (systemd has
    reset its main start to 0), then its main process starts. The load counts from that start only."""
    snapshots = restart_snapshots()
    running, draining, start_pre, started = (state for _monotonic, state in snapshots)
    assert draining["InvocationID"] == running["InvocationID"] != start_pre["InvocationID"]
    assert start_pre["ExecMainStartTimestampMonotonic"] == "0" and start_pre["InvocationID"] == started["InvocationID"]
    assert int(started["ExecMainStartTimestampMonotonic"]) > int(running["ExecMainStartTimestampMonotonic"])
    states = [running, draining, start_pre, {**started, "ActiveState": "active"}]
    journal = [(started["InvocationID"], line) for _inv, line in LOAD]
    fake = FakeHost(states, journal=journal, health_from=4)
    clock = SnapshotClock(snapshots[0][0])
    params = dict(PARAMS, previous_invocation_id=running["InvocationID"])
    result = sglang_waiter.Waiter(params, fake, clock).run()
    main_start = START + int(started["ExecMainStartTimestampMonotonic"]) / 1e6 - snapshots[0][0]
    assert result["load"]["total_s"] == round(clock.now - main_start, 1)
    assert result["load"]["total_s"] < result["elapsed_s"]  # the wait's first polls (the drain) are not the load's
    assert result["load"]["phases_s"]["starting"] >= 0


def test_without_systemds_main_start_the_load_is_timed_from_the_first_sign_of_the_invocation() -> None:
    """A wait that polls through the old invocation's drain: the load starts at the first poll that saw the new
    invocation (its first journal line comes later here), not at the wait's start."""
    seen = START + 2 * PARAMS["interval"]  # the third poll

    class Later(FakeHost):
        def journal(self, invocation: str, cursor: str | None = None, lines: int | None = None) -> list[dict[str, Any]]:
            return [dict(entry, ts=seen + 0.5 + entry["ts"] - START) for entry in super().journal(invocation, cursor)]

    fake = Later([active("old"), {"ActiveState": "deactivating", "SubState": "stop-sigterm",
                                  "InvocationID": "old"}, active("new"), active("new"), active("new")],
                 journal=LOAD, health_from=4)
    clock = FakeClock(START)
    result = sglang_waiter.Waiter(dict(PARAMS), fake, clock).run()
    assert result["load"]["total_s"] == round(clock.now - seen, 1) < result["elapsed_s"]
    # A journal line earlier than that poll (a wait that started late) is where the load began, as before.
    early = FakeHost([active("new")], journal=LOAD, health_from=1)
    clock = FakeClock(START + 5)
    assert sglang_waiter.Waiter(dict(PARAMS), early, clock).run()["load"]["total_s"] == round(clock.now - START, 1)


def test_a_main_start_systemd_reports_as_garbage_is_not_a_start() -> None:
    fake = FakeHost([{**active("new"), "ExecMainStartTimestampMonotonic": "n/a"}], health_from=1)
    result = sglang_waiter.Waiter(dict(PARAMS), fake, FakeClock(START)).run()
    assert result["load"]["total_s"] == result["elapsed_s"]


def stopping(polls: int) -> list[dict[str, str]]:
    """The replaced invocation for `polls` polls: still active (SIGTERM sent, unpinning), then deactivating."""
    return [active("old")] + [{"ActiveState": "deactivating", "SubState": "stop-sigterm", "InvocationID": "old"}
                              for _poll in range(polls - 1)]


def main_started(inv: str, at: float) -> dict[str, str]:
    """The invocation's state once systemd has started its main process at `at` (the fake clock is monotonic)."""
    return {**active(inv), "ExecMainStartTimestampMonotonic": str(int(at * 1e6))}


def test_a_slow_stop_of_the_replaced_process_does_not_shorten_the_loads_budget() -> None:
    """The old process takes 100 s to stop (unpinning the host pool), longer than the 60 s budget itself; the new one
    then loads for 50 s. The budget counts from the new process's start: ready, and the load is 50 s long."""
    stop = 50  # polls of 2 s
    load = 25
    fake = FakeHost(stopping(stop) + [main_started("new", START + 2 * stop)] * (load + 1), journal=LOAD,
                    health_from=stop + load + 1)  # the poll at START + 2 * (stop + load)
    clock = FakeClock(START)
    result = sglang_waiter.Waiter(dict(PARAMS, stop_timeout=390), fake, clock).run()
    assert result["ready"] and result["invocation_id"] == "new" and result["describe"] == "fired up"
    assert result["elapsed_s"] == 2 * (stop + load) > PARAMS["timeout"]
    assert result["load"]["total_s"] == 2 * load


def test_while_the_replaced_process_stops_the_progress_says_so() -> None:
    waiter = sglang_waiter.Waiter(dict(PARAMS, stop_timeout=390), FakeHost(stopping(3)), FakeClock(START))
    waiter.poll()
    assert waiter.status()["describe"] == "waiting for the server it replaces to stop (active/running)"
    waiter.poll()
    assert waiter.status()["describe"] == "waiting for the server it replaces to stop (deactivating/stop-sigterm)"
    fresh = sglang_waiter.Waiter(dict(PARAMS, previous_invocation_id=""), FakeHost([active("current")]),
                                 FakeClock(START))
    fresh.poll()
    assert fresh.status()["describe"] == "starting"  # nothing replaced: the load's own progress


def test_the_stop_allowance_does_not_lengthen_the_load_itself() -> None:
    """However long the stop may take, a load gets the budget from its own start, and no more."""
    stop = 10
    fake = FakeHost(stopping(stop) + [main_started("new", START + 2 * stop)], journal=LOAD[:1])
    clock = FakeClock(START)
    with pytest.raises(sglang_waiter.WaitFailed, match=r"was not ready within 60 s of its start \(last health answer"):
        sglang_waiter.Waiter(dict(PARAMS, stop_timeout=390), fake, clock).run()
    deadline = START + 2 * stop + PARAMS["timeout"]
    assert deadline <= clock.now < deadline + 2 * PARAMS["interval"]


def test_a_replaced_process_that_never_goes_fails_after_its_stop_allowance_and_the_budget() -> None:
    fake = FakeHost(stopping(1000), health_from=0)
    clock = FakeClock(START)
    with pytest.raises(sglang_waiter.WaitFailed) as failure:
        sglang_waiter.Waiter(dict(PARAMS, stop_timeout=30), fake, clock).run()
    assert "was not ready within 90 s: no new invocation started (the unit is deactivating/stop-sigterm, " \
           "invocation old" in str(failure.value)
    assert START + 90 <= clock.now < START + 90 + 2 * PARAMS["interval"]
    assert fake.health_calls == 0  # the replaced process's answers are never asked for


def test_a_unit_that_never_starts_fails_after_the_grace() -> None:
    fake = FakeHost([{"ActiveState": "inactive", "SubState": "dead", "InvocationID": "old"}])
    clock = FakeClock(START)
    with pytest.raises(sglang_waiter.WaitFailed, match="did not start"):
        sglang_waiter.Waiter(dict(PARAMS), fake, clock).run()
    assert clock.now - 1_000.0 < PARAMS["start_grace"] + 2 * PARAMS["interval"] + 1


def test_hang_fails_at_the_budget_with_the_last_progress() -> None:
    fake = FakeHost([active("new")], journal=LOAD[:2])
    with pytest.raises(sglang_waiter.WaitFailed) as failure:
        sglang_waiter.Waiter(dict(PARAMS), fake, FakeClock(START)).run()
    assert "was not ready within 60 s of its start" in str(failure.value)
    assert "loading weights 45% (29/64 shards)" in str(failure.value)


def test_no_restart_requested_follows_the_current_invocation() -> None:
    fake = FakeHost([active("current")], health_from=0)
    result = sglang_waiter.Waiter(dict(PARAMS, previous_invocation_id=""), fake, FakeClock(START)).run()
    assert result["invocation_id"] == "current" and result["elapsed_s"] == 0


def test_progress_reads_carriage_return_redraws_and_byte_messages() -> None:
    progress = sglang_waiter.Progress(0.0)
    redraws = "\rLoading safetensors checkpoint shards:   3% Completed | 2/64\rLoading safetensors checkpoint shards:  "
    progress.feed(redraws + " 50% Completed | 32/64 [00:01<00:01, 30it/s]", 1.0)
    assert progress.describe() == "loading weights 50% (32/64 shards)"
    assert sglang_waiter.message_text(list(b"Load weight end\r")) == "Load weight end\r"


@pytest.mark.parametrize(("line", "phase"), [
    ("Multi-thread loading shards:  12% Completed | 8/64 [00:10<01:13,  1.1it/s]", "loading weights 12% (8/64 shards)"),
    ("[x TP0] Capture target decode CUDA graph begin. backend=fa3, avail mem=20.1 GB", "capturing CUDA graphs"),
    ("[x TP0] Capture cuda graph end. Time elapsed: 12.3 s. mem usage=1 GB. avail mem=2 GB.", "CUDA graphs captured"),
    ("[x TP0] Allocating 28.48 GB host memory for hierarchical KV cache.", "allocating host KV pool"),
    ("[x TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 202610, KV size: 14.24 GB", "allocating KV cache"),
])
def test_progress_knows_the_log_lines_of_every_version(line: str, phase: str) -> None:
    progress = sglang_waiter.Progress(0.0)
    progress.feed(line, 1.0)
    assert progress.describe() == phase


def test_status_file_is_written_each_poll(tmp_path: Path) -> None:
    fake = FakeHost([active("new"), active("new")], journal=LOAD, health_from=2)
    status = tmp_path / "ready.json"
    sglang_waiter.Waiter(dict(PARAMS, status_file=str(status)), fake, FakeClock(START)).run()
    data = json.loads(status.read_text())
    assert data["invocation_id"] == "new" and data["phase"] == "fired up"


# ---- load phases of every pinned version, and hangs ----------------------------------------------

FIXTURES = ROOT / "tests" / "fixtures" / "sglang-logs"
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def replay(path: Path) -> sglang_waiter.Progress:
    """Feed a startup log to Progress with each line's own time (tqdm lines carry none: the last one)."""
    progress = sglang_waiter.Progress(0.0)
    when = 0.0
    for line in path.read_text().splitlines():
        match = STAMP.match(line)
        if match:
            when = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
        progress.feed(line, when)
    return progress


@pytest.mark.parametrize("version", ["0.5.9", "0.5.12", "0.5.14", "0.5.19", "0.5.23"])
def test_every_pinned_versions_startup_log_walks_through_the_phases(version: str) -> None:
    progress = replay(FIXTURES / f"startup-{version}.log")
    seen = [phase["phase"] for phase in progress.phases]
    assert seen == ["initialising torch.distributed", "loading weights", "weights loaded", "allocating KV cache",
                    "capturing CUDA graphs", "CUDA graphs captured", "starting HTTP server",
                    "allocating host KV pool", "fired up"], seen
    assert progress.fired_up_at is not None and progress.progress and progress.progress["percent"] == 100


BOUNDS = {"starting": 300, "distributed_init": 300, "loading_weights": 300, "kv_cache": 300, "cuda_graphs": 600,
          "host_kv_pool": 900, "warmup": 600}


class ScriptedJournal(FakeHost):
    """The unit stays active; the journal line i appears at clock time 1000 + times[i]."""

    def __init__(self, lines: list[tuple[float, str]], clock: FakeClock) -> None:
        super().__init__([active("new")])
        self.lines, self.clock = lines, clock

    def journal(self, invocation: str, cursor: str | None = None, lines: int | None = None) -> list[dict[str, Any]]:
        start = int(cursor) + 1 if cursor else 0
        due = [(i, at, msg) for i, (at, msg) in enumerate(self.lines) if 1_000.0 + at <= self.clock.now]
        return [{"cursor": str(i), "ts": 1_000.0 + at, "message": msg} for i, at, msg in due if i >= start]


def shards(start: float, every: float, count: int = 64) -> list[tuple[float, str]]:
    return [(start + every * n, f"Multi-thread loading shards: {100 * n // count:3d}% Completed | {n}/{count}")
            for n in range(1, count + 1)]


def test_a_hang_in_the_weights_fails_at_its_stall_bound_not_the_budget() -> None:
    clock = FakeClock(START)
    lines = [(1, "[t TP0] Init parallel begin."), (5, "[t TP0] Init parallel ends. elapsed=4.00 s"),
             (6, "[t TP0] Load weight begin. avail mem=93.82 GB"), *shards(6, 10.0, 64)[:31]]  # hangs at 31/64
    fake = ScriptedJournal(lines, clock)
    with pytest.raises(sglang_waiter.WaitFailed) as failure:
        sglang_waiter.Waiter(dict(PARAMS, timeout=1080, interval=5, stall_timeouts=BOUNDS), fake, clock).run()
    message = str(failure.value)
    assert "made no progress for 30" in message and "loading weights 48% (31/64 shards)" in message
    assert "sglang_service_stall_timeouts.loading_weights = 300 s" in message
    assert "last progress line: 'Multi-thread loading shards:  48% Completed | 31/64'" in message
    assert 316 + 300 <= clock.now - 1_000 <= 316 + 300 + 2 * 5  # the last shard at +316 s, then the bound


class SlowHealth(ScriptedJournal):
    """The unit is active from the start and each health request takes `seconds` before it is refused."""

    def __init__(self, lines: list[tuple[float, str]], clock: FakeClock, seconds: float) -> None:
        super().__init__(lines, clock)
        self.seconds = seconds

    def health(self, url: str, timeout: int) -> tuple[bool, str]:
        self.clock.sleep(self.seconds)
        return super().health(url, timeout)


def test_a_poll_that_takes_longer_than_the_stall_bound_is_not_a_hang() -> None:
    """A shard every 10 s, a 30 s bound, and health requests that take 40 s each: the lines that came while
    a request waited are read before the silence counts; the load ends at the budget, not as a hang."""
    clock = FakeClock(START)
    lines = [(1, "[t TP0] Load weight begin. avail mem=93.82 GB"), *shards(1, 10.0, 64)]
    fake = SlowHealth(lines, clock, 40.0)
    bounds = dict(BOUNDS, loading_weights=30)
    with pytest.raises(sglang_waiter.WaitFailed) as failure:
        sglang_waiter.Waiter(dict(PARAMS, timeout=400, interval=1, stall_timeouts=bounds), fake, clock).run()
    assert "was not ready within 400 s" in str(failure.value), str(failure.value)
    assert fake.health_calls >= 9


def test_a_slow_load_that_keeps_moving_is_not_a_hang() -> None:
    clock = FakeClock(START)
    # 64 shards at 250 s each (a slow disk: 4.4 hours in all) never go 300 s without progress.
    lines = [(1, "[t TP0] Load weight begin. avail mem=93.82 GB"), *shards(1, 250.0, 64)]
    fake = ScriptedJournal(lines, clock)
    with pytest.raises(sglang_waiter.WaitFailed) as failure:
        sglang_waiter.Waiter(dict(PARAMS, timeout=15_000, interval=5, stall_timeouts=BOUNDS), fake, clock).run()
    # Still moving at 59/64 after 15,000 s: the budget ends it, never a stall bound.
    assert "was not ready within 15000 s" in str(failure.value) and "(59/64 shards)" in str(failure.value)


def test_a_hung_distributed_init_fails_at_its_bound() -> None:
    clock = FakeClock(START)
    fake = ScriptedJournal([(2, "[t TP0] Init torch distributed begin.")], clock)
    with pytest.raises(sglang_waiter.WaitFailed, match=r"while initialising torch.distributed \(stall bound "
                       r"sglang_service_stall_timeouts.distributed_init = 300 s\)"):
        sglang_waiter.Waiter(dict(PARAMS, timeout=1080, interval=5, stall_timeouts=BOUNDS), fake, clock).run()
    assert clock.now - 1_000 < 320


def test_silence_before_the_first_line_is_bounded_by_starting() -> None:
    clock = FakeClock(START)
    fake = ScriptedJournal([], clock)
    with pytest.raises(sglang_waiter.WaitFailed, match=r"while starting .*starting = 300 s\); last progress line: "
                       r"none since the start"):
        sglang_waiter.Waiter(dict(PARAMS, timeout=1080, interval=5, stall_timeouts=BOUNDS), fake, clock).run()


def test_other_nodes_without_shard_progress_are_bounded_by_the_budget_only() -> None:
    clock = FakeClock(START)
    lines = [(1, "[t TP8] Load weight begin. avail mem=93.82 GB"), (900, "[t TP8] Load weight end. elapsed=899 s")]
    fake = ScriptedJournal(lines, clock)
    waiter = sglang_waiter.Waiter(dict(PARAMS, timeout=1000, interval=5, stall_timeouts=BOUNDS, shard_progress=False),
                                  fake, clock)
    with pytest.raises(sglang_waiter.WaitFailed) as failure:
        waiter.run()
    # 899 s of silence in the weights was not a stall; after them, kv_cache's 300 s bound ran out the budget.
    assert "was not ready within 1000 s" in str(failure.value) and waiter.progress.phase == "weights loaded"


@pytest.mark.parametrize(("raw", "problem"), [
    ({"weights": 10}, "'weights' is not a load phase"),
    ({"warmup": 0}, "warmup: 0 is not a whole number of seconds >= 1"),
    ({"warmup": "soon"}, "warmup: 'soon' is not"),
])
def test_stall_bounds_are_checked(raw: dict[str, Any], problem: str) -> None:
    assert problem in "; ".join(stall_bounds(raw)[1])
    assert stall_bounds({"warmup": "60"}) == ({"warmup": 60}, [])


def test_every_phase_with_a_stall_bound_is_one_the_log_lines_lead_to() -> None:
    assert set(STALL_KEYS) == {"starting"} | {stall for _marker, _name, stall in sglang_waiter.PHASES}


# ---- what the start measured ----------------------------------------------------------------------

def test_a_ready_start_returns_and_records_what_it_measured(tmp_path: Path) -> None:
    """The followed invocation's journal (a pinned version's real format, two ranks) gives the figures the
    next plan calibrates from; they are written with the configuration's identity."""
    journal = [("old", "[t TP0] Load weight begin. avail mem=50.00 GB")]  # another invocation: not read
    journal += [("new", line) for line in (FIXTURES / "startup-0.5.23.log").read_text().splitlines()]
    fake = FakeHost([active("new")], journal=journal, health_from=1)
    observed = tmp_path / "state" / "kimi.observed.json"
    model = tmp_path / "model"
    model.mkdir()
    (model / "model-00001-of-00001.safetensors").write_bytes(b"w" * 4096)
    identity = {"tp_size": 8, "version": "0.5.23", "model_path": str(model)}
    params = dict(PARAMS, observed_file=str(observed), identity=identity)
    result = sglang_waiter.Waiter(params, fake, FakeClock(START)).run()
    startup = result["startup"]
    assert startup["kv_tokens"] == 154998 and startup["ranks"] == 2
    assert startup["pre_load_free_bytes"] == round(93.82 * (1 << 30))
    assert [load["architecture"] for load in startup["loads"]] == ["KimiK25ForConditionalGeneration",
                                                                   "LlamaForCausalLMEagle3"]
    record = json.loads(observed.read_text())
    assert record["startup"] == startup and record["identity"] == identity
    # The load's timings: SGLang's elapsed= of the model and the draft, the files' size over it.
    assert record["load"] == result["load"] and record["load"]["weights_load_s"] == pytest.approx(244.10 + 2.31)
    assert record["load"]["weights_bytes"] == 4096
    assert record["load"]["read_gb_per_s"] == round(4096 / 1e9 / (244.10 + 2.31), 3)
    assert record["load"]["total_s"] == result["elapsed_s"] and "loading_weights" in record["load"]["phases_s"]
    assert record["invocation_id"] == "new" and record["recorded_at"].endswith("Z")
    assert oct(observed.stat().st_mode & 0o777) == "0o644"


def test_a_start_without_the_weight_lines_records_nothing(tmp_path: Path) -> None:
    fake = FakeHost([active("new")], journal=[("new", "[t] The server is fired up and ready to roll!")],
                    health_from=1)
    observed = tmp_path / "kimi.observed.json"
    result = sglang_waiter.Waiter(dict(PARAMS, observed_file=str(observed)), fake, FakeClock(START)).run()
    assert result["startup"] is None and not observed.exists()


def test_a_wait_that_starts_late_still_times_the_whole_load(tmp_path: Path) -> None:
    """On a busy controller the waiter may start after the load began: the load's clock starts at the
    invocation's first journal line, not at the wait."""
    clock = FakeClock(START)
    early = [{"cursor": str(i), "ts": 990.0 + i, "message": msg} for i, msg in enumerate((
        "[t TP0] Load weight begin. avail mem=93.82 GB",
        "[t TP0] Load weight end. elapsed=8.00 s, type=X, avail mem=20.24 GB, mem usage=73.58 GB.",
        "[t TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, KV size: 1.00 GB",
        "[t] The server is fired up and ready to roll!"))]

    class Late(FakeHost):
        def journal(self, invocation: str, cursor: str | None = None, lines: int | None = None) -> list[dict[str, Any]]:
            start = int(cursor) + 1 if cursor else 0
            return [entry for entry in early if int(entry["cursor"]) >= start]

    result = sglang_waiter.Waiter(PARAMS, Late([active("new")], health_from=1), clock).run()
    assert result["elapsed_s"] < 5 and result["load"]["total_s"] == round(clock.now - 990.0, 1)
    assert result["load"]["phases_s"]["loading_weights"] == 1.0  # begin at 990, end at 991
