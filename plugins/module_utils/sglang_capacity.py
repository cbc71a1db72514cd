# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Capacity plan: KV bytes per token, device KV tokens, the HiCache host pool and its host-memory check.

This is the one place that does capacity math. Every formula mirrors the SGLang source it names
(read from the real wheels 0.5.9 ... 0.5.23; paths are inside the ``sglang`` package). Plain
standard-library Python that also runs on Python 3.9+: ``molecule/resources/simulator/build_wheel.py``
copies this file into the simulator wheel, so the simulator refuses exactly what the planner refuses.

Units: bytes and tokens are ints. ``--hicache-size`` is GB (1e9) per TP rank; SGLang's GPU memory
figures are GiB (``get_available_gpu_memory`` divides by 1 << 30); its host reserve is 10 GiB.

Entry points: ``model_shape``, ``kv_bytes_per_token``, ``device_kv_tokens``, ``host_pool_tokens``,
``host_memory_check``, ``max_concurrent_requests``, ``plan`` (with ``plan_inputs`` and
``args_settings`` to build its ``PlanInputs`` from plain Ansible values and resolved arguments).
"""

from __future__ import annotations

import math
import re
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

from . import sglang_types as types

GB = 10**9
GIB = 1 << 30
MIB = 1 << 20

# sglang/srt/mem_cache/pool_host/base.py (0.5.14+; inline ``ten_gb`` in memory_pool_host.py before):
# HICACHE_HOST_MEMORY_RESERVE_BYTES, host RAM every host-pool check leaves for everything else.
HOST_RESERVE_BYTES = 10 * GIB

# GPU memory in use before the weights load: the CUDA context (~0.7 GiB) plus torch.distributed /
# NCCL communicators (SGLang logs "Init torch distributed ends. mem usage=0.79 GB" at TP8). SGLang
# measures what is left as ``pre_model_load_memory`` after ``init_torch_distributed``
# (model_executor/model_runner.py); this constant stands in for that measurement. Read the real
# figure from "Load weight begin. avail mem=X GB" (X is GiB): reserved = GPU total - X GiB.
DEFAULT_GPU_RESERVED_BYTES = 3 * GIB // 2

# mem_cache/kv_cache_configurator.py mm_runtime_reservation_gb (0.5.18+): a multimodal model's KV
# budget loses SGLANG_VLM_CACHE_SIZE_MB (default 100) for the embedding cache (environ.py).
MULTIMODAL_RESERVE_BYTES = 100 * MIB

# mem_cache/hicache_auto_size.py (0.5.21+): page rounding, allocator metadata and staging buffers
# are kept out of the auto-sized host budget.
AUTO_SIZE_SLACK_FRACTION = 0.05

# arg_groups/speculative_hook.py _handle_eagle_family (server_args.py before 0.5.13): with any
# speculative algorithm and no --max-running-requests, "Max running requests is reset to 48".
SPECULATIVE_MAX_RUNNING_REQUESTS = 48
SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
# Algorithms whose draft model has its own KV pool (model_executor/pool_configurator.py charges it).
DRAFT_KV_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")

# --kv-cache-dtype -> bytes per element (torch._utils._element_size of the dtype SGLang maps it to).
# "auto" is the model dtype; on CUDA a float32 checkpoint runs in bfloat16, so 2 bytes.
DTYPE_BYTES = {"auto": 2, "bf16": 2, "bfloat16": 2, "float16": 2, "fp16": 2, "half": 2,
               "fp8_e4m3": 1, "fp8_e5m2": 1}
# Block-scaled formats add scale buffers whose size depends on the recipe and the attention path
# (model_executor/pool_configurator.py DefaultPoolConfigurator._compute_cell_size, 0.5.23:
# FP4 = packed half bytes + a per-16 scale; MXFP8 = 1 byte + a per-32 scale on MHA only).
UNMODELED_DTYPES = ("fp4_e2m1", "nvfp4", "fp4_mx_block16", "mxfp8")

SHAPE_KEYS = ("attention", "layers", "kv_lora_rank", "qk_rope_head_dim", "num_kv_heads", "head_dim", "v_head_dim")


class CapacityError(ValueError):
    """An input the planner cannot use; the message says which and why."""


# --- versions -------------------------------------------------------------------------------

def version_tuple(version: str) -> tuple[int, int, int]:
    """'0.5.23', '0.5.10.post1', '0.5.23+sim' -> (0, 5, 23); rules change only at patch releases."""
    parts = [int(m.group(0)) if m else 0
             for m in (re.match(r"\d+", p) for p in str(version).split("+", 1)[0].split(".")[:3])]
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def at_least(version: str, minimum: str) -> bool:
    return version_tuple(version) >= version_tuple(minimum)


# --- the model ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelShape:
    """What the KV cache of a model depends on, read from its HF config.json."""

    architecture: str
    model_type: str
    attention: str              # "mla" or "gqa" (GQA, MQA and MHA alike)
    layers: int                 # num_hidden_layers of the text model
    kv_lora_rank: int = 0       # MLA
    qk_rope_head_dim: int = 0   # MLA
    num_kv_heads: int = 0       # GQA: num_key_value_heads (default num_attention_heads)
    head_dim: int = 0           # GQA: head_dim (default hidden_size // num_attention_heads)
    v_head_dim: int = 0         # GQA: v_head_dim (default head_dim)
    draft_layers: int = 0       # KV layers when used as a draft: num_nextn_predict_layers, else layers
    multimodal: bool = False    # a wrapper with text_config / vision_config (Kimi-K2.5, Qwen-VL ...)
    hybrid: bool = False        # sliding-window or linear-attention layers, not modeled
    indexer: bool = False       # DeepSeek-V3.2-style sparse-attention indexer cache, not modeled


def _int(config: dict[str, Any], key: str, default: int = 0) -> int:
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise CapacityError(f"config.json: {key}={value!r} is not an integer")
    return int(value)


def model_shape(config: dict[str, Any]) -> ModelShape:
    """Read the KV geometry from a HF config.json (a multimodal wrapper's ``text_config`` is used).

    MLA when ``kv_lora_rank`` is present (configs/model_config.py keys MLA on the architecture,
    and every MLA architecture there has it); else GQA with SGLang's defaults
    (configs/model_config.py ModelConfig: head_dim = hidden_size // num_attention_heads,
    v_head_dim = head_dim, num_key_value_heads = num_attention_heads).
    """
    if not isinstance(config, dict) or not config:
        raise CapacityError("config.json is empty or not a JSON object")
    text = config.get("text_config")
    text = text if isinstance(text, dict) and text else config
    names = config.get("architectures") or text.get("architectures") or ["unknown"]
    architecture = str(names[0])
    model_type = str(config.get("model_type") or text.get("model_type") or "")
    layers = _int(text, "num_hidden_layers")
    if layers <= 0:
        raise CapacityError("config.json: num_hidden_layers is missing")
    nextn = text.get("num_nextn_predict_layers")
    draft_layers = _int(text, "num_nextn_predict_layers") if nextn is not None else layers
    multimodal = text is not config or "vision_config" in config
    kinds = {str(kind) for kind in text.get("layer_types") or []}
    hybrid = bool(kinds - {"full_attention", "attention"}) or bool(text.get("use_sliding_window"))
    common = {"architecture": architecture, "model_type": model_type, "layers": layers,
              "draft_layers": draft_layers, "multimodal": multimodal, "hybrid": hybrid,
              "indexer": text.get("index_head_dim") is not None or text.get("index_topk") is not None}
    if text.get("kv_lora_rank"):
        return ModelShape(attention="mla", kv_lora_rank=_int(text, "kv_lora_rank"),
                          qk_rope_head_dim=_int(text, "qk_rope_head_dim"), **common)
    heads = _int(text, "num_attention_heads")
    if heads <= 0:
        raise CapacityError("config.json: num_attention_heads is missing")
    kv_heads = _int(text, "num_key_value_heads", heads) or heads
    head_dim = _int(text, "head_dim") or _int(text, "hidden_size") // heads
    if head_dim <= 0:
        raise CapacityError("config.json: neither head_dim nor hidden_size is given")
    v_head_dim = _int(text, "v_head_dim") or head_dim
    return ModelShape(attention="gqa", num_kv_heads=kv_heads, head_dim=head_dim, v_head_dim=v_head_dim, **common)


def dtype_bytes(kv_cache_dtype: str | None) -> int:
    """Bytes per KV element for ``--kv-cache-dtype``; refuse the block-scaled formats."""
    name = str(kv_cache_dtype or "auto")
    if name in DTYPE_BYTES:
        return DTYPE_BYTES[name]
    if name in UNMODELED_DTYPES:
        raise CapacityError(
            f"kv_cache_dtype {name!r} adds block-scale buffers whose size depends on the recipe and the "
            "attention backend; the capacity plan models auto, bf16/bfloat16, float16 and fp8_e4m3/fp8_e5m2")
    raise CapacityError(f"kv_cache_dtype {name!r} is unknown; allowed: {', '.join(DTYPE_BYTES)}")


def kv_heads_per_rank(shape: ModelShape, tp_size: int) -> int:
    """configs/model_config.py get_num_kv_heads: max(1, total // tp) -- fewer heads than ranks are
    replicated, one per rank."""
    return max(1, shape.num_kv_heads // max(int(tp_size), 1))


def kv_bytes_per_token(shape: ModelShape, kv_cache_dtype: str | None, tp_size: int) -> int:
    """KV bytes one token costs on one TP rank (model_executor/model_runner_kv_cache_mixin.py
    get_cell_size_per_token in 0.5.9-0.5.10; model_executor/pool_configurator.py
    DefaultPoolConfigurator._compute_cell_size from 0.5.11).

    MLA: (kv_lora_rank + qk_rope_head_dim) * layers * dtype -- the latent is NOT split across TP
    ranks, every rank holds all of it. GQA: kv_heads_per_rank * (head_dim + v_head_dim) * layers * dtype.
    """
    size = dtype_bytes(kv_cache_dtype)
    if shape.attention == "mla":
        return (shape.kv_lora_rank + shape.qk_rope_head_dim) * shape.layers * size
    return kv_heads_per_rank(shape, tp_size) * (shape.head_dim + shape.v_head_dim) * shape.layers * size


def draft_kv_bytes_per_token(draft: ModelShape, kv_cache_dtype: str | None, tp_size: int) -> int:
    """KV bytes per token of the draft model's own pool (its config, its KV layers, same dtype and TP):
    what its HiCache side pool pins per host slot."""
    return kv_bytes_per_token(replace(draft, layers=draft.draft_layers), kv_cache_dtype, tp_size)


def charged_bytes_per_token(version: str, cell: int, target_layers: int, draft_layers: int) -> int:
    """Bytes per token the KV budget is divided by when an EAGLE-family draft has its own pool.

    0.5.14-0.5.17: int(cell * (1 + draft/target)); 0.5.18+: cell + int(cell * draft/target)
    (model_executor/pool_configurator.py DefaultPoolConfigurator.__init__, "assumes the draft shares
    the target's per-layer KV size"). Before 0.5.14 the draft's KV is not charged: it is allocated
    from the (1 - mem_fraction_static) headroom.
    """
    if draft_layers <= 0 or target_layers <= 0 or not at_least(version, "0.5.14"):
        return cell
    if at_least(version, "0.5.18"):
        return cell + int(cell * draft_layers / target_layers)
    return int(cell * (1 + draft_layers / target_layers))


# --- device pool ----------------------------------------------------------------------------

def device_kv_tokens(gpu_memory_bytes: int, weight_bytes_per_gpu: int, mem_fraction_static: float,
                     bytes_per_token: int, *, gpu_reserved_bytes: int = DEFAULT_GPU_RESERVED_BYTES,
                     reserved_after_load_bytes: int = 0, page_size: int = 1,
                     max_total_tokens: int | None = None) -> int:
    """Device KV pool of one rank, in tokens: SGLang's profile step.

    pre   = free GPU memory before the weights load (total - gpu_reserved_bytes)
    rest  = (pre - weights) - pre * (1 - mem_fraction_static) - reserved_after_load_bytes
    tokens = rest // bytes_per_token, capped by --max-total-tokens, rounded down to the page size.
    (model_executor/model_runner_kv_cache_mixin.py profile_max_num_token in 0.5.9-0.5.10, then
    _profile_available_bytes + pool_configurator.py calculate_pool_sizes; _profile_available_bytes
    moves to mem_cache/kv_cache_configurator.py in 0.5.16). The (1 - mem_fraction_static) share of
    ``pre`` is what CUDA graphs, activations and (before 0.5.14) the draft model live in. The
    post-capture re-sizing of 0.5.20+ (model_runner_components/kv_pool_runtime.py) is not modeled:
    it is off unless SGLANG_ENABLE_POST_CAPTURE_KV_SIZING=1, and never used for MLA.
    """
    pre = gpu_memory_bytes - gpu_reserved_bytes
    rest = (pre - weight_bytes_per_gpu) - pre * (1.0 - mem_fraction_static) - reserved_after_load_bytes
    if rest <= 0 or bytes_per_token <= 0:
        return 0
    tokens = int(rest) // int(bytes_per_token)
    if max_total_tokens:
        tokens = min(tokens, int(max_total_tokens))
    page = max(int(page_size), 1)
    return tokens // page * page


# --- host pool ------------------------------------------------------------------------------

def default_hicache_ratio(version: str, host_memory_mode: str = "cache") -> float:
    """--hicache-ratio when not given: 2.0 (the flag default up to 0.5.17, server_args.py
    _handle_hicache_ratio_default in 0.5.18); 1.2 for --hicache-host-memory-mode buffer_only
    (0.5.19+, arg_groups/hicache_hook.py handle_hicache_ratio_default)."""
    if at_least(version, "0.5.19") and host_memory_mode == "buffer_only":
        return 1.2
    return 2.0


def auto_sizing(version: str, ratio: float | None, size_gb: int, fraction: float | None) -> bool:
    """0.5.21+: neither --hicache-ratio nor --hicache-size -> the default ratio is reduced until the
    pools fit --hicache-host-memory-fraction (default 0.8) of the host (arg_groups/hicache_hook.py)."""
    return at_least(version, "0.5.21") and ratio is None and not size_gb and fraction is not None


def auto_hicache_ratio(budget_bytes: int, device_bytes: int, default_ratio: float) -> float:
    """mem_cache/hicache_auto_size.py auto_size_hicache: min(default, budget * 0.95 / device bytes),
    where budget = rank budget * fraction and device bytes are the target plus draft device pools."""
    if device_bytes <= 0:
        return default_ratio
    return min(default_ratio, budget_bytes * (1 - AUTO_SIZE_SLACK_FRACTION) / device_bytes)


def host_pool_tokens(device_tokens: int, bytes_per_token: int, ratio: float, size_gb: int = 0,
                     page_size: int = 1) -> int:
    """Host pool of one rank (mem_cache/pool_host/base.py HostKVCache.__init__; memory_pool_host.py
    before 0.5.14): --hicache-size GB per rank -> int(size * 1e9 // bytes_per_token), else
    int(device_tokens * ratio); then one padding page: (tokens // page + 1) * page."""
    tokens = int(size_gb * 1e9 // bytes_per_token) if size_gb and size_gb > 0 else int(device_tokens * ratio)
    page = max(int(page_size), 1)
    return (tokens // page + 1) * page


def draft_host_pool_tokens(version: str, host_tokens: int, page_size: int = 1) -> int:
    """Slots of the EAGLE draft's HiCache side pool: one per target host slot.

    < 0.5.11: none (no draft host pool). 0.5.11-0.5.22: built with ratio = target host size / draft
    device size, which adds the padding page again (managers/scheduler.py
    _maybe_register_hicache_draft, then mem_cache/kv_cache_builder.py, then
    hybrid_cache/hybrid_pool_assembler.py). 0.5.23: exactly the target's slots (host_token_capacity).
    """
    if not at_least(version, "0.5.11"):
        return 0
    if at_least(version, "0.5.23"):
        return host_tokens
    page = max(int(page_size), 1)
    return (host_tokens // page + 1) * page


def rank_host_budget(version: str, available_bytes: int, ranks_per_host: int,
                     cgroup_headroom_bytes: int | None = None) -> int:
    """What one rank's "Not enough host memory" check allows at one reading of MemAvailable.

    <= 0.5.18: available - 10 GiB, each rank alone (HostKVCache.__init__).
    0.5.19+:  (available - 10 GiB) // ranks_per_host (pool_host/base.py host_memory_budget_bytes).
    0.5.21+:  available = min(MemAvailable, cgroup memory.max/high headroom)
              (mem_cache/host_memory.py available_host_memory_bytes).
    """
    available = int(available_bytes)
    if at_least(version, "0.5.21") and cgroup_headroom_bytes is not None:
        available = min(available, int(cgroup_headroom_bytes))
    free = available - HOST_RESERVE_BYTES
    if at_least(version, "0.5.19"):
        return free // max(int(ranks_per_host), 1)
    return free


def not_enough_host_memory(requested_bytes: int, available_bytes: int) -> str:
    """SGLang's own message (pool_host/base.py HostKVCache)."""
    return (f"Not enough host memory available. Requesting {requested_bytes / 1e9:.2f} GB but only have "
            f"{available_bytes / 1e9:.2f} GB free. Please reduce the size of the hierarchical cache.")


HOST_LARGER_THAN_DEVICE = "The host memory should be larger than the device memory with the current protocol"


@dataclass(frozen=True)
class HostCheck:
    """The verdict on one host's pinned HiCache pools.

    verdict: "ok"; "may_fail" (0.5.19+: fits the split, but a rank that reads MemAvailable after
    peers pinned theirs is charged for them again -- sglang issue #38156 -- so the start can fail
    after the model load); "refused" (SGLang raises on every start); "overcommit" (<= 0.5.18: each
    rank checks alone, SGLang starts, and the ranks together pin more than the host has).
    """

    verdict: str
    rule: str                       # which version rule applied, in words
    per_rank_budget_bytes: int      # what one rank is allowed at a reading before any pool is pinned
    safe_per_rank_bytes: int        # largest target pool per rank that passes in any order
    fit_per_rank_bytes: int         # largest target pool per rank SGLang accepts at a joint reading
    effective_available_bytes: int  # MemAvailable (bounded by the cgroup on 0.5.21+)


def _limit(total: float, ranks: int, draft_share: float, split: bool) -> int:
    """Largest target pool T per rank (draft pool = T * draft_share) that passes every check."""
    if total <= 0:
        return 0
    if not split:
        return int(total / (ranks * (1 + draft_share)))
    # Worst order: the last rank reads after all peers pinned target and draft pools.
    #   target check: N*T + (N-1)*T*(1+f) <= total;  draft check: N*T + (2N-1)*T*f <= total
    return int(total / max(ranks + (ranks - 1) * (1 + draft_share), ranks + (2 * ranks - 1) * draft_share))


def host_memory_check(version: str, target_bytes: int, draft_bytes: int, ranks_per_host: int,
                      available_bytes: int, cgroup_headroom_bytes: int | None = None,
                      auto_sized: bool = False) -> HostCheck:
    """Per-version verdict on the host pools of all ranks of one host (target pool T and draft side
    pool D per rank, each checked separately by SGLang, target first)."""
    ranks = max(int(ranks_per_host), 1)
    available = int(available_bytes)
    if at_least(version, "0.5.21") and cgroup_headroom_bytes is not None:
        available = min(available, int(cgroup_headroom_bytes))
    total = available - HOST_RESERVE_BYTES
    share = draft_bytes / target_bytes if target_bytes else 0.0
    split = at_least(version, "0.5.19")
    budget = rank_host_budget(version, available_bytes, ranks, cgroup_headroom_bytes)
    fit = int(budget / (1 + share)) if split else int(total / (ranks * (1 + share)))
    safe = _limit(total, ranks, share, split)
    if not split:
        rule = ("sglang <= 0.5.18: each rank checks its pool alone against MemAvailable - 10 GiB, so the "
                "ranks of a host can overcommit it together")
        if target_bytes > total or draft_bytes > total - target_bytes:
            verdict = "refused"
        elif ranks * (target_bytes + draft_bytes) > total:
            verdict = "overcommit"
        else:
            verdict = "ok"
        return HostCheck(verdict, rule, max(total, 0), safe, fit, available)
    rule = ("sglang 0.5.19+: each rank may use (MemAvailable - 10 GiB) // ranks-per-host, read when it "
            "reaches its pool" + (", bounded by the cgroup limit" if at_least(version, "0.5.21") else ""))
    if auto_sized:
        # One snapshot per rank, booked by every pool (pool_host/base.py host_memory_budget_scope).
        rule += "; auto-sized pools are booked against one snapshot"
        verdict = "ok" if target_bytes > 0 else "refused"
        return HostCheck(verdict, rule, budget, budget, budget, available)
    if target_bytes > budget or draft_bytes > (total - target_bytes) // ranks:
        verdict = "refused"
    elif target_bytes > safe:
        verdict = "may_fail"
    else:
        verdict = "ok"
    return HostCheck(verdict, rule, budget, safe, fit, available)


# --- concurrency ----------------------------------------------------------------------------

def max_concurrent_requests(device_tokens: int, avg_seq_len: int, max_running_requests: int | None = None,
                            speculative: bool = False) -> int:
    """Requests that can decode at once: every running token's KV must be in the device pool, so
    device_tokens // avg_seq_len, capped by --max-running-requests (48 by default under
    speculative decoding). HiCache does not raise this: its host pool only holds prefix cache."""
    by_tokens = int(device_tokens) // max(int(avg_seq_len), 1)
    cap = max_running_requests or (SPECULATIVE_MAX_RUNNING_REQUESTS if speculative else None)
    return min(by_tokens, int(cap)) if cap else by_tokens


# --- plan inputs ----------------------------------------------------------------------------

@dataclass
class PlanInputs:
    """Everything one host's plan needs. Byte fields are bytes; see ``plan_inputs`` for units."""

    version: str
    model_config: dict[str, Any]
    tp_size: int = 1
    mem_fraction_static: float | None = None
    gpu_memory_bytes: int = 0
    weight_bytes_per_gpu: int = 0
    host_mem_available_bytes: int = 0
    kv_cache_dtype: str = "auto"
    nnodes: int = 1
    gpu_reserved_bytes: int = DEFAULT_GPU_RESERVED_BYTES
    speculative_algorithm: str | None = None
    draft_config: dict[str, Any] | None = None
    draft_weight_bytes_per_gpu: int = 0
    hicache_enabled: bool = False
    hicache_ratio: float | None = None
    hicache_size_gb: int = 0
    hicache_host_memory_mode: str = "cache"
    hicache_host_memory_fraction: float | None = 0.8
    cgroup_headroom_bytes: int | None = None
    page_size: int = 1
    avg_seq_len: int = 8192
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    names: dict[str, str] = field(default_factory=dict)
    what_if: bool = True


# The variable each input comes from, for messages; ``names`` (keyed by these) renames them, e.g.
# {"sglang_hicache_size": "hicache_size (overrides sglang_hicache_size)"} as sglang_args.resolve does.
FIELD_VARS = {
    "version": "sglang_version",
    "model_config": "sglang_model_path",
    "tp_size": "sglang_tp_size",
    "mem_fraction_static": "sglang_mem_fraction_static",
    "kv_cache_dtype": "sglang_kv_cache_dtype",
    "gpu_memory_bytes": "sglang_gpu_memory_mib",
    "weight_bytes_per_gpu": "sglang_model_weight_gb",
    "host_mem_available_bytes": "sglang_host_memory_available_gb",
    "gpu_reserved_bytes": "gpu_reserved_bytes",
    "speculative_algorithm": "sglang_speculative_algorithm",
    "draft_config": "sglang_speculative_draft_model_path",
    "draft_weight_bytes_per_gpu": "sglang_draft_weight_gb",
    "hicache_enabled": "sglang_hicache_enabled",
    "hicache_ratio": "sglang_hicache_ratio",
    "hicache_size_gb": "sglang_hicache_size",
    "hicache_host_memory_mode": "sglang_extra_args['hicache-host-memory-mode']",
    "hicache_host_memory_fraction": "sglang_extra_args['hicache-host-memory-fraction']",
    "cgroup_headroom_bytes": "the service's cgroup memory limit",
    "page_size": "sglang_extra_args['page-size']",
    "avg_seq_len": "sglang_plan_avg_seq_len",
    "max_running_requests": "sglang_extra_args['max-running-requests']",
    "max_total_tokens": "sglang_extra_args['max-total-tokens']",
}

_UNITS = {"_gb": GB, "_gib": GIB, "_mib": MIB}


def _typed(name: str, kind: str, value: Any) -> Any:
    if types.is_unset(value):
        return None
    try:
        if kind == "bool":
            return types.to_bool(value)
        if kind in ("int", "float"):
            number = types.to_float(value)
            return int(number) if kind == "int" else number
    except ValueError as exc:
        raise CapacityError(f"{name}: {exc}") from None
    if kind == "dict":
        if not isinstance(value, dict):
            raise CapacityError(f"{name}: must be a mapping (a parsed config.json)")
        return value
    return str(value)


def _kind(annotation: Any) -> str:
    text = str(annotation)
    for kind in ("bool", "int", "float", "dict"):
        if text.startswith(kind):
            return kind
    return "str"


def _typed_key(kinds: dict[str, str], name: str, value: Any) -> tuple[str, Any]:
    """(field, typed value) for one plan_inputs key, unit suffixes and totals included."""
    if name in kinds:
        return name, _typed(name, kinds[name], value)
    if name in ("weight_bytes_total", "draft_weight_bytes_total"):
        return name, _typed(name, "float", value)
    for suffix, unit in _UNITS.items():
        target = name[: -len(suffix)] + "_bytes" if name.endswith(suffix) else ""
        if kinds.get(target) == "int":
            number = _typed(name, "float", value)
            return target, None if number is None else int(number * unit)
    raise CapacityError(f"{name}: is not a plan input; known: {', '.join(sorted(kinds))}")


def plan_inputs(values: dict[str, Any]) -> PlanInputs:
    """Build PlanInputs from plain values (Ansible variables, JSON), typing each one.

    Keys are the field names. A byte field may instead be given with a unit suffix on its stem:
    ``gpu_memory_mib: 97887``, ``host_mem_available_gb: 449``, ``gpu_reserved_gib: 1.5``.
    ``weight_bytes_total`` / ``draft_weight_bytes_total`` (sum of the safetensors files) are divided
    by tp_size. Unknown keys are refused, so a misspelt input cannot silently fall back to a default.
    A null value means the field's default.
    """
    kinds = {f.name: _kind(f.type) for f in fields(PlanInputs)}
    given = dict(_typed_key(kinds, str(key), value) for key, value in values.items())
    for key in ("version", "model_config"):
        if given.get(key) is None:
            raise CapacityError(f"{key}: is required")
    tp = max(int(given.get("tp_size") or 1), 1)
    for key in ("weight_bytes_total", "draft_weight_bytes_total"):
        total = given.pop(key, None)
        if total is not None:
            given[key.replace("_total", "_per_gpu")] = int(total // tp)
    for f in fields(PlanInputs):
        if f.name in given and given[f.name] is None and f.default is not MISSING:
            given[f.name] = f.default
        if f.name in given and given[f.name] is None and f.default_factory is not MISSING:
            given[f.name] = f.default_factory()
    return PlanInputs(**given)


# Resolved SGLang argument -> PlanInputs field (the value passes through resolve once, then here).
_ARG_FIELDS = {
    "--tp-size": "tp_size", "--tensor-parallel-size": "tp_size", "--nnodes": "nnodes",
    "--mem-fraction-static": "mem_fraction_static", "--kv-cache-dtype": "kv_cache_dtype",
    "--hicache-ratio": "hicache_ratio", "--hicache-size": "hicache_size_gb",
    "--hicache-host-memory-mode": "hicache_host_memory_mode",
    "--hicache-host-memory-fraction": "hicache_host_memory_fraction",
    "--page-size": "page_size", "--speculative-algorithm": "speculative_algorithm",
    "--max-running-requests": "max_running_requests", "--max-total-tokens": "max_total_tokens",
}


def _human_int(text: str) -> str:
    """--max-total-tokens 128k (human_readable_int in 0.5.12+) -> '128000'."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*$", str(text))
    if not match:
        return str(text)
    scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}[match.group(2).lower()]
    return str(int(float(match.group(1)) * scale))


def args_settings(args: list[list[str]]) -> dict[str, Any]:
    """The plan inputs found in a resolved argument list (``sglang_args.resolve(...)["args"]``)."""
    settings: dict[str, Any] = {}
    for group in args:
        if not group:
            continue
        flag, values = str(group[0]), [str(v) for v in group[1:]]
        if flag in ("--enable-hierarchical-cache", "--enable-hicache"):
            settings["hicache_enabled"] = True
        elif flag in _ARG_FIELDS and values:
            name = _ARG_FIELDS[flag]
            settings[name] = _human_int(values[0]) if name in ("max_total_tokens",) else values[0]
    return settings


# --- the plan -------------------------------------------------------------------------------

def _gb(value: float) -> str:
    return f"{value / 1e9:,.2f} GB"


class _Problems:
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def var(self, key: str) -> str:
        var = FIELD_VARS.get(key, key)
        return self.names.get(var, var)

    def error(self, key: str, message: str) -> None:
        self.errors.append(f"{self.var(key)}: {message}")

    def warn(self, key: str, message: str) -> None:
        self.warnings.append(f"{self.var(key)}: {message}")


def _check_inputs(i: PlanInputs, p: _Problems) -> None:
    if i.tp_size < 1:
        p.error("tp_size", f"{i.tp_size} is out of range; allowed: an integer >= 1")
    if i.mem_fraction_static is None:
        p.error("mem_fraction_static", "is not set; the capacity plan needs it (SGLang picks one from the GPU "
                "and the model at start, about 0.83 on 96 GB GPUs); allowed: a number between 0 and 1")
    elif not 0 < i.mem_fraction_static < 1:
        p.error("mem_fraction_static", f"{i.mem_fraction_static} is out of range; allowed: between 0 and 1")
    if i.gpu_memory_bytes <= 0:
        p.error("gpu_memory_bytes", "is not known; allowed: the memory of one GPU (nvidia-smi memory.total)")
    if i.weight_bytes_per_gpu <= 0:
        p.error("weight_bytes_per_gpu", "is not known; allowed: the sum of the model's safetensors files / "
                "tp_size, or an inventory value")
    if i.avg_seq_len < 1:
        p.error("avg_seq_len", f"{i.avg_seq_len} is out of range; allowed: tokens per request (prompt + "
                "output), >= 1")
    if i.page_size < 1:
        p.error("page_size", f"{i.page_size} is out of range; allowed: an integer >= 1")
    if i.hicache_enabled and i.host_mem_available_bytes <= 0:
        p.error("host_mem_available_bytes", "is not known; allowed: the host's MemAvailable (/proc/meminfo)")
    if i.hicache_enabled and i.hicache_size_gb < 0:
        p.error("hicache_size_gb", f"{i.hicache_size_gb} is out of range; allowed: GB per TP rank, >= 0")
    if i.nnodes < 1 or i.tp_size % max(i.nnodes, 1):
        p.error("tp_size", f"{i.tp_size} ranks cannot be spread evenly over {i.nnodes} nodes")


def _ranks_per_host(i: PlanInputs) -> int:
    return max(i.tp_size // max(i.nnodes, 1), 1)


def _core(i: PlanInputs, p: _Problems) -> dict[str, Any] | None:
    """The plan without what-ifs; None when an input error makes numbers meaningless."""
    try:
        shape = model_shape(i.model_config)
        cell = kv_bytes_per_token(shape, i.kv_cache_dtype, i.tp_size)
    except CapacityError as exc:
        key = "kv_cache_dtype" if "kv_cache_dtype" in str(exc) else "model_config"
        p.error(key, str(exc))
        return None
    if shape.hybrid:
        p.warn("model_config", f"{shape.architecture} has sliding-window or linear-attention layers; the plan "
               "counts every layer as full attention, so its device token count is a lower bound")
    if shape.indexer:
        p.warn("model_config", f"{shape.architecture} keeps a sparse-attention indexer cache next to its KV; the "
               "plan leaves it out, so its device and host token counts are upper bounds")
    algorithm = str(i.speculative_algorithm or "").upper() or None
    draft: ModelShape | None = None
    draft_cell = 0
    if algorithm in DRAFT_KV_ALGORITHMS:
        if i.draft_config:
            try:
                draft = model_shape(i.draft_config)
                draft_cell = draft_kv_bytes_per_token(draft, i.kv_cache_dtype, i.tp_size)
            except CapacityError as exc:
                p.error("draft_config", str(exc))
                return None
        elif algorithm != "NEXTN":
            p.warn("draft_config", f"no draft config.json given; the plan leaves out the {algorithm} draft's KV")
    draft_layers = draft.draft_layers if draft else 0
    if draft and not i.draft_weight_bytes_per_gpu and at_least(i.version, "0.5.14"):
        p.warn("draft_weight_bytes_per_gpu", f"is not known; sglang {i.version} loads the draft before it sizes "
               "the KV pool, so its weights (sum of the draft's safetensors / tp_size) come off the device tokens")
    charged = charged_bytes_per_token(i.version, cell, shape.layers, draft_layers)
    # 0.5.14+ loads the draft before the KV budget is measured ("draft weights are now counted").
    draft_weights_first = at_least(i.version, "0.5.14")
    weights = i.weight_bytes_per_gpu + (i.draft_weight_bytes_per_gpu if draft_weights_first else 0)
    mm_reserve = MULTIMODAL_RESERVE_BYTES if shape.multimodal and at_least(i.version, "0.5.18") else 0
    mfs = float(i.mem_fraction_static or 0.0)
    pre = i.gpu_memory_bytes - i.gpu_reserved_bytes
    slack = int(pre * (1 - mfs))
    tokens = device_kv_tokens(i.gpu_memory_bytes, weights, mfs, charged, gpu_reserved_bytes=i.gpu_reserved_bytes,
                              reserved_after_load_bytes=mm_reserve, page_size=i.page_size,
                              max_total_tokens=i.max_total_tokens)
    if tokens <= 0:
        need = 1 - (pre - weights) / pre if pre > 0 else 1.0
        p.error("mem_fraction_static", f"{mfs:g} leaves no GPU memory for the KV cache after {_gb(weights)} of "
                f"weights per GPU (SGLang fails with 'Not enough memory' after the load); allowed: above {need:.3f}")
        return None
    if not draft_weights_first and draft and i.draft_weight_bytes_per_gpu + tokens * draft_cell > slack:
        p.warn("mem_fraction_static", f"sglang {i.version} allocates the draft model "
               f"({_gb(i.draft_weight_bytes_per_gpu)} of weights, {_gb(tokens * draft_cell)} of KV per GPU) from the "
               f"{_gb(slack)} that mem_fraction_static leaves free, which also holds CUDA graphs and activations")
    speculative = algorithm in SPECULATIVE_ALGORITHMS
    concurrency = max_concurrent_requests(tokens, i.avg_seq_len, i.max_running_requests, speculative)
    cap = i.max_running_requests or (SPECULATIVE_MAX_RUNNING_REQUESTS if speculative else None)
    result: dict[str, Any] = {
        "kv_bytes_per_token": cell,
        "device_kv_tokens": tokens,
        "max_concurrent_requests": concurrency,
        "model": {"architecture": shape.architecture, "model_type": shape.model_type, "attention": shape.attention,
                  "layers": shape.layers, "multimodal": shape.multimodal,
                  **{k: getattr(shape, k) for k in SHAPE_KEYS[2:] if getattr(shape, k)},
                  "kv_heads_per_rank": kv_heads_per_rank(shape, i.tp_size) if shape.attention == "gqa" else None},
        "device": {
            "gpu_memory_bytes": i.gpu_memory_bytes, "gpu_reserved_bytes": i.gpu_reserved_bytes,
            "pre_load_free_bytes": pre, "weight_bytes_per_gpu": i.weight_bytes_per_gpu,
            "draft_weight_bytes_per_gpu": i.draft_weight_bytes_per_gpu,
            "weights_counted_before_kv_bytes": weights, "free_after_weights_bytes": pre - weights,
            "runtime_reserve_bytes": slack, "multimodal_reserve_bytes": mm_reserve,
            "kv_budget_bytes": max(pre - weights - slack - mm_reserve, 0),
            "charged_bytes_per_token": charged, "draft_kv_bytes_per_token": draft_cell,
            "draft_layers": draft_layers, "kv_pool_bytes": tokens * cell,
            "draft_kv_pool_bytes": tokens * draft_cell,
        },
        "concurrency": {"avg_seq_len": i.avg_seq_len, "by_device_tokens": tokens // max(i.avg_seq_len, 1),
                        "max_running_requests": cap,
                        "cap_reason": ("--max-running-requests" if i.max_running_requests else
                                       "speculative decoding defaults to 48" if speculative else None)},
    }
    result.update(_host(i, p, tokens, cell, draft_cell, shape.attention == "mla"))
    return result


def _host(i: PlanInputs, p: _Problems, device_tokens: int, cell: int, draft_cell: int, mla: bool) -> dict[str, Any]:
    ranks = _ranks_per_host(i)
    empty = {"host_kv_tokens_per_rank": 0, "host_kv_bytes_per_rank": 0, "host_kv_bytes_total": 0,
             "host": {"enabled": False, "ranks_per_host": ranks}}
    if not i.hicache_enabled:
        return empty
    version = i.version
    default = default_hicache_ratio(version, i.hicache_host_memory_mode)
    fraction = i.hicache_host_memory_fraction if at_least(version, "0.5.21") else None
    auto = auto_sizing(version, i.hicache_ratio, i.hicache_size_gb, fraction)
    budget = rank_host_budget(version, i.host_mem_available_bytes, ranks, i.cgroup_headroom_bytes)
    ratio = i.hicache_ratio if i.hicache_ratio is not None else default
    mode = "size" if i.hicache_size_gb > 0 else "auto" if auto else "ratio"
    if auto:
        ratio = auto_hicache_ratio(int(budget * float(fraction or 0)), device_tokens * (cell + draft_cell), default)
        if ratio <= 0:
            p.error("host_mem_available_bytes", "No host memory is left for HiCache after the 10 GiB reserve "
                    "(SGLang's auto-sizing raises); allowed: more free host memory, or hicache disabled")
            return empty
    tokens = host_pool_tokens(device_tokens, cell, ratio, i.hicache_size_gb, i.page_size)
    draft_tokens = draft_host_pool_tokens(version, tokens, i.page_size) if draft_cell else 0
    target_bytes, draft_bytes = tokens * cell, draft_tokens * draft_cell
    per_rank = target_bytes + draft_bytes
    check = host_memory_check(version, target_bytes, draft_bytes, ranks, i.host_mem_available_bytes,
                              i.cgroup_headroom_bytes, auto)
    key = "hicache_size_gb" if mode == "size" else "hicache_ratio"
    if tokens <= device_tokens:
        if not at_least(version, "0.5.15"):
            p.error(key, f"the host pool ({tokens:,} tokens) is not larger than the device pool ({device_tokens:,} "
                    f"tokens); sglang {version} fails with AssertionError '{HOST_LARGER_THAN_DEVICE}'; allowed: a "
                    "host pool larger than the device pool")
        else:
            p.warn(key, f"the host pool ({tokens:,} tokens) is not larger than the device pool ({device_tokens:,} "
                   "tokens): HiCache only duplicates what is on the GPU")
    _explain_host(i, p, _Pools(key, mode, ratio, device_tokens, cell, target_bytes, draft_bytes, ranks, mla), check)
    return {
        "host_kv_tokens_per_rank": tokens,
        "host_kv_bytes_per_rank": per_rank,
        "host_kv_bytes_total": per_rank * ranks,
        "host": {
            "enabled": True, "mode": mode, "ratio": round(ratio, 4) if mode != "size" else None,
            "size_gb_per_rank": i.hicache_size_gb or None, "ranks_per_host": ranks,
            "target_bytes_per_rank": target_bytes, "draft_tokens_per_rank": draft_tokens,
            "draft_bytes_per_rank": draft_bytes, "reserve_bytes": HOST_RESERVE_BYTES,
            "effective_available_bytes": check.effective_available_bytes,
            "headroom_bytes": check.effective_available_bytes - HOST_RESERVE_BYTES - per_rank * ranks,
            "check": {"verdict": check.verdict, "rule": check.rule,
                      "per_rank_budget_bytes": check.per_rank_budget_bytes,
                      "safe_target_bytes_per_rank": check.safe_per_rank_bytes,
                      "fit_target_bytes_per_rank": check.fit_per_rank_bytes},
        },
    }


@dataclass(frozen=True)
class _Pools:
    key: str            # the input the user sized the pool with
    mode: str           # size | ratio | auto
    ratio: float
    device_tokens: int
    cell: int
    target_bytes: int   # per rank
    draft_bytes: int    # per rank
    ranks: int
    mla: bool


def _explain_host(i: PlanInputs, p: _Problems, pools: _Pools, check: HostCheck) -> None:
    """Turn a host-memory verdict into a message a person understands."""
    if check.verdict == "ok":
        return
    version, ranks = i.version, pools.ranks
    per_rank = pools.target_bytes + pools.draft_bytes
    if pools.mode == "size":
        what = f"{i.hicache_size_gb} is GB per TP rank, not a total"
    else:
        ratio = round(pools.ratio, 3)
        what = (f"ratio {ratio} makes a host pool of {_gb(pools.target_bytes)} per TP rank "
                f"({ratio} x the GPU KV pool of {pools.device_tokens:,} tokens)")
    split = (f"MLA's latent KV ({pools.cell:,} bytes per token) is not split across TP ranks" if pools.mla else
             f"each rank keeps its own KV pool ({pools.cell:,} bytes per token on each rank)")
    draft = f" + {_gb(pools.draft_bytes)} EAGLE draft side pool" if pools.draft_bytes else ""
    available = check.effective_available_bytes
    host = (f"the host has {_gb(i.host_mem_available_bytes)} of RAM available"
            + (f" ({_gb(available)} within the cgroup limit)" if available != i.host_mem_available_bytes else "")
            + f", {_gb(available - HOST_RESERVE_BYTES)} after SGLang's 10 GiB reserve")
    pinned = (f"{split}, so each of the {ranks} ranks on this host pins its own pool: {ranks} ranks x "
              f"{_gb(per_rank)} ({_gb(pools.target_bytes)} KV{draft}) = {_gb(per_rank * ranks)} of pinned host RAM")

    def allowed(limit: int) -> str:
        if pools.mode == "size":
            return f"at most {int(limit // GB)} GB per rank"
        return f"a ratio of at most {math.floor(limit / max(pools.device_tokens * pools.cell, 1) * 10) / 10}"

    safe = allowed(check.safe_per_rank_bytes)
    if check.verdict == "overcommit":
        p.error(pools.key, f"{what}. {pinned}, but {host}. sglang {version} checks each rank alone against the "
                "whole host: ranks that check before the others have pinned pass, so either the host runs out of "
                f"memory as the pools fill or the later ranks fail, after the model load; allowed: {safe}")
    elif check.verdict == "refused":
        fit = allowed(check.fit_per_rank_bytes)
        rule = (f"gives each rank (available - 10 GiB) // {ranks} = {_gb(check.per_rank_budget_bytes)}"
                if at_least(version, "0.5.19") else "checks each rank against the whole host")
        upto = fit.replace("at most ", "", 1)
        extra = (f", which passes in any start order (up to {upto} passes only if every rank reads free memory "
                 "before any has pinned its pool, sglang issue #38156)") if safe != fit else ""
        p.error(pools.key, f"{what}. {pinned}, but {host}. sglang {version} {rule} and raises 'Not enough host "
                f"memory available' on every rank, after the model load; allowed: {safe}{extra}")
    else:
        p.warn(pools.key, f"{what}: {ranks} ranks x {_gb(per_rank)} = {_gb(per_rank * ranks)} fits the "
               f"{_gb(check.per_rank_budget_bytes)} per rank that sglang {version} allows, but each rank reads "
               "MemAvailable when it reaches its pool, and a rank that comes after peers have pinned theirs is "
               "charged for them again (sglang issue #38156): the start can fail intermittently after the "
               f"model load; {safe} passes in any order")


def plan(inputs: PlanInputs) -> dict[str, Any]:
    """The capacity plan of one host: the keys plan.yml's JSON promises, plus details and what-ifs."""
    p = _Problems(dict(inputs.names or {}))
    _check_inputs(inputs, p)
    core = _core(inputs, p) if not p.errors else None
    result: dict[str, Any] = {
        "ok": False, "errors": p.errors, "warnings": p.warnings,
        "kv_bytes_per_token": 0, "device_kv_tokens": 0, "host_kv_tokens_per_rank": 0, "host_kv_bytes_per_rank": 0,
        "host_kv_bytes_total": 0, "host_mem_available_bytes": int(inputs.host_mem_available_bytes),
        "max_concurrent_requests": 0, "version": inputs.version,
    }
    if core is not None:
        result.update(core)
        if inputs.what_if:
            result["what_if"] = _what_if(inputs, core)
    result["ok"] = not p.errors
    return result


def _variant(inputs: PlanInputs, **changes: Any) -> dict[str, Any]:
    quiet = replace(inputs, what_if=False, **changes)
    p = _Problems({})
    core = _core(quiet, p) if not p.errors else None
    if core is None:
        return {"ok": False}
    host = core.get("host", {})
    return {"ok": not p.errors, "device_kv_tokens": core["device_kv_tokens"],
            "max_concurrent_requests": core["max_concurrent_requests"],
            "host_kv_tokens_per_rank": core["host_kv_tokens_per_rank"],
            "host_kv_bytes_total": core["host_kv_bytes_total"],
            "host_check": host.get("check", {}).get("verdict")}


def _what_if(inputs: PlanInputs, core: dict[str, Any]) -> dict[str, Any]:
    """What another KV dtype or mem fraction would give, and what HiCache adds (and does not)."""
    mfs = float(inputs.mem_fraction_static or 0)
    out: dict[str, Any] = {}
    if dtype_bytes(inputs.kv_cache_dtype) != 1:
        out["kv_cache_dtype=fp8_e4m3"] = _variant(inputs, kv_cache_dtype="fp8_e4m3")
    for delta in (-0.05, 0.05):
        value = round(mfs + delta, 4)
        if 0 < value < 1:
            out[f"mem_fraction_static={value:g}"] = _variant(inputs, mem_fraction_static=value)
    host_tokens = core["host_kv_tokens_per_rank"]
    avg = max(inputs.avg_seq_len, 1)
    out["hicache"] = {
        "adds": ("prefix-cache capacity in host RAM: evicted prefixes stay in the host pool and are copied "
                 "back instead of recomputed"),
        "prefix_cache_tokens_device": core["device_kv_tokens"],
        "prefix_cache_tokens_host": host_tokens,
        "prefix_cache_sequences_host": host_tokens // avg,
        "does_not_add": "concurrency: every running request's KV must be on the GPU",
        "max_concurrent_requests_with": core["max_concurrent_requests"],
        "max_concurrent_requests_without": core["max_concurrent_requests"],
    }
    return out
