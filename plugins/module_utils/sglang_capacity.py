# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Capacity formulas: KV bytes per token, device KV tokens, the HiCache host pool and its host-memory check.

This is the one place that does capacity math (``sglang_plan`` applies it to one host). Every
formula mirrors the SGLang source it names (read from the real wheels 0.5.9 ... 0.5.23; paths are
inside the ``sglang`` package). Plain standard-library Python that also runs on Python 3.9+:
``molecule/resources/simulator/build_wheel.py`` copies this file (and sglang_types.py) into the
simulator wheel, so the simulator refuses exactly what the planner refuses.

Units: bytes and tokens are ints. ``--hicache-size`` is GB (1e9) per TP rank; SGLang's GPU memory
figures are GiB (``get_available_gpu_memory`` divides by 1 << 30); its host reserve is 10 GiB.

Entry points: ``model_shape``, ``kv_bytes_per_token``, ``device_kv_tokens``, ``host_pool_tokens``,
``host_memory_check``, ``max_concurrent_requests``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .sglang_types import at_least

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


@dataclass(frozen=True)
class DevicePool:
    """The device KV pool of one rank as a version sizes it, and what went into it."""

    tokens: int
    charged_bytes_per_token: int  # what the budget is divided by (the draft's share from 0.5.14)
    weights_bytes: int            # weights counted before the pool (the draft's too from 0.5.14)
    reserve_bytes: int            # a multimodal model's reserve (0.5.18+)


def device_pool(version: str, pre_load_free_bytes: int, weight_bytes: int, draft_weight_bytes: int,
                mem_fraction_static: float, cell: int, target_layers: int, draft_layers: int, multimodal: bool,
                *, page_size: int = 1, max_total_tokens: int | None = None) -> DevicePool:
    """device_kv_tokens with what each version adds: the draft's weights loaded before the pool and its
    share of each token from 0.5.14 (charged_bytes_per_token), the multimodal reserve from 0.5.18. The
    planner sizes the pool with it, and so does the simulator, from its true weights."""
    weights = weight_bytes + (draft_weight_bytes if at_least(version, "0.5.14") else 0)
    charged = charged_bytes_per_token(version, cell, target_layers, draft_layers)
    reserve = MULTIMODAL_RESERVE_BYTES if multimodal and at_least(version, "0.5.18") else 0
    tokens = device_kv_tokens(pre_load_free_bytes, weights, mem_fraction_static, charged, gpu_reserved_bytes=0,
                              reserved_after_load_bytes=reserve, page_size=page_size, max_total_tokens=max_total_tokens)
    return DevicePool(tokens, charged, weights, reserve)


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


def effective_available(version: str, available_bytes: int, cgroup_headroom_bytes: int | None = None) -> int:
    """Host memory SGLang sees as available: MemAvailable, and from 0.5.21 no more than the cgroup's
    memory.max/high headroom (mem_cache/host_memory.py available_host_memory_bytes)."""
    available = int(available_bytes)
    if at_least(version, "0.5.21") and cgroup_headroom_bytes is not None:
        available = min(available, int(cgroup_headroom_bytes))
    return available


def rank_host_budget(version: str, available_bytes: int, ranks_per_host: int,
                     cgroup_headroom_bytes: int | None = None) -> int:
    """What one rank's "Not enough host memory" check allows at one reading of MemAvailable.

    <= 0.5.18: available - 10 GiB, each rank alone (HostKVCache.__init__).
    0.5.19+:  (available - 10 GiB) // ranks_per_host (pool_host/base.py host_memory_budget_bytes).
    0.5.21+:  available = min(MemAvailable, cgroup memory.max/high headroom)
              (mem_cache/host_memory.py available_host_memory_bytes).
    """
    free = effective_available(version, available_bytes, cgroup_headroom_bytes) - HOST_RESERVE_BYTES
    if at_least(version, "0.5.19"):
        return free // max(int(ranks_per_host), 1)
    return free


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
    available = effective_available(version, available_bytes, cgroup_headroom_bytes)
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


@dataclass(frozen=True)
class NumaNode:
    """One NUMA node under SGLang's binding: the local GPUs whose ranks it holds, the HiCache pools they pin there and
    what the node has available."""

    node: int
    gpus: tuple[int, ...]
    need_bytes: int
    available_bytes: int

    @property
    def fits(self) -> bool:
        return self.need_bytes <= self.available_bytes


def numa_node_check(per_rank_bytes: int, ranks_per_host: int, gpu_nodes: list[int | None],
                    nodes_available: dict[str, int]) -> list[NumaNode]:
    """Each NUMA node's HiCache pools under SGLang 0.5.23's binding, which runs rank i (local GPU i) under
    ``numactl --cpunodebind=N --membind=N``, N the node NVML gives for that GPU (srt/utils/numa_utils.py): its pool
    can come from node N only, while SGLang sizes it against the host's MemAvailable (pool_host/base.py). A GPU
    without a node binds nothing and is left out."""
    by_node: dict[int, list[int]] = {}
    for gpu in range(max(int(ranks_per_host), 1)):
        node = gpu_nodes[gpu] if gpu < len(gpu_nodes) else None
        if node is not None and node >= 0:
            by_node.setdefault(int(node), []).append(gpu)
    return [NumaNode(node, tuple(gpus), per_rank_bytes * len(gpus), int(nodes_available.get(str(node), 0)))
            for node, gpus in sorted(by_node.items())]


# --- concurrency ----------------------------------------------------------------------------

def max_concurrent_requests(device_tokens: int, avg_seq_len: int, max_running_requests: int | None = None,
                            speculative: bool = False) -> int:
    """Requests that can decode at once: every running token's KV must be in the device pool, so
    device_tokens // avg_seq_len, capped by --max-running-requests (48 by default under
    speculative decoding). HiCache does not raise this: its host pool only holds prefix cache."""
    by_tokens = int(device_tokens) // max(int(avg_seq_len), 1)
    cap = max_running_requests or (SPECULATIVE_MAX_RUNNING_REQUESTS if speculative else None)
    return min(by_tokens, int(cap)) if cap else by_tokens
