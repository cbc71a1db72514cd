"""Preflight: rules + plan joined with the host's facts; and the host facts module's readers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_args
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_preflight as preflight
from ansible_collections.sglang.deploy.plugins.modules import sglang_host_facts as facts_mod
from helpers import BASE, CATALOGS, ROOT

KIMI = json.loads((ROOT / "molecule/resources/models/kimi-k2.5/config.json").read_text())
DRAFT = json.loads((ROOT / "molecule/resources/models/kimi-k2.5-eagle3/config.json").read_text())
EXAMPLE = {"gpu_count": 8, "gpu_memory_mib": 97887, "compute_capability": "12.0",
           "host_mem_available_bytes": 449 * 10**9, "weight_bytes_total": 547 * 10**9,
           "model_config": KIMI, "draft_config": DRAFT}


def resolved(**changes: Any) -> dict[str, Any]:
    inputs = dict(BASE, aliases=changes.pop("aliases", {}))
    inputs.update(changes)
    result = sglang_args.resolve(inputs, str(CATALOGS))
    assert result["ok"], result["errors"]
    return result


def test_the_example_host_plans_ok() -> None:
    result = preflight.run(resolved(), EXAMPLE, need_plan=True)
    assert result["ok"], result["errors"]
    assert result["plan"]["kv_bytes_per_token"] == 70_272
    assert preflight.plan_json(result)["max_concurrent_requests"] == result["plan"]["max_concurrent_requests"]
    table = preflight.table("gpu-node-1", result)
    assert table.startswith("gpu-node-1: OK") and "70,272 B" in table and "does not add concurrency" in table


def test_hicache_size_300_is_refused_naming_the_short_name() -> None:
    result = preflight.run(resolved(aliases={"hicache_size": "300"}), EXAMPLE, need_plan=True)
    assert not result["ok"]
    message = next(e for e in result["errors"] if e.startswith("hicache_size (overrides sglang_hicache_size)"))
    assert "per TP rank" in message and "8 ranks" in message and "449.00 GB" in message


def test_host_readings_win_for_hardware_and_a_disagreement_is_an_error() -> None:
    detected = {"gpu_count": 7, "gpu_memory_mib": 97887, "compute_capability": "12.0"}
    result = preflight.run(resolved(), EXAMPLE, detected, need_plan=True)
    assert any(e.startswith("sglang_gpu_count: the inventory says 8 but the host has 7") for e in result["errors"])


def test_pinned_memory_wins_over_the_host_reading() -> None:
    facts, errors = preflight.merge_facts({"host_mem_available_bytes": 440}, {"host_mem_available_bytes": 24})
    assert facts["host_mem_available_bytes"] == 440 and not errors


def test_rules_see_the_host_and_drop_dead_environment() -> None:
    result = preflight.run(resolved(sglang_extra_args={"attention-backend": "trtllm_mla"},
                                    sglang_env={"SGLANG_ENABLE_SPEC_V2": "1"}), EXAMPLE)
    assert any("trtllm_mla" in e for e in result["errors"])
    assert result["drop_env"] == ["SGLANG_ENABLE_SPEC_V2"]


def test_a_plan_that_cannot_be_made_is_an_error_only_when_required() -> None:
    offline = preflight.run(resolved(), {"gpu_count": 8})
    assert offline["ok"] and offline["plan"] is None
    required = preflight.run(resolved(), {"gpu_count": 8}, need_plan=True)
    assert any("sglang_model_config_file" in e for e in required["errors"])


def test_errors_read_on_the_host_are_kept() -> None:
    result = preflight.run(resolved(), EXAMPLE, {"errors": ["sglang_port: 30000 is already bound"]})
    assert "sglang_port: 30000 is already bound" in result["errors"]


# --- the module's readers ---------------------------------------------------------------------

REAL = ROOT / "tests" / "fixtures" / "real-host"


def test_gpus_from_nvidia_smi_csv(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    csv = "\n".join(f"{i}, {name}, 97887, 12.0, Default, 00000000:{i + 1:02X}:00.0" for i in range(8))
    topo = (REAL / "nvidia-smi-topo-p2p-r-8gpu-pcie.txt").read_text()
    monkeypatch.setattr(facts_mod, "run", lambda argv: (0, topo if "topo" in argv else csv))
    monkeypatch.setattr(facts_mod, "iommu_mode", lambda bus_ids: f"passthrough ({len(bus_ids)} GPUs)")
    found, errors = facts_mod.gpus("nvidia-smi")
    p2p = found.pop("p2p_read")
    assert found == {"gpu_count": 8, "gpu_names": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"],
                     "gpu_memory_mib": 97887, "compute_capability": "12.0", "compute_modes": ["Default"] * 8,
                     "iommu": "passthrough (8 GPUs)"} and not errors
    assert len(p2p) == 56 and set(p2p.values()) == {"OK"}
    monkeypatch.setattr(facts_mod, "run", lambda argv: (9, "NVIDIA-SMI has failed"))
    found, notes = facts_mod.gpus("nvidia-smi")  # a bare host: the driver phase installs it later
    assert found == {} and "NVIDIA-SMI has failed" in notes[0] and "inventory's GPU values" in notes[0]


def test_model_directory_is_read_and_its_shards_summed(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(KIMI))
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"x" * 100)
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"x" * 50)
    config, size, errors = facts_mod.model(str(tmp_path), "sglang_model_path")
    assert config == KIMI and size == 150 and not errors
    _, _, errors = facts_mod.model(str(tmp_path / "missing"), "sglang_model_path")
    assert errors[0].startswith("sglang_model_path: ") and "is not a directory" in errors[0]


@pytest.mark.parametrize(("ss", "own", "foreign"), [
    ("", {1}, False),                                                   # nothing listens
    ('LISTEN 0 5 0.0.0.0:30000 0.0.0.0:* users:(("python",pid=7,fd=3))', {7, 8}, False),  # the unit's
    ('LISTEN 0 5 0.0.0.0:30000 0.0.0.0:* users:(("nginx",pid=99,fd=3))', {7}, True),      # someone else
    ("LISTEN 0 5 0.0.0.0:30000 0.0.0.0:*", {7}, False),                 # no PID visible, unit running
    ("LISTEN 0 5 0.0.0.0:30000 0.0.0.0:*", set(), True),                # no PID visible, unit down
])
def test_port_holder(monkeypatch: pytest.MonkeyPatch, ss: str, own: set[int], foreign: bool) -> None:
    monkeypatch.setattr(facts_mod, "run", lambda argv: (0, ss))
    assert bool(facts_mod.port_holder(30000, own)) is foreign


def test_render_reports_a_plan_that_does_not_fit_without_refusing() -> None:
    result = preflight.run(resolved(aliases={"hicache_ratio": "3.5"}), EXAMPLE, advisory_plan=True)
    assert result["ok"]
    assert any(w.startswith("DEPLOY WOULD REFUSE THIS: hicache_ratio") for w in result["warnings"])


@pytest.mark.parametrize(("changes", "detected", "variable", "allowed"), [
    ({"sglang_tp_size": 16}, {"gpu_count": 8}, "sglang_tp_size", "need 16 GPUs"),
    ({"sglang_tp_size": 3}, {"gpu_count": 8}, "sglang_tp_size", "a divisor of 8"),
    ({}, {"errors": ["sglang_model_path: /models/x is not a directory on this host; allowed: the model directory"]},
     "sglang_model_path", "the model directory"),
    ({}, {"errors": ["sglang_speculative_draft_model_path: /d is not a directory on this host; allowed: the model"
                     " directory"]}, "sglang_speculative_draft_model_path", "the model directory"),
    ({}, {"errors": ["sglang_port: 30000 is already bound on this host by another process (nginx); allowed: a free"
                     " port"]}, "sglang_port", "a free port"),
    ({}, {"gpu_count": 7}, "sglang_gpu_count", "the host's value"),
])
def test_host_level_refusals_name_the_variable(changes: dict[str, Any], detected: dict[str, Any], variable: str,
                                               allowed: str) -> None:
    result = preflight.run(resolved(**changes), EXAMPLE, detected)
    matching = [e for e in result["errors"] if variable in e.split(":")[0]]
    assert matching, result["errors"]
    assert allowed in matching[0]
