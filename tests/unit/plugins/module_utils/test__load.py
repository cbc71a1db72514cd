"""A load's timings and the budget the next load gets from them (module_utils _load)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import _load, sglang_waiter
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_startup import read
from helpers import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "sglang-logs"
IDENTITY = {"version": "0.5.23", "model_path": "/models/kimi-k2.5", "tp_size": 8, "mem_fraction_static": 0.85}


def replay(path: Path) -> tuple[sglang_waiter.Progress, float]:
    """A pinned version's startup log fed with its own timestamps; (progress, seconds to the last line)."""
    lines = path.read_text().splitlines()
    stamp = [datetime.datetime.strptime(line[1:20], "%Y-%m-%d %H:%M:%S").timestamp() for line in lines
             if line.startswith("[20")]
    progress = sglang_waiter.Progress(stamp[0])
    when = stamp[0]
    for line in lines:
        if line.startswith("[20"):
            when = datetime.datetime.strptime(line[1:20], "%Y-%m-%d %H:%M:%S").timestamp()
        progress.feed(line, when)
    return progress, stamp[-1] - stamp[0]


@pytest.mark.parametrize("version", ["0.5.9", "0.5.12", "0.5.14", "0.5.19", "0.5.23"])
def test_the_timings_of_every_pinned_versions_log_add_up_to_the_load(version: str) -> None:
    path = FIXTURES / f"startup-{version}.log"
    progress, total = replay(path)
    startup = read(path.read_text()).as_dict()
    timings = _load.timings(progress.phases, total, startup["loads"], 587 * 10**9, progress.silence)
    phases = timings["phases_s"]
    assert sum(phases.values()) == pytest.approx(total, abs=0.5)
    assert set(phases) <= {"starting", "distributed_init", "loading_weights", "kv_cache", "cuda_graphs",
                           "host_kv_pool", "warmup"}
    # SGLang's own elapsed= of the weights (model and draft) is what the read rate is computed from.
    assert timings["weights_load_s"] == pytest.approx(sum(load["elapsed_s"] for load in startup["loads"]))
    assert timings["read_gb_per_s"] == pytest.approx(587 / timings["weights_load_s"], rel=1e-3)
    assert phases["loading_weights"] >= timings["weights_load_s"] - 5  # the phase holds the weights' load
    assert max(timings["silence_s"].values()) <= total


def test_the_longest_silence_of_a_phase_is_kept() -> None:
    progress = sglang_waiter.Progress(0.0)
    progress.begin(0.0)
    for at, line in ((1, "[t TP0] Load weight begin. avail mem=93.82 GB"),
                     (11, "Multi-thread loading shards:  50% Completed | 1/2"),
                     (41, "Multi-thread loading shards: 100% Completed | 2/2"),
                     (45, "[t TP0] Capture cuda graph begin. This can take up to several minutes."),
                     (245, "[t TP0] Capture cuda graph end. Time elapsed: 200.00 s")):
        progress.feed(line, float(at))
    assert progress.silence == {"starting": 1.0, "loading_weights": 30.0, "cuda_graphs": 200.0}


def test_safetensors_are_summed_in_the_model_and_the_draft(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "d").mkdir()
    (tmp_path / "m" / "a.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "m" / "b.safetensors").write_bytes(b"x" * 24)
    (tmp_path / "m" / "config.json").write_text("{}")
    (tmp_path / "d" / "c.safetensors").write_bytes(b"x" * 7)
    assert _load.safetensors_bytes(str(tmp_path / "m"), str(tmp_path / "d"), None, "/nonexistent") == 1031


RECORD = {"recorded_at": "2026-12-01T06:00:00Z", "identity": dict(IDENTITY),
          "load": {"total_s": 712.4, "silence_s": {"loading_weights": 14.0, "cuda_graphs": 70.0, "warmup": 300.0}}}
BOUNDS = {"loading_weights": 300, "cuda_graphs": 600, "warmup": 600}


def test_a_slower_host_than_configured_gets_the_time_its_last_load_needed() -> None:
    budget = _load.learned(RECORD, dict(IDENTITY, mem_fraction_static=0.88), 900, BOUNDS)
    assert budget["timeout"] == 1425  # 2 x 712.4 s, above the configured 900 s
    assert budget["stall_timeouts"] == {"loading_weights": 300, "cuda_graphs": 600, "warmup": 900}
    assert budget["note"] == ("learned from the load of 2026-12-01T06:00:00Z (712.4 s): budget 1425 s, "
                              "warmup 900 s")


def test_the_configured_values_are_the_floor() -> None:
    fast = dict(RECORD, load={"total_s": 60.0, "silence_s": {"loading_weights": 2.0}})
    budget = _load.learned(fast, IDENTITY, 900, BOUNDS)
    assert (budget["timeout"], budget["stall_timeouts"]) == (900, BOUNDS)
    assert budget["note"] == "configured, which covers the load of 2026-12-01T06:00:00Z (60.0 s)"


def test_a_phase_without_a_configured_bound_gets_none() -> None:
    budget = _load.learned(RECORD, IDENTITY, 900, {"loading_weights": 300})
    assert budget["stall_timeouts"] == {"loading_weights": 300}


@pytest.mark.parametrize("changed", [{"model_path": "/models/other"}, {"tp_size": 4}, {"version": "0.5.19"}])
def test_nothing_is_learned_from_a_load_of_another_model_tp_or_version(changed: dict[str, object]) -> None:
    budget = _load.learned(RECORD, dict(IDENTITY, **changed), 900, BOUNDS)
    assert (budget["timeout"], budget["stall_timeouts"]) == (900, BOUNDS)
    assert budget["note"].startswith("configured (the load of 2026-12-01T06:00:00Z ran another ")


@pytest.mark.parametrize("record", [None, {}, {"load": None}, {"load": {"total_s": 0}}, {"identity": IDENTITY}])
def test_without_a_recorded_load_the_configured_values_hold(record: dict[str, object] | None) -> None:
    assert _load.learned(record, IDENTITY, 900, BOUNDS) == {"timeout": 900, "stall_timeouts": BOUNDS,
                                                            "note": "configured"}


def test_the_summary_names_the_phases_and_the_read_rate() -> None:
    load = {"total_s": 712.4, "phases_s": {"starting": 3.0, "distributed_init": 9.8, "loading_weights": 664.0,
                                           "kv_cache": 4.2, "cuda_graphs": 21.5, "warmup": 9.9},
            "weights_load_s": 663.9, "weights_bytes": 587354357760, "read_gb_per_s": 0.885}
    assert _load.summary(load) == ("load 712 s: init 10 s, weights 664 s, KV pools 4 s, CUDA graphs 22 s, "
                                   "warm-up 10 s; SGLang read the weights in 664 s (587.4 GB at 0.89 GB/s)")
    assert _load.summary(None) == "no load timings"
