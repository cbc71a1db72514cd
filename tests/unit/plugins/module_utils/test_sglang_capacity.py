"""The capacity formulas: KV bytes per token of real architectures, device and host pools, host-memory rules."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_capacity as cap
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_types as types
from helpers import CATALOGS, ROOT, load_script
from model_configs import DEEPSEEK_V3, EAGLE3, KIMI_K2, KIMI_K25, LLAMA3_70B, QWEN3_235B

MODULE = ROOT / "plugins" / "module_utils" / "sglang_capacity.py"
GIB = 1 << 30
RESERVE = 10 * GIB


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


# --- concurrency ---------------------------------------------------------------------------------

def test_concurrency_is_device_tokens_over_sequence_length_capped() -> None:
    assert cap.max_concurrent_requests(243_570, 8192) == 29
    assert cap.max_concurrent_requests(487_141, 8192) == 59
    assert cap.max_concurrent_requests(487_141, 8192, speculative=True) == 48  # EAGLE's default cap
    assert cap.max_concurrent_requests(487_141, 8192, max_running_requests=32, speculative=True) == 32
    assert cap.max_concurrent_requests(487_141, 8192, max_running_requests=100, speculative=True) == 59


def test_versions_parse() -> None:
    assert types.version_tuple("0.5.23+sim") == (0, 5, 23)
    assert types.version_tuple("0.5.10.post1") == (0, 5, 10)
    assert types.version_tuple("0.6") == (0, 6, 0)
    assert cap.at_least("0.5.10.post1", "0.5.10")


def test_human_readable_ints_as_sglang_takes_them() -> None:
    assert types.to_human_int("128k") == 128_000
    assert types.to_human_int("25.6k") == 25_600
    assert types.to_human_int("1Mi") == 1 << 20
    assert types.to_human_int(4096) == 4096
    for bad in ("1.5", "1.5Ki", "1m", "x"):
        with pytest.raises(ValueError, match="is not an integer"):
            types.to_human_int(bad)


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
    path = ROOT / "extensions" / "molecule" / "resources" / "simulator" / "build_wheel.py"
    module = load_script(path, "sim_build_wheel_for_capacity")
    files = module.package_files("0.5.23+sim", str(CATALOGS / "sglang-0.5.23.json"))
    assert files["sglang/_sim/sglang_capacity.py"] == MODULE.read_bytes()
    assert files["sglang/_sim/sglang_types.py"] == MODULE.with_name("sglang_types.py").read_bytes()


def test_the_device_pool_adds_what_each_version_counts() -> None:
    """The draft's weights and its share of each token from 0.5.14, the multimodal reserve from 0.5.18."""
    gib = 1 << 30
    args = (int(94.1 * gib), int(68 * gib), int(0.45 * gib), 0.85, 70272, 61, 1, True)
    old, mid, new = (cap.device_pool(v, *args) for v in ("0.5.12", "0.5.14", "0.5.23"))
    assert (old.weights_bytes, old.charged_bytes_per_token, old.reserve_bytes) == (int(68 * gib), 70272, 0)
    assert (mid.weights_bytes, mid.charged_bytes_per_token, mid.reserve_bytes) == (
        int(68 * gib) + int(0.45 * gib), int(70272 * (1 + 1 / 61)), 0)
    assert (new.charged_bytes_per_token, new.reserve_bytes) == (70272 + 70272 // 61, cap.MULTIMODAL_RESERVE_BYTES)
    assert new.tokens == cap.device_kv_tokens(args[0], new.weights_bytes, 0.85, new.charged_bytes_per_token,
                                              gpu_reserved_bytes=0, reserved_after_load_bytes=new.reserve_bytes)
    assert old.tokens > mid.tokens > new.tokens
