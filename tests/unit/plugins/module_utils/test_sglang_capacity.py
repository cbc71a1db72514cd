"""The capacity planner: KV bytes per token of real architectures, device and host pools, host-memory rules."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_capacity as cap
from helpers import CATALOGS, ROOT, load_script

MODULE = ROOT / "plugins" / "module_utils" / "sglang_capacity.py"
GIB = 1 << 30
RESERVE = 10 * GIB

# --- real public configs (the KV-relevant keys, with their published values) ------------------------

# deepseek-ai/DeepSeek-V3 config.json
DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "num_nextn_predict_layers": 1, "n_routed_experts": 256, "vocab_size": 129280,
    "max_position_embeddings": 163840, "torch_dtype": "bfloat16",
}
# moonshotai/Kimi-K2-Instruct config.json
KIMI_K2: dict[str, Any] = dict(
    DEEPSEEK_V3, model_type="kimi_k2", num_attention_heads=64, num_key_value_heads=64, n_routed_experts=384,
    num_nextn_predict_layers=0, vocab_size=163840, max_position_embeddings=131072)
# meta-llama/Llama-3.3-70B-Instruct config.json
LLAMA3_70B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 28672,
    "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}
# Qwen/Qwen3-235B-A22B config.json (head_dim 128 is NOT hidden_size / heads = 64)
QWEN3_235B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 4096,
    "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
    "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 1536, "vocab_size": 151936,
    "max_position_embeddings": 40960, "use_sliding_window": False, "sliding_window": None,
    "max_window_layers": 94, "torch_dtype": "bfloat16",
}
KIMI_K25 = json.loads((ROOT / "molecule/resources/models/kimi-k2.5/config.json").read_text())
EAGLE3 = json.loads((ROOT / "molecule/resources/models/kimi-k2.5-eagle3/config.json").read_text())

# The example host (inventory/example): 8 x RTX PRO 6000 Blackwell, 449 GB RAM, Kimi-K2.5 INT4 at TP8.
EXAMPLE: dict[str, Any] = {
    "version": "0.5.23", "model_config": KIMI_K25, "draft_config": EAGLE3, "speculative_algorithm": "EAGLE3",
    "tp_size": 8, "mem_fraction_static": 0.85, "gpu_memory_mib": 97887, "weight_bytes_total": 547e9,
    "host_mem_available_gb": 449, "hicache_enabled": True, "hicache_ratio": 2.0, "avg_seq_len": 8192,
}
PLAN_KEYS = {"ok", "errors", "warnings", "kv_bytes_per_token", "device_kv_tokens", "host_kv_tokens_per_rank",
             "host_kv_bytes_per_rank", "host_kv_bytes_total", "host_mem_available_bytes", "max_concurrent_requests"}


def plan(**changes: Any) -> dict[str, Any]:
    values = dict(EXAMPLE)
    values.update(changes)
    return cap.plan(cap.plan_inputs(values))


# --- KV bytes per token --------------------------------------------------------------------------

@pytest.mark.parametrize("config", [DEEPSEEK_V3, KIMI_K2, KIMI_K25], ids=["deepseek-v3", "kimi-k2", "kimi-k2.5"])
def test_mla_latent_is_not_split_across_ranks(config: dict[str, Any]) -> None:
    shape = cap.model_shape(config)
    assert (shape.attention, shape.layers, shape.kv_lora_rank, shape.qk_rope_head_dim) == ("mla", 61, 512, 64)
    for tp in (1, 8, 16):
        assert cap.kv_bytes_per_token(shape, "auto", tp) == (512 + 64) * 61 * 2 == 70_272
        assert cap.kv_bytes_per_token(shape, "bf16", tp) == 70_272
        assert cap.kv_bytes_per_token(shape, "fp8_e4m3", tp) == 35_136
        assert cap.kv_bytes_per_token(shape, "fp8_e5m2", tp) == 35_136


def test_gqa_llama3_70b_splits_kv_heads_and_replicates_below_one_per_rank() -> None:
    shape = cap.model_shape(LLAMA3_70B)
    assert (shape.attention, shape.layers, shape.num_kv_heads, shape.head_dim, shape.v_head_dim) == \
        ("gqa", 80, 8, 128, 128)
    assert cap.kv_bytes_per_token(shape, "auto", 1) == 8 * 256 * 80 * 2 == 327_680
    assert cap.kv_bytes_per_token(shape, "auto", 4) == 2 * 256 * 80 * 2
    assert cap.kv_bytes_per_token(shape, "auto", 8) == 1 * 256 * 80 * 2 == 40_960
    # 8 KV heads on 16 ranks: SGLang keeps max(1, 8 // 16) = 1 head per rank (replicated), not half a head.
    assert cap.kv_heads_per_rank(shape, 16) == 1
    assert cap.kv_bytes_per_token(shape, "auto", 16) == 40_960
    assert cap.kv_bytes_per_token(shape, "fp8_e4m3", 8) == 20_480


def test_gqa_qwen3_moe_uses_the_explicit_head_dim() -> None:
    shape = cap.model_shape(QWEN3_235B)
    assert (shape.layers, shape.num_kv_heads, shape.head_dim, shape.hybrid) == (94, 4, 128, False)
    assert cap.kv_bytes_per_token(shape, "auto", 1) == 4 * 256 * 94 * 2 == 192_512
    assert cap.kv_bytes_per_token(shape, "auto", 2) == 2 * 256 * 94 * 2
    assert cap.kv_bytes_per_token(shape, "auto", 4) == 48_128
    assert cap.kv_bytes_per_token(shape, "auto", 8) == 48_128  # 4 heads on 8 ranks: one each, replicated


def test_gqa_defaults_follow_sglang_model_config() -> None:
    bare = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "num_attention_heads": 32,
            "hidden_size": 4096}
    shape = cap.model_shape(bare)
    assert (shape.num_kv_heads, shape.head_dim, shape.v_head_dim) == (32, 128, 128)
    asymmetric = cap.model_shape(dict(bare, num_key_value_heads=8, head_dim=192, v_head_dim=128))
    assert cap.kv_bytes_per_token(asymmetric, "auto", 1) == 8 * (192 + 128) * 32 * 2


def test_kimi_k25_wrapper_reads_its_text_config() -> None:
    shape = cap.model_shape(KIMI_K25)
    assert shape.architecture == "KimiK25ForConditionalGeneration"
    assert shape.model_type == "kimi_k25"
    assert shape.multimodal
    assert shape.attention == "mla"
    assert cap.model_shape(KIMI_K2).multimodal is False


def test_eagle3_draft_has_its_own_small_kv_and_is_charged_per_target_layer() -> None:
    draft = cap.model_shape(EAGLE3)
    assert (draft.attention, draft.draft_layers, draft.num_kv_heads, draft.head_dim) == ("gqa", 1, 8, 128)
    assert cap.draft_kv_bytes_per_token(draft, "auto", 8) == 1 * 256 * 1 * 2 == 512
    assert cap.draft_kv_bytes_per_token(draft, "auto", 1) == 8 * 256 * 2
    assert cap.draft_kv_bytes_per_token(draft, "fp8_e4m3", 8) == 256
    # DeepSeek-V3 as its own MTP draft: num_nextn_predict_layers, not num_hidden_layers.
    assert cap.model_shape(DEEPSEEK_V3).draft_layers == 1
    # The KV budget is divided by cell + cell * draft / target layers from 0.5.14 (70,272 / 61 = 1,152).
    assert cap.charged_bytes_per_token("0.5.13", 70_272, 61, 1) == 70_272
    assert cap.charged_bytes_per_token("0.5.14", 70_272, 61, 1) == 71_424
    assert cap.charged_bytes_per_token("0.5.17", 70_272, 61, 1) == 71_424
    assert cap.charged_bytes_per_token("0.5.18", 70_272, 61, 1) == 71_424
    assert cap.charged_bytes_per_token("0.5.23", 70_272, 61, 0) == 70_272


@pytest.mark.parametrize("dtype", ["nvfp4", "fp4_mx_block16", "fp4_e2m1", "mxfp8"])
def test_block_scaled_kv_dtypes_are_refused_clearly(dtype: str) -> None:
    with pytest.raises(cap.CapacityError, match="block-scale buffers"):
        cap.dtype_bytes(dtype)
    result = plan(kv_cache_dtype=dtype)
    assert not result["ok"]
    assert result["errors"][0].startswith("sglang_kv_cache_dtype: ")
    with pytest.raises(cap.CapacityError, match="unknown"):
        cap.dtype_bytes("int4")


def test_unreadable_configs() -> None:
    with pytest.raises(cap.CapacityError, match="num_hidden_layers"):
        cap.model_shape({"architectures": ["X"]})
    with pytest.raises(cap.CapacityError, match="empty"):
        cap.model_shape({})
    hybrid = cap.model_shape(dict(QWEN3_235B, layer_types=["sliding_attention", "full_attention"]))
    assert hybrid.hybrid


# --- device pool ---------------------------------------------------------------------------------

def test_device_tokens_follow_sglang_profile_rule() -> None:
    total, weights, cell = 97887 * (1 << 20), int(547e9 / 8), 71_424
    pre = total - cap.DEFAULT_GPU_RESERVED_BYTES
    rest = (pre - weights) - pre * (1 - 0.85)
    assert cap.device_kv_tokens(total, weights, 0.85, cell) == int(rest) // cell
    assert cap.device_kv_tokens(total, weights, 0.85, cell, page_size=64) == int(rest) // cell // 64 * 64
    assert cap.device_kv_tokens(total, weights, 0.85, cell, max_total_tokens=1000) == 1000
    assert cap.device_kv_tokens(total, weights, 0.6, cell) == 0
    more = cap.device_kv_tokens(total, weights, 0.85, cell, gpu_reserved_bytes=0)
    assert more > cap.device_kv_tokens(total, weights, 0.85, cell)


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


# --- host pool -----------------------------------------------------------------------------------

def test_host_pool_tokens_by_ratio_and_by_size() -> None:
    assert cap.host_pool_tokens(173_395, 70_272, 2.0) == 346_791
    assert cap.host_pool_tokens(173_395, 70_272, 2.0, page_size=64) == (346_790 // 64 + 1) * 64
    assert cap.host_pool_tokens(173_395, 70_272, 2.0, size_gb=20) == int(20e9 // 70_272) + 1  # size wins


def test_draft_side_pool_slots_per_version() -> None:
    assert cap.draft_host_pool_tokens("0.5.10", 1000) == 0         # no draft host pool yet
    assert cap.draft_host_pool_tokens("0.5.11", 1000) == 1001      # ratio path adds the padding page again
    assert cap.draft_host_pool_tokens("0.5.22", 1024, 64) == 1088
    assert cap.draft_host_pool_tokens("0.5.23", 1024, 64) == 1024  # host_token_capacity: exactly the target's


def test_default_ratio_and_auto_sizing_per_version() -> None:
    assert cap.default_hicache_ratio("0.5.17") == 2.0
    assert cap.default_hicache_ratio("0.5.18", "buffer_only") == 2.0  # the mode flag does not exist yet
    assert cap.default_hicache_ratio("0.5.19", "buffer_only") == 1.2
    assert cap.default_hicache_ratio("0.5.23", "cache") == 2.0
    assert not cap.auto_sizing("0.5.20", None, 0, 0.8)
    assert cap.auto_sizing("0.5.21", None, 0, 0.8)
    assert not cap.auto_sizing("0.5.23", 2.0, 0, 0.8)
    assert not cap.auto_sizing("0.5.23", None, 100, 0.8)
    assert cap.auto_hicache_ratio(10**9, 10**9, 2.0) == pytest.approx(0.95)
    assert cap.auto_hicache_ratio(10**12, 10**9, 2.0) == 2.0


def test_rank_budget_per_version() -> None:
    available = 449 * 10**9
    assert cap.rank_host_budget("0.5.9", available, 8) == available - RESERVE      # each rank alone
    assert cap.rank_host_budget("0.5.18", available, 8) == available - RESERVE
    assert cap.rank_host_budget("0.5.19", available, 8) == (available - RESERVE) // 8  # split
    assert cap.rank_host_budget("0.5.20", available, 8, cgroup_headroom_bytes=100 * 10**9) == \
        (available - RESERVE) // 8                                                    # no cgroup bound yet
    assert cap.rank_host_budget("0.5.21", available, 8, cgroup_headroom_bytes=100 * 10**9) == \
        (100 * 10**9 - RESERVE) // 8                                                  # min(psutil, cgroup)


@pytest.mark.parametrize(("version", "target_gb", "verdict"), [
    ("0.5.9", 50, "ok"), ("0.5.18", 50, "ok"),                  # 8 x 50 = 400 <= 438.3
    ("0.5.9", 60, "overcommit"), ("0.5.18", 60, "overcommit"),  # 8 x 60 = 480: each rank alone says yes
    ("0.5.18", 440, "refused"),                                # even one rank does not fit
    ("0.5.19", 60, "refused"), ("0.5.20", 60, "refused"),      # 60 > 438.3 / 8 = 54.8
    ("0.5.19", 50, "may_fail"), ("0.5.23", 50, "may_fail"),    # fits the split, not after peers pinned (#38156)
    ("0.5.19", 29, "ok"), ("0.5.23", 29, "ok"),                # 438.3 / 15 = 29.2 passes in any order
])
def test_host_memory_verdict_per_version(version: str, target_gb: int, verdict: str) -> None:
    check = cap.host_memory_check(version, target_gb * 10**9, 0, 8, 449 * 10**9)
    assert check.verdict == verdict
    assert check.safe_per_rank_bytes <= check.fit_per_rank_bytes


def test_cgroup_limit_counts_from_0_5_21() -> None:
    args = (50 * 10**9, 0, 8, 449 * 10**9)
    assert cap.host_memory_check("0.5.20", *args, cgroup_headroom_bytes=200 * 10**9).verdict == "may_fail"
    assert cap.host_memory_check("0.5.21", *args, cgroup_headroom_bytes=200 * 10**9).verdict == "refused"
    assert cap.host_memory_check("0.5.21", *args, auto_sized=True).verdict == "ok"


def test_draft_side_pool_is_checked_after_the_target_pool_is_pinned() -> None:
    # 0.5.19+: the draft check on a rank sees its own target pool already pinned.
    check = cap.host_memory_check("0.5.23", 50 * 10**9, 60 * 10**9, 8, 449 * 10**9)
    assert check.verdict == "refused"


def test_host_pool_not_larger_than_device_asserts_up_to_0_5_14() -> None:
    old = plan(version="0.5.14", hicache_ratio=0.9)
    assert not old["ok"]
    assert "AssertionError" in old["errors"][0]
    assert old["errors"][0].startswith("sglang_hicache_ratio: ")
    new = plan(version="0.5.15", hicache_ratio=0.9)
    assert new["ok"]
    assert any("only duplicates" in w for w in new["warnings"])


# --- concurrency ---------------------------------------------------------------------------------

def test_concurrency_is_device_tokens_over_sequence_length_capped() -> None:
    assert cap.max_concurrent_requests(243_570, 8192) == 29
    assert cap.max_concurrent_requests(487_141, 8192) == 59
    assert cap.max_concurrent_requests(487_141, 8192, speculative=True) == 48  # EAGLE's default cap
    assert cap.max_concurrent_requests(487_141, 8192, max_running_requests=32, speculative=True) == 32
    assert cap.max_concurrent_requests(487_141, 8192, max_running_requests=100, speculative=True) == 59


# --- the plan ------------------------------------------------------------------------------------

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
    names = {"sglang_hicache_size": "hicache_size (overrides sglang_hicache_size)"}
    result = plan(hicache_ratio=None, hicache_size_gb=300, names=names)
    assert not result["ok"]
    (error,) = result["errors"]
    assert error.startswith("hicache_size (overrides sglang_hicache_size): 300 is GB per TP rank, not a total")
    assert "MLA's latent KV (70,272 bytes per token) is not split across TP ranks" in error
    assert "8 ranks x 302.19 GB (300.00 GB KV + 2.19 GB EAGLE draft side pool) = 2,417.49 GB" in error
    assert "the host has 449.00 GB of RAM available" in error
    assert "(available - 10 GiB) // 8 = 54.78 GB" in error
    assert "allowed: at most 29 GB per rank" in error
    assert result["host_kv_bytes_total"] == 8 * result["host_kv_bytes_per_rank"] > 2_400 * 10**9
    older = plan(version="0.5.18", hicache_ratio=None, hicache_size_gb=300, names=names)
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
    assert hicache["max_concurrent_requests_with"] == hicache["max_concurrent_requests_without"]
    assert "concurrency" in hicache["does_not_add"]
    assert "what_if" not in plan(what_if=False)


def test_errors_name_the_variable() -> None:
    result = plan(mem_fraction_static=None, gpu_memory_mib=None, names={"sglang_mem_fraction_static": "mfs (cli)"})
    assert any(e.startswith("mfs (cli): is not set") for e in result["errors"])
    assert any(e.startswith("sglang_gpu_memory_mib: is not known") for e in result["errors"])
    assert result["device_kv_tokens"] == 0
    assert not result["ok"]


# --- building inputs -----------------------------------------------------------------------------

def test_plan_inputs_types_units_and_refuses_unknown_keys() -> None:
    inputs = cap.plan_inputs({"version": "0.5.23", "model_config": KIMI_K25, "tp_size": "8",
                              "gpu_memory_mib": "97887", "weight_bytes_total": "547000000000",
                              "host_mem_available_gb": 449, "gpu_reserved_gib": 1.5, "hicache_enabled": "true",
                              "hicache_ratio": "2.0", "hicache_size_gb": None, "kv_cache_dtype": None})
    assert inputs.tp_size == 8
    assert inputs.gpu_memory_bytes == 97887 << 20
    assert inputs.weight_bytes_per_gpu == 547 * 10**9 // 8
    assert inputs.host_mem_available_bytes == 449 * 10**9
    assert inputs.gpu_reserved_bytes == 3 * GIB // 2
    assert inputs.hicache_enabled is True
    assert inputs.hicache_ratio == 2.0
    assert inputs.hicache_size_gb == 0          # null -> the default
    assert inputs.kv_cache_dtype == "auto"
    with pytest.raises(cap.CapacityError, match="hicache_sise: is not a plan input"):
        cap.plan_inputs({"version": "0.5.23", "model_config": KIMI_K25, "hicache_sise": 1})
    with pytest.raises(cap.CapacityError, match="is not a boolean"):
        cap.plan_inputs({"version": "0.5.23", "model_config": KIMI_K25, "hicache_enabled": "maybe"})
    with pytest.raises(cap.CapacityError, match="model_config: is required"):
        cap.plan_inputs({"version": "0.5.23"})


def test_args_settings_read_the_resolved_arguments() -> None:
    args = [["--model-path", "/models/Kimi-K2.5"], ["--tp-size", "8"], ["--mem-fraction-static", "0.85"],
            ["--kv-cache-dtype", "auto"], ["--enable-hierarchical-cache"], ["--hicache-ratio", "2.0"],
            ["--speculative-algorithm", "EAGLE3"], ["--max-total-tokens", "128k"], ["--enable-metrics"]]
    settings = cap.args_settings(args)
    assert settings == {"tp_size": "8", "mem_fraction_static": "0.85", "kv_cache_dtype": "auto",
                        "hicache_enabled": True, "hicache_ratio": "2.0", "speculative_algorithm": "EAGLE3",
                        "max_total_tokens": "128000"}
    inputs = cap.plan_inputs({**settings, "version": "0.5.23", "model_config": KIMI_K25})
    assert (inputs.tp_size, inputs.mem_fraction_static, inputs.max_total_tokens) == (8, 0.85, 128_000)


def test_versions_parse() -> None:
    assert cap.version_tuple("0.5.23+sim") == (0, 5, 23)
    assert cap.version_tuple("0.5.10.post1") == (0, 5, 10)
    assert cap.version_tuple("0.6") == (0, 6, 0)
    assert cap.at_least("0.5.10.post1", "0.5.10")


# --- the copy in the simulator wheel -------------------------------------------------------------

@pytest.mark.parametrize("module", [MODULE, MODULE.with_name("sglang_types.py")], ids=lambda p: p.name)
def test_module_runs_on_python_3_9_and_imports_only_the_standard_library(module: Path) -> None:
    source = module.read_text()
    tree = ast.parse(source, feature_version=(3, 9))
    assert "from __future__ import annotations" in source  # annotations stay strings on 3.9
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    # sglang_types: the package-relative fallback (from . import) has no module name.
    assert imported <= {"__future__", "dataclasses", "math", "re", "typing", "sglang_types"}


def test_simulator_wheel_carries_this_module() -> None:
    path = ROOT / "molecule" / "resources" / "simulator" / "build_wheel.py"
    module = load_script(path, "sim_build_wheel_for_capacity")
    files = module.package_files("0.5.23+sim", str(CATALOGS / "sglang-0.5.23.json"))
    assert files["sglang/_sim/sglang_capacity.py"] == MODULE.read_bytes()
    assert files["sglang/_sim/sglang_types.py"] == MODULE.with_name("sglang_types.py").read_bytes()
