"""Preflight: rules + plan joined with the host's facts; and the host facts module's readers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_config
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_plan_text as plan_text
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_preflight as preflight
from helpers import BASE, CATALOGS, ROOT

KIMI = json.loads((ROOT / "extensions/molecule/resources/models/kimi-k2.5/config.json").read_text())
DRAFT = json.loads((ROOT / "extensions/molecule/resources/models/kimi-k2.5-eagle3/config.json").read_text())
EXAMPLE = {"gpu_count": 8, "gpu_memory_mib": 97887, "compute_capability": "12.0",
           "host_mem_available_bytes": 449 * 10**9, "weight_bytes_total": 547 * 10**9,
           "model_config": KIMI, "draft_config": DRAFT}


def resolved(**changes: Any) -> dict[str, Any]:
    inputs = dict(BASE, **changes.pop("aliases", {}))
    inputs.update(changes)
    result = sglang_config.resolve(inputs, str(CATALOGS))
    assert result["ok"], result["errors"]
    return result


def test_the_example_host_plans_ok() -> None:
    result = preflight.run(resolved(), EXAMPLE, plan_mode="required")
    assert result["ok"], result["errors"]
    assert result["plan"]["kv_bytes_per_token"] == 70_272
    config = {"checks": result}
    assert plan_text.plan_json(config)["max_concurrent_requests"] == result["plan"]["max_concurrent_requests"]
    table = plan_text.table("gpu-node-1", config)
    assert table.startswith("gpu-node-1: OK") and "70,272 B" in table and "does not add concurrency" in table


def test_hicache_size_300_is_refused_naming_the_short_name() -> None:
    result = preflight.run(resolved(aliases={"hicache_size": "300"}), EXAMPLE, plan_mode="required")
    assert not result["ok"]
    message = next(e for e in result["errors"] if e.startswith("hicache_size (overrides sglang_hicache_size)"))
    assert "per TP rank" in message and "8 ranks" in message and "449.00 GB" in message


def test_host_readings_win_for_hardware_and_a_disagreement_is_an_error() -> None:
    detected = {"gpu_count": 7, "gpu_memory_mib": 97887, "compute_capability": "12.0"}
    result = preflight.run(resolved(), EXAMPLE, detected, plan_mode="required")
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
    required = preflight.run(resolved(), {"gpu_count": 8}, plan_mode="required")
    assert any("sglang_model_config_file" in e for e in required["errors"])
    # A host whose driver does not run: the refusal says why its GPUs could not be read.
    unread = {"notes": ["nvidia-smi did not answer (NVIDIA-SMI has failed)"]}
    required = preflight.run(resolved(), {"gpu_count": 8}, unread, plan_mode="required")
    assert next(e for e in required["errors"] if e.startswith("capacity plan: no value for")).endswith(
        "(the host: nvidia-smi did not answer (NVIDIA-SMI has failed))")


def test_errors_read_on_the_host_are_kept() -> None:
    result = preflight.run(resolved(), EXAMPLE, {"errors": ["sglang_port: 30000 is already bound"]})
    assert "sglang_port: 30000 is already bound" in result["errors"]


def test_render_reports_a_plan_that_does_not_fit_without_refusing() -> None:
    result = preflight.run(resolved(aliases={"hicache_ratio": "3.5"}), EXAMPLE, plan_mode="advisory")
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


def test_a_typed_weight_size_far_from_the_hosts_files_is_reported() -> None:
    files = 587354357760  # 547 GiB of safetensors on the host
    assert preflight.weight_notes({"weight_bytes_total": "547 GiB"}, {"weight_bytes_total": files}) == []
    assert preflight.weight_notes({"weight_bytes_total": "587 GB"}, {"weight_bytes_total": files}) == []
    assert preflight.weight_notes({"weight_bytes_total": "547 GB"}, {"weight_bytes_total": files}) == [
        "sglang_model_weight_size: 547 GB is -7% off the 587.4 GB (547.0 GiB) of safetensors on the host, and the "
        "plan uses it; unset it to plan with the host's files"]
    assert preflight.weight_notes({"weight_bytes_total": None}, {"weight_bytes_total": files}) == []
    # The sandbox's stand-in shards (a few KB) under a real checkpoint's size: the note says what that means.
    assert preflight.weight_notes({"weight_bytes_total": "544 GiB"}, {"weight_bytes_total": 270_000}) == [
        "sglang_model_weight_size: the plan counts 544 GiB of weights; the safetensors on the host sum to 0.000 GB, "
        "under 1 % of that: stand-in shards (the sandbox's are a few KB each, its simulator plays the full size) or a "
        "copy still missing its files (role sglang_weights verifies it against its manifest)"]
    assert preflight.weight_notes({"draft_weight_bytes_total": "1 GB"}, None) == []


# --- pinned host figures against the host's own reading (a deploy) ----------------------------------------------
HOST_NUMA = {"nodes": {"0": 220 * 10**9, "1": 221 * 10**9}, "gpus": [0, 0, 0, 0, 1, 1, 1, 1]}


def test_a_pinned_numa_map_of_another_machine_is_refused_naming_the_variable() -> None:
    fewer = {"nodes_gb": {"0": 220, "1": 221}, "gpus": [0, 0, 0, 1, 1, 1]}
    errors, notes = preflight.pinned_differences({"numa_memory": fewer}, {"numa_memory": HOST_NUMA})
    assert errors == ["sglang_host_numa_memory: gpus says [0, 0, 0, 1, 1, 1] (the NUMA node of each GPU, GPU 0 "
                      "first) but the host has [0, 0, 0, 0, 1, 1, 1, 1]; allowed: the host's figures, or unset it "
                      "to use what the host reports"] and notes == []
    other_nodes = {"nodes_gb": {"0": 220, "2": 221}, "gpus": [0, 0, 0, 0, 2, 2, 2, 2]}
    errors, _notes = preflight.pinned_differences({"numa_memory": other_nodes},
                                                  {"numa_memory": {**HOST_NUMA, "gpus": [0, 0, 0, 0, 2, 2, 2, 2]}})
    assert errors and "nodes_gb gives node(s) [0, 2] but the host has [0, 1]" in errors[0]


def test_a_pinned_numa_figure_far_from_the_hosts_is_reported_and_a_close_one_is_not() -> None:
    pinned = {"numa_memory": {"nodes_gb": {"0": 400, "1": 225}, "gpus": [0, 0, 0, 0, 1, 1, 1, 1]}}
    errors, notes = preflight.pinned_differences(pinned, {"numa_memory": HOST_NUMA})
    assert errors == [] and notes == [
        "sglang_host_numa_memory: node 0: the plan counts 400 GB, the host has 220 GB available now (+82%); the "
        "pinned figure wins (unset it to plan with the host's reading)"]
    # Offline (no reading) or unset: nothing to compare.
    assert preflight.pinned_differences(pinned, None) == ([], [])
    assert preflight.pinned_differences({"numa_memory": None}, {"numa_memory": HOST_NUMA}) == ([], [])


def test_pinned_host_memory_above_what_the_host_has_is_reported() -> None:
    errors, notes = preflight.pinned_differences({"host_mem_available_bytes": 449 * 10**9},
                                                 {"host_mem_available_bytes": 300 * 10**9})
    assert errors == [] and len(notes) == 1 and notes[0].startswith(
        "sglang_host_memory_available_gb: the plan counts 449 GB of host memory, the host has 300 GB available now "
        "(+50%)")
    assert preflight.pinned_differences({"host_mem_available_bytes": 449 * 10**9},
                                        {"host_mem_available_bytes": 440 * 10**9}) == ([], [])


def test_a_deploy_reports_the_differences_in_its_preflight() -> None:
    result = preflight.run(resolved(), EXAMPLE, {"host_mem_available_bytes": 200 * 10**9})
    assert any(w.startswith("sglang_host_memory_available_gb: the plan counts 449 GB") for w in result["warnings"])
