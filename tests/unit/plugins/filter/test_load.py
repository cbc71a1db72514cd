"""The load filters: the readiness budget of the next load, learned from the last."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.filter import load
from ansible_collections.sglang.deploy.plugins.module_utils import _load_speed


def test_load_budget_raises_the_configured_values_to_what_the_last_load_needed() -> None:
    record = {"recorded_at": "2026-12-01T06:00:00Z", "identity": {"model_path": "/models/k", "tp_size": 8},
              "load": {"total_s": 712.4, "silence_s": {"loading_weights": 14.0, "cuda_graphs": 200.0}}}
    budget = load.load_budget(record, {"model_path": "/models/k", "tp_size": 8}, 900,
                              {"loading_weights": 300, "cuda_graphs": "180"})
    assert budget == {"timeout": 1425, "stall_timeouts": {"loading_weights": 300, "cuda_graphs": 600},
                      "note": "learned from the load of 2026-12-01T06:00:00Z (712.4 s): budget 1425 s, cuda_graphs "
                              "600 s"}
    assert load.load_budget(None, {}, 900, {})["note"] == "configured"


def test_load_downtime_is_the_last_load_of_the_same_model_on_this_host() -> None:
    record = {"recorded_at": "2026-12-01T06:00:00Z", "identity": {"model_path": "/models/k", "tp_size": 8},
              "load": {"total_s": 664.04}}
    assert load.load_downtime(record, {"model_path": "/models/k", "tp_size": 8}) == {
        "expected_s": 664.0, "source": "the load of 2026-12-01T06:00:00Z on this host"}
    assert load.load_downtime(record, {"model_path": "/models/k", "tp_size": 4}) == {
        "expected_s": None, "source": "unknown: the load of 2026-12-01T06:00:00Z ran another tp_size"}
    assert load.load_downtime(None, {}) == {"expected_s": None, "source": "no load recorded on this host yet"}
    assert load.load_downtime({"load": {"total_s": 0}}, {})["expected_s"] is None


@pytest.mark.parametrize(("record", "path", "remeasure", "why"), [
    (None, "/m", False, "no measurement recorded on this host yet"),
    ({}, "/m", False, "the record is of None, not of '/m'"),
    ({"model_path": "/other", "gb_per_s": 2.0}, "/m", False, "the record is of '/other', not of '/m'"),
    ({"model_path": "/m", "gb_per_s": 0}, "/m", False, "the recorded measurement has no rate"),
    ({"model_path": "/m", "gb_per_s": 2.0}, "/m", "true", "asked to measure again (sglang_config_disk_remeasure)"),
    ({"model_path": "/m", "gb_per_s": 2.0}, "/m", False, ""),
])
def test_disk_stale_is_the_rule_the_disk_module_keeps_its_record_by(
        record: Any, path: str, remeasure: Any, why: str) -> None:
    """The plays' `when:` (assess.yml, status.yml) and module sglang_disk_rate decide with the same function."""
    assert load.disk_stale(record, path, remeasure) == why
    assert why == _load_speed.stale(record, path, remeasure == "true")
