"""The readiness waiter: follows one invocation, fails fast, reads progress from the journal."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.modules import sglang_ready
from helpers import ROOT


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


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
          "previous_invocation_id": "old", "timeout": 60, "interval": 2, "start_grace": 10,
          "health_timeout": 30, "journal_lines": 5, "status_file": None, "stall_timeouts": {},
          "shard_progress": True}


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(fake: FakeHost) -> FakeHost:
        monkeypatch.setattr(sglang_ready, "unit_state", fake.unit_state)
        monkeypatch.setattr(sglang_ready, "journal", fake.journal)
        monkeypatch.setattr(sglang_ready, "health", fake.health)
        return fake
    return install


def active(inv: str, sub: str = "running", restarts: str = "0") -> dict[str, str]:
    return {"ActiveState": "active", "SubState": sub, "InvocationID": inv, "NRestarts": restarts, "MainPID": "42"}


LOAD = [
    ("new", "[2026-11-29 10:00:00 TP0] Load weight begin. avail mem=94.12 GB"),
    ("new", "Loading safetensors checkpoint shards:  45% Completed | 29/64 [00:03<00:04,  8.00it/s]"),
    ("new", "[2026-11-29 10:00:09] The server is fired up and ready to roll!"),
]


def test_waits_through_the_old_process_and_accepts_only_the_new_invocation(host: Any) -> None:
    # old is still active (draining), then deactivating, then the new invocation loads and answers.
    fake = host(FakeHost([active("old"), {"ActiveState": "deactivating", "SubState": "stop-sigterm",
                                          "InvocationID": "old"}, active("new"), active("new"), active("new")],
                         journal=LOAD, health_from=4))
    result = sglang_ready.Waiter(dict(PARAMS), FakeClock()).run()
    assert result["ready"] and result["invocation_id"] == "new" and result["main_pid"] == 42
    assert result["phase"] == "fired up"
    assert result["progress"] == {"percent": 45, "done": 29, "total": 64}
    assert "fired_up_to_ready_s" in result
    assert fake.health_calls == 2  # asked only once the new invocation ran (polls 3 and 4)


def test_health_of_the_old_invocation_never_counts(host: Any) -> None:
    host(FakeHost([active("old")], health_from=0))
    with pytest.raises(sglang_ready.WaitFailed, match="was not ready within 60 s"):
        sglang_ready.Waiter(dict(PARAMS), FakeClock()).run()


def test_crash_during_load_fails_at_the_next_poll(host: Any) -> None:
    crash = LOAD[:2] + [("new", "RuntimeError: CUDA error: an illegal memory access was encountered"),
                        ("new", "sglang-kimi.service: Main process exited, code=exited, status=1/FAILURE")]
    host(FakeHost([active("new"), active("new"),
                   {"ActiveState": "activating", "SubState": "auto-restart", "InvocationID": "new",
                    "NRestarts": "1", "ExecMainCode": "1", "ExecMainStatus": "1"}], journal=crash))
    clock = FakeClock()
    with pytest.raises(sglang_ready.WaitFailed) as failure:
        sglang_ready.Waiter(dict(PARAMS), clock).run()
    message = str(failure.value)
    assert "crashed during start (exit status 1)" in message
    assert "loading weights 45% (29/64 shards)" in message
    assert "CUDA error" in message and "--- journal of the invocation ---" in message
    assert clock.now - 1_000.0 <= 2 * PARAMS["interval"] + 1  # two polls, then the failure


def test_a_replaced_invocation_is_a_failure(host: Any) -> None:
    host(FakeHost([active("new"), active("newer")]))
    with pytest.raises(sglang_ready.WaitFailed, match="was restarted"):
        sglang_ready.Waiter(dict(PARAMS), FakeClock()).run()


def test_a_failed_unit_is_reported_with_its_result(host: Any) -> None:
    host(FakeHost([active("new"), {"ActiveState": "failed", "SubState": "failed", "InvocationID": "new",
                                   "Result": "start-limit-hit", "ExecMainCode": "2", "ExecMainStatus": "9"}]))
    with pytest.raises(sglang_ready.WaitFailed, match=r"failed \(exit killed by signal 9, result start-limit-hit\)"):
        sglang_ready.Waiter(dict(PARAMS), FakeClock()).run()


def test_a_unit_that_never_starts_fails_after_the_grace(host: Any) -> None:
    host(FakeHost([{"ActiveState": "inactive", "SubState": "dead", "InvocationID": "old"}]))
    clock = FakeClock()
    with pytest.raises(sglang_ready.WaitFailed, match="did not start"):
        sglang_ready.Waiter(dict(PARAMS), clock).run()
    assert clock.now - 1_000.0 < PARAMS["start_grace"] + 2 * PARAMS["interval"] + 1


def test_hang_fails_at_the_budget_with_the_last_progress(host: Any) -> None:
    host(FakeHost([active("new")], journal=LOAD[:2]))
    with pytest.raises(sglang_ready.WaitFailed) as failure:
        sglang_ready.Waiter(dict(PARAMS), FakeClock()).run()
    assert "was not ready within 60 s" in str(failure.value)
    assert "loading weights 45% (29/64 shards)" in str(failure.value)


def test_no_restart_requested_follows_the_current_invocation(host: Any) -> None:
    host(FakeHost([active("current")], health_from=0))
    result = sglang_ready.Waiter(dict(PARAMS, previous_invocation_id=""), FakeClock()).run()
    assert result["invocation_id"] == "current" and result["elapsed_s"] == 0


def test_progress_reads_carriage_return_redraws_and_byte_messages() -> None:
    progress = sglang_ready.Progress(0.0)
    bar = "\rLoading safetensors checkpoint shards:   3% Completed | 2/64\rLoading safetensors checkpoint shards:  "
    progress.feed(bar + " 50% Completed | 32/64 [00:01<00:01, 30it/s]", 1.0)
    assert progress.describe() == "loading weights 50% (32/64 shards)"
    assert sglang_ready._message_text(list(b"Load weight end\r")) == "Load weight end\r"


@pytest.mark.parametrize(("line", "phase"), [
    ("Multi-thread loading shards:  12% Completed | 8/64 [00:10<01:13,  1.1it/s]", "loading weights 12% (8/64 shards)"),
    ("[x TP0] Capture target decode CUDA graph begin. backend=fa3, avail mem=20.1 GB", "capturing CUDA graphs"),
    ("[x TP0] Capture cuda graph end. Time elapsed: 12.3 s. mem usage=1 GB. avail mem=2 GB.", "CUDA graphs captured"),
    ("[x TP0] Allocating 28.48 GB host memory for hierarchical KV cache.", "allocating host KV pool"),
    ("[x TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 202610, KV size: 14.24 GB", "allocating KV cache"),
])
def test_progress_knows_the_log_lines_of_every_version(line: str, phase: str) -> None:
    progress = sglang_ready.Progress(0.0)
    progress.feed(line, 1.0)
    assert progress.describe() == phase


def test_status_file_is_written_each_poll(host: Any, tmp_path: Path) -> None:
    host(FakeHost([active("new"), active("new")], journal=LOAD, health_from=2))
    status = tmp_path / "ready.json"
    sglang_ready.Waiter(dict(PARAMS, status_file=str(status)), FakeClock()).run()
    data = json.loads(status.read_text())
    assert data["invocation_id"] == "new" and data["phase"] == "fired up"


# ---- load phases of every pinned version, and hangs ----------------------------------------------

FIXTURES = ROOT / "tests" / "fixtures" / "sglang-logs"
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def replay(path: Path) -> sglang_ready.Progress:
    """Feed a startup log to Progress with each line's own time (tqdm lines carry none: the last one)."""
    progress = sglang_ready.Progress(0.0)
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


