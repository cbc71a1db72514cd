"""The capacity plan of one host: the formulas applied to its inputs, the host-memory verdict explained,
what-ifs, and messages that name the variable behind each input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_capacity as cap
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_plan import PlanInputs, input_names
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_plan import plan as make_plan
from model_configs import EAGLE3, KIMI_K25, LLAMA3_70B

GIB = 1 << 30
RESERVE = 10 * GIB
# The example host (inventory/example): 8 x RTX PRO 6000 Blackwell, 449 GB RAM, Kimi-K2.5 INT4 at TP8.
EXAMPLE: dict[str, Any] = {
    "version": "0.5.23", "model_config": KIMI_K25, "draft_config": EAGLE3, "speculative_algorithm": "EAGLE3",
    "tp_size": 8, "mem_fraction_static": 0.85, "gpu_memory_mib": 97887, "weight_bytes_total": 547e9,
    "host_mem_available_gb": 449, "hicache_enabled": True, "hicache_ratio": 2.0, "avg_seq_len": 8192,
}
PLAN_KEYS = {"ok", "errors", "warnings", "kv_bytes_per_token", "device_kv_tokens", "host_kv_tokens_per_rank",
             "host_kv_bytes_per_rank", "host_kv_bytes_total", "host_mem_available_bytes", "max_concurrent_requests"}


def plan(**changes: Any) -> dict[str, Any]:
    """The example host's plan with changes; memory in the inventory's units (MiB of GPU, GB of RAM,
    the model's total weight bytes), None for a field's default."""
    values = {**EXAMPLE, **changes}
    tp = int(values.get("tp_size") or 1)
    if values.get("gpu_memory_mib") is not None:
        values["gpu_memory_bytes"] = values["gpu_memory_mib"] << 20
    for total in ("weight_bytes_total", "draft_weight_bytes_total"):
        if values.get(total) is not None:
            values[total.replace("_total", "_per_gpu")] = int(values[total]) // tp
    if values.get("host_mem_available_gb") is not None:
        values["host_mem_available_bytes"] = int(values["host_mem_available_gb"] * 10**9)
    for unit_key in ("gpu_memory_mib", "weight_bytes_total", "draft_weight_bytes_total", "host_mem_available_gb"):
        values.pop(unit_key, None)
    return make_plan(PlanInputs(**{key: value for key, value in values.items() if value is not None}))


@pytest.mark.parametrize("dtype", ["nvfp4", "fp4_mx_block16", "fp4_e2m1", "mxfp8"])
def test_block_scaled_kv_dtypes_are_refused_clearly(dtype: str) -> None:
    with pytest.raises(cap.CapacityError, match="block-scale buffers"):
        cap.dtype_bytes(dtype)
    result = plan(kv_cache_dtype=dtype)
    assert not result["ok"]
    assert result["errors"][0].startswith("sglang_kv_cache_dtype: ")
    with pytest.raises(cap.CapacityError, match="unknown"):
        cap.dtype_bytes("int4")


def test_multimodal_reserve_from_0_5_18() -> None:
    before, after = plan(version="0.5.17"), plan(version="0.5.18")
    assert before["device"]["multimodal_reserve_bytes"] == 0
    assert after["device"]["multimodal_reserve_bytes"] == 100 << 20
    lost = (100 << 20) // 71_424
    assert before["device_kv_tokens"] - after["device_kv_tokens"] in (lost, lost + 1)


def test_draft_weights_count_before_the_kv_pool_from_0_5_14() -> None:
    draft_weights = {"draft_weight_bytes_total": 6e9}
    new_with, new_without = plan(version="0.5.14", **draft_weights), plan(version="0.5.14")
    assert new_with["device_kv_tokens"] < new_without["device_kv_tokens"]
    assert any("draft_weight" in w for w in new_without["warnings"])
    old_with, old_without = plan(version="0.5.13", **draft_weights), plan(version="0.5.13")
    assert old_with["device_kv_tokens"] == old_without["device_kv_tokens"]
    assert old_with["device"]["charged_bytes_per_token"] == 70_272  # the draft KV is not charged before 0.5.14
    tight = plan(version="0.5.13", mem_fraction_static=0.99, draft_weight_bytes_total=60e9, hicache_enabled=False)
    assert any("leaves free" in w for w in tight["warnings"])


def test_too_small_mem_fraction_is_refused_with_the_minimum() -> None:
    result = plan(mem_fraction_static=0.6)
    assert not result["ok"]
    assert result["errors"][0].startswith("sglang_mem_fraction_static: 0.6 leaves no GPU memory")
    assert "allowed: above 0.6" in result["errors"][0]


def test_host_pool_not_larger_than_device_asserts_up_to_0_5_14() -> None:
    old = plan(version="0.5.14", hicache_ratio=0.9)
    assert not old["ok"]
    assert "AssertionError" in old["errors"][0]
    assert old["errors"][0].startswith("sglang_hicache_ratio: ")
    new = plan(version="0.5.15", hicache_ratio=0.9)
    assert new["ok"]
    assert any("only duplicates" in w for w in new["warnings"])


def test_example_host_plan() -> None:
    result = plan()
    assert set(result) >= PLAN_KEYS
    assert result["ok"], result["errors"]
    total, weights = 97887 * (1 << 20), int(547e9) // 8
    pre = total - cap.DEFAULT_GPU_RESERVED_BYTES
    rest = (pre - weights) - pre * (1 - 0.85) - (100 << 20)   # multimodal reserve (0.5.18+)
    device = int(rest) // 71_424                               # 70,272 target + 1,152 EAGLE-3 draft charge
    host = int(device * 2.0) + 1                                # ratio 2.0 + one padding page
    per_rank = host * 70_272 + host * 512                       # target pool + draft side pool (0.5.23)
    assert result["kv_bytes_per_token"] == 70_272
    assert result["device_kv_tokens"] == device == 243_570
    assert result["host_kv_tokens_per_rank"] == host == 487_141
    assert result["host_kv_bytes_per_rank"] == per_rank
    assert result["host_kv_bytes_total"] == 8 * per_rank
    assert result["host_mem_available_bytes"] == 449 * 10**9
    assert result["max_concurrent_requests"] == device // 8192 == 29
    # 34.5 GB per rank fits SGLang 0.5.23's 54.8 GB split, but not if ranks read after peers pinned.
    assert result["host"]["check"]["verdict"] == "may_fail"
    assert len(result["warnings"]) == 2
    assert any("#38156" in w and w.startswith("sglang_hicache_ratio: ") for w in result["warnings"])
    assert all(isinstance(result[key], int) for key in PLAN_KEYS - {"ok", "errors", "warnings"})
    json.dumps(result)  # plan.yml writes it as JSON


def test_example_host_plan_on_an_older_version() -> None:
    result = plan(version="0.5.18", draft_weight_bytes_total=6e9)
    assert result["ok"]
    assert result["host"]["check"]["verdict"] == "ok"   # 8 x 34.5 GB <= 449 GB - 10 GiB
    assert result["warnings"] == []


def test_hicache_size_300_is_refused_with_per_rank_meaning() -> None:
    names = {"hicache_size_gb": "hicache_size (overrides sglang_hicache_size)"}
    result = plan(hicache_ratio=None, hicache_size_gb=300, sources=names)
    assert not result["ok"]
    (error,) = result["errors"]
    assert error.startswith("hicache_size (overrides sglang_hicache_size): 300 is GB per TP rank, not a total")
    assert "MLA's latent KV (70,272 bytes per token) is not split across TP ranks" in error
    assert "8 ranks x 302.19 GB (300.00 GB KV + 2.19 GB EAGLE draft side pool) = 2,417.49 GB" in error
    assert "the host has 449.00 GB of RAM available" in error
    assert "(available - 10 GiB) // 8 = 54.78 GB" in error
    assert "allowed: at most 29 GB per rank" in error
    assert result["host_kv_bytes_total"] == 8 * result["host_kv_bytes_per_rank"] > 2_400 * 10**9
    older = plan(version="0.5.18", hicache_ratio=None, hicache_size_gb=300, sources=names)
    assert "checks each rank alone against the whole host" in older["errors"][0]
    assert "allowed: at most 54 GB per rank" in older["errors"][0]


def test_auto_sized_host_pool_from_0_5_21() -> None:
    roomy = plan(hicache_ratio=None)
    assert roomy["host"]["mode"] == "auto"
    assert roomy["host"]["ratio"] == 2.0
    assert roomy["ok"]
    assert not any("#38156" in w for w in roomy["warnings"])  # booked against one snapshot: no re-read
    tight = plan(hicache_ratio=None, host_mem_available_gb=150)
    budget = (150 * 10**9 - RESERVE) // 8 * 0.8
    assert tight["host"]["ratio"] < 2.0
    assert tight["host_kv_bytes_per_rank"] <= budget
    old = plan(version="0.5.20", hicache_ratio=None, host_mem_available_gb=150)
    assert old["host"]["mode"] == "ratio"
    assert not old["ok"]


def test_gqa_host_message_and_no_draft() -> None:
    result = plan(model_config=LLAMA3_70B, draft_config=None, speculative_algorithm=None, weight_bytes_total=141e9,
                  hicache_ratio=None, hicache_size_gb=100)
    assert result["kv_bytes_per_token"] == 40_960
    assert result["host"]["draft_bytes_per_rank"] == 0
    assert "each rank keeps its own KV pool" in result["errors"][0]


def test_what_if_shows_fp8_mem_fraction_and_what_hicache_adds() -> None:
    result = plan()
    what_if = result["what_if"]
    fp8 = what_if["kv_cache_dtype=fp8_e4m3"]
    assert fp8["device_kv_tokens"] >= 2 * result["device_kv_tokens"] - 1
    assert fp8["max_concurrent_requests"] == 48  # 59 by tokens, capped by EAGLE's 48
    low, high = what_if["mem_fraction_static=0.8"], what_if["mem_fraction_static=0.9"]
    assert low["device_kv_tokens"] < result["device_kv_tokens"] < high["device_kv_tokens"]
    assert low["host_check"] == "ok"
    hicache = what_if["hicache"]
    assert hicache["prefix_cache_tokens_host"] == result["host_kv_tokens_per_rank"]
    assert "concurrency" in hicache["does_not_add"] and "same with and without" in hicache["does_not_add"]
    assert "what_if" not in plan(what_if=False)


def test_errors_name_the_variable() -> None:
    result = plan(mem_fraction_static=None, gpu_memory_mib=None, sources={"mem_fraction_static": "mfs (cli)"})
    assert any(e.startswith("mfs (cli): is not set") for e in result["errors"])
    assert any(e.startswith("sglang_gpu_memory_mib: is not known") for e in result["errors"])
    assert result["device_kv_tokens"] == 0
    assert not result["ok"]


def test_every_input_has_a_variable_to_name() -> None:
    fields = set(PlanInputs.__dataclass_fields__) - {"version", "sources", "what_if", "gpu_reserved_bytes"}
    assert fields <= set(input_names()), fields - set(input_names())