def test_a_hang_in_the_weights_fails_at_its_stall_bound_not_the_budget(host: Any) -> None:
    clock = FakeClock()
    lines = [(1, "[t TP0] Init parallel begin."), (5, "[t TP0] Init parallel ends. elapsed=4.00 s"),
             (6, "[t TP0] Load weight begin. avail mem=93.82 GB"), *shards(6, 10.0, 64)[:31]]  # hangs at 31/64
    host(ScriptedJournal(lines, clock))
    with pytest.raises(sglang_ready.WaitFailed) as failure:
        sglang_ready.Waiter(dict(PARAMS, timeout=1080, interval=5, stall_timeouts=BOUNDS), clock).run()
    message = str(failure.value)
    assert "made no progress for 30" in message and "loading weights 48% (31/64 shards)" in message
    assert "sglang_service_stall_timeouts.loading_weights = 300 s" in message
    assert "last progress line: 'Multi-thread loading shards:  48% Completed | 31/64'" in message
    assert 316 + 300 <= clock.now - 1_000 <= 316 + 300 + 2 * 5  # the last shard at +316 s, then the bound


def test_a_slow_load_that_keeps_moving_is_not_a_hang(host: Any) -> None:
    clock = FakeClock()
    # 64 shards at 250 s each (a slow disk: 4.4 hours in all) never go 300 s without progress.
    lines = [(1, "[t TP0] Load weight begin. avail mem=93.82 GB"), *shards(1, 250.0, 64)]
    host(ScriptedJournal(lines, clock))
    with pytest.raises(sglang_ready.WaitFailed) as failure:
        sglang_ready.Waiter(dict(PARAMS, timeout=15_000, interval=5, stall_timeouts=BOUNDS), clock).run()
    # Still moving at 59/64 after 15,000 s: the budget ends it, never a stall bound.
    assert "was not ready within 15000 s" in str(failure.value) and "(59/64 shards)" in str(failure.value)


def test_a_hung_distributed_init_fails_at_its_bound(host: Any) -> None:
    clock = FakeClock()
    host(ScriptedJournal([(2, "[t TP0] Init torch distributed begin.")], clock))
    with pytest.raises(sglang_ready.WaitFailed, match=r"while initialising torch.distributed \(stall bound "
                       r"sglang_service_stall_timeouts.distributed_init = 300 s\)"):
        sglang_ready.Waiter(dict(PARAMS, timeout=1080, interval=5, stall_timeouts=BOUNDS), clock).run()
    assert clock.now - 1_000 < 320


def test_silence_before_the_first_line_is_bounded_by_starting(host: Any) -> None:
    clock = FakeClock()
    host(ScriptedJournal([], clock))
    with pytest.raises(sglang_ready.WaitFailed, match=r"while starting .*starting = 300 s\); last progress line: "
                       r"none since the start"):
        sglang_ready.Waiter(dict(PARAMS, timeout=1080, interval=5, stall_timeouts=BOUNDS), clock).run()


def test_other_nodes_without_shard_progress_are_bounded_by_the_budget_only(host: Any) -> None:
    clock = FakeClock()
    lines = [(1, "[t TP8] Load weight begin. avail mem=93.82 GB"), (900, "[t TP8] Load weight end. elapsed=899 s")]
    host(ScriptedJournal(lines, clock))
    waiter = sglang_ready.Waiter(dict(PARAMS, timeout=1000, interval=5, stall_timeouts=BOUNDS, shard_progress=False),
                                 clock)
    with pytest.raises(sglang_ready.WaitFailed) as failure:
        waiter.run()
    # 899 s of silence in the weights was not a stall; after them, kv_cache's 300 s bound ran out the budget.
    assert "was not ready within 1000 s" in str(failure.value) and waiter.progress.phase == "weights loaded"


@pytest.mark.parametrize(("raw", "problem"), [
    ({"weights": 10}, "'weights' is not a load phase"),
    ({"warmup": 0}, "warmup: 0 is not a whole number of seconds >= 1"),
    ({"warmup": "soon"}, "warmup: 'soon' is not"),
])
def test_stall_bounds_are_checked(raw: dict[str, Any], problem: str) -> None:
    assert problem in "; ".join(sglang_ready.stall_bounds(raw)[1])
    assert sglang_ready.stall_bounds({"warmup": "60"}) == ({"warmup": 60}, [])
