# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capacity plan of one host: the formulas of sglang_capacity applied to its settings and facts.

``plan(PlanInputs)`` gives the device and host KV pools, how many requests decode at once, the
host-memory verdict of the version's HiCache check, and what-ifs. Errors and warnings name the
variable behind each input: ``PlanInputs.sources`` (what sglang_config resolved, e.g.
"hicache_ratio (overrides sglang_hicache_ratio)") on top of the tables' variables (``input_names``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from . import sglang_settings as table
from .sglang_capacity import (
    DEFAULT_GPU_RESERVED_BYTES,
    DRAFT_KV_ALGORITHMS,
    HOST_LARGER_THAN_DEVICE,
    HOST_RESERVE_BYTES,
    SHAPE_KEYS,
    SPECULATIVE_ALGORITHMS,
    SPECULATIVE_MAX_RUNNING_REQUESTS,
    CapacityError,
    ModelShape,
    at_least,
    auto_hicache_ratio,
    auto_sizing,
    default_hicache_ratio,
    device_pool,
    draft_host_pool_tokens,
    draft_kv_bytes_per_token,
    dtype_bytes,
    host_memory_check,
    host_pool_tokens,
    kv_bytes_per_token,
    kv_heads_per_rank,
    max_concurrent_requests,
    model_shape,
    numa_node_check,
    rank_host_budget,
)
from .sglang_plan_text import Pools, explain_host, gb
from .sglang_settings import FACTS
from .sglang_types import Problems


@dataclass
class PlanInputs:
    """Everything one host's plan needs (sglang_preflight.plan_inputs builds it). Byte fields are bytes."""

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
    # NUMA binding (sglang_numa_bind) and the host's nodes: {"nodes": {"<node>": available bytes}, "gpus": [node of
    # each GPU]} (sglang_host_facts, or sglang_host_numa_memory).
    numa_bind: str = "off"
    numa_memory: dict[str, Any] | None = None
    page_size: int = 1
    avg_seq_len: int = 8192
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    sources: dict[str, str] = field(default_factory=dict)  # input -> what set it, for messages
    what_if: bool = True
    # Calibration (calibrate()): what a start of this configuration measured, per rank, with its source;
    # empty for an estimate.
    calibration: dict[str, Any] = field(default_factory=dict)


def input_names() -> dict[str, str]:
    """Plan input -> the variable behind it, from the settings and facts tables."""
    names = {"avg_seq_len": "sglang_plan_avg_seq_len", "cgroup_headroom_bytes": "the service's cgroup memory limit",
             "calibration": "sglang_startup_log", "numa_bind": "sglang_numa_bind"}
    names.update({s.plan: s.var or f"sglang_extra_args[{s.flag[2:]!r}]" for s in table.SETTINGS if s.plan})
    names.update({f.plan: f.about or f.var for f in FACTS if f.plan})
    return names


def _check_inputs(inputs: PlanInputs, problems: Problems) -> None:
    if inputs.tp_size < 1:
        problems.error("tp_size", f"{inputs.tp_size} is out of range; allowed: an integer >= 1")
    if inputs.mem_fraction_static is None:
        problems.error("mem_fraction_static", "is not set; the capacity plan needs it (SGLang picks one from the GPU "
                       "and the model at start, about 0.83 on 96 GB GPUs); allowed: a number between 0 and 1")
    elif not 0 < inputs.mem_fraction_static < 1:
        problems.error("mem_fraction_static", f"{inputs.mem_fraction_static} is out of range; allowed: between 0 and 1")
    if inputs.gpu_memory_bytes <= 0:
        problems.error("gpu_memory_bytes", "is not known; allowed: the memory of one GPU (nvidia-smi memory.total)")
    if inputs.weight_bytes_per_gpu <= 0 and not inputs.calibration:
        problems.error("weight_bytes_per_gpu", "is not known; allowed: the sum of the model's safetensors files / "
                       "tp_size, or an inventory value")
    if inputs.avg_seq_len < 1:
        problems.error("avg_seq_len", f"{inputs.avg_seq_len} is out of range; allowed: tokens per request (prompt + "
                       "output), >= 1")
    if inputs.page_size < 1:
        problems.error("page_size", f"{inputs.page_size} is out of range; allowed: an integer >= 1")
    if inputs.hicache_enabled and inputs.host_mem_available_bytes <= 0:
        problems.error("host_mem_available_bytes", "is not known; allowed: the host's MemAvailable (/proc/meminfo)")
    if inputs.hicache_enabled and inputs.hicache_size_gb < 0:
        problems.error("hicache_size_gb", f"{inputs.hicache_size_gb} is out of range; allowed: GB per TP rank, >= 0")
    if inputs.nnodes < 1 or inputs.tp_size % max(inputs.nnodes, 1):
        problems.error("tp_size", f"{inputs.tp_size} ranks cannot be spread evenly over {inputs.nnodes} nodes")


def _ranks_per_host(inputs: PlanInputs) -> int:
    return max(inputs.tp_size // max(inputs.nnodes, 1), 1)


def _shapes(inputs: PlanInputs, problems: Problems, algorithm: str | None) -> list[tuple[ModelShape, int]] | None:
    """The target's shape and KV bytes per token, then the draft's (over its own KV layers) when an
    EAGLE-family draft has its own pool; None after an error."""
    wanted = [(inputs.model_config, "model_config", kv_bytes_per_token)]
    if algorithm in DRAFT_KV_ALGORITHMS and inputs.draft_config:
        wanted.append((inputs.draft_config, "draft_config", draft_kv_bytes_per_token))
    found = []
    for config, key, cell_of in wanted:
        try:
            shape = model_shape(config)
            found.append((shape, cell_of(shape, inputs.kv_cache_dtype, inputs.tp_size)))
        except CapacityError as exc:
            problems.error("kv_cache_dtype" if "kv_cache_dtype" in str(exc) else key, str(exc))
            return None
    return found


def _core(inputs: PlanInputs, problems: Problems) -> dict[str, Any] | None:
    """The plan without what-ifs; None when an input error makes numbers meaningless."""
    algorithm = str(inputs.speculative_algorithm or "").upper() or None
    shapes = _shapes(inputs, problems, algorithm)
    if shapes is None:
        return None
    (shape, cell), (draft, draft_cell) = shapes[0], shapes[1] if len(shapes) > 1 else (None, 0)
    if shape.hybrid:
        problems.warn("model_config", f"{shape.architecture} has sliding-window or linear-attention layers; the plan "
                      "counts every layer as full attention, so its device token count is a lower bound")
    if shape.indexer:
        problems.warn("model_config", f"{shape.architecture} keeps a sparse-attention indexer cache next to its KV; "
                      "the plan leaves it out, so its device and host token counts are upper bounds")
    if algorithm in DRAFT_KV_ALGORITHMS and not inputs.draft_config and algorithm != "NEXTN":
        problems.warn("draft_config", f"no draft config.json given; the plan leaves out the {algorithm} draft's KV")
    draft_layers = draft.draft_layers if draft else 0
    if (draft and not inputs.draft_weight_bytes_per_gpu and at_least(inputs.version, "0.5.14")
            and not inputs.calibration):
        problems.warn("draft_weight_bytes_per_gpu", f"is not known; sglang {inputs.version} loads the draft before "
                      "it sizes the KV pool, so its weights (sum of the draft's safetensors / tp_size) come off "
                      "the device tokens")
    # 0.5.14+ loads the draft before the KV budget is measured ("draft weights are now counted").
    draft_weights_first = at_least(inputs.version, "0.5.14")
    pre = inputs.gpu_memory_bytes - inputs.gpu_reserved_bytes
    weight_bytes, draft_weight_bytes = inputs.weight_bytes_per_gpu, inputs.draft_weight_bytes_per_gpu
    if inputs.calibration:  # what SGLang itself measured before and after the load, the draft's weights included
        pre, weight_bytes = int(inputs.calibration["pre_load_free_bytes"]), int(inputs.calibration["weights_bytes"])
        draft_weight_bytes = 0
    mfs = float(inputs.mem_fraction_static or 0.0)
    slack = int(pre * (1 - mfs))
    pool = device_pool(inputs.version, pre, weight_bytes, draft_weight_bytes, mfs, cell, shape.layers, draft_layers,
                       shape.multimodal, page_size=inputs.page_size, max_total_tokens=inputs.max_total_tokens)
    tokens, charged, weights, mm_reserve = (pool.tokens, pool.charged_bytes_per_token, pool.weights_bytes,
                                            pool.reserve_bytes)
    if tokens <= 0:
        need = 1 - (pre - weights) / pre if pre > 0 else 1.0
        problems.error("mem_fraction_static", f"{mfs:g} leaves no GPU memory for the KV cache after {gb(weights)} of "
                       f"weights per GPU (SGLang fails with 'Not enough memory' after the load); "
                       f"allowed: above {need:.3f}")
        return None
    if not draft_weights_first and draft and inputs.draft_weight_bytes_per_gpu + tokens * draft_cell > slack:
        problems.warn("mem_fraction_static", f"sglang {inputs.version} allocates the draft model "
                      f"({gb(inputs.draft_weight_bytes_per_gpu)} of weights, {gb(tokens * draft_cell)} of KV per GPU) "
                      f"from the {gb(slack)} that mem_fraction_static leaves free, which also holds CUDA graphs "
                      "and activations")
    speculative = algorithm in SPECULATIVE_ALGORITHMS
    concurrency = max_concurrent_requests(tokens, inputs.avg_seq_len, inputs.max_running_requests, speculative)
    cap = inputs.max_running_requests or (SPECULATIVE_MAX_RUNNING_REQUESTS if speculative else None)
    result: dict[str, Any] = {
        "calibrated": bool(inputs.calibration),
        "calibration": inputs.calibration,
        "kv_bytes_per_token": cell,
        "device_kv_tokens": tokens,
        "max_concurrent_requests": concurrency,
        "model": {"architecture": shape.architecture, "model_type": shape.model_type, "attention": shape.attention,
                  "layers": shape.layers, "multimodal": shape.multimodal,
                  **{k: getattr(shape, k) for k in SHAPE_KEYS[2:] if getattr(shape, k)},
                  "kv_heads_per_rank": kv_heads_per_rank(shape, inputs.tp_size) if shape.attention == "gqa" else None},
        "device": {
            "gpu_memory_bytes": inputs.gpu_memory_bytes, "gpu_reserved_bytes": inputs.gpu_reserved_bytes,
            "pre_load_free_bytes": pre, "weight_bytes_per_gpu": inputs.weight_bytes_per_gpu,
            "draft_weight_bytes_per_gpu": inputs.draft_weight_bytes_per_gpu,
            "weights_counted_before_kv_bytes": weights, "free_after_weights_bytes": pre - weights,
            "runtime_reserve_bytes": slack, "multimodal_reserve_bytes": mm_reserve,
            "kv_budget_bytes": max(pre - weights - slack - mm_reserve, 0),
            "charged_bytes_per_token": charged, "draft_kv_bytes_per_token": draft_cell,
            "draft_layers": draft_layers, "kv_pool_bytes": tokens * cell,
            "draft_kv_pool_bytes": tokens * draft_cell,
        },
        "concurrency": {"avg_seq_len": inputs.avg_seq_len, "by_device_tokens": tokens // max(inputs.avg_seq_len, 1),
                        "max_running_requests": cap,
                        "cap_reason": ("--max-running-requests" if inputs.max_running_requests else
                                       "speculative decoding defaults to 48" if speculative else None)},
    }
    result.update(_host(inputs, problems, tokens, cell, draft_cell, shape.attention == "mla"))
    return result


def _numa(inputs: PlanInputs, per_rank: int, ranks: int, problems: Problems) -> list[dict[str, Any]]:
    """The pools of each NUMA node with sglang_numa_bind: auto; a node that cannot hold its ranks' pools is an error.
    Empty when binding is off, or the host has one node or did not say (offline, without sglang_host_numa_memory)."""
    memory = inputs.numa_memory or {}
    if inputs.numa_bind != "auto" or len(memory.get("nodes") or {}) < 2:
        return []
    nodes = numa_node_check(per_rank, ranks, list(memory.get("gpus") or []), dict(memory["nodes"]))
    for node in nodes:
        if node.fits:
            continue
        gpus = ", ".join(map(str, node.gpus))
        problems.error("numa_bind", f"auto binds the ranks of GPUs {gpus} to NUMA node {node.node} "
                       f"(numactl --membind), so their HiCache pools, {len(node.gpus)} x "
                       f"{gb(per_rank)} = {gb(node.need_bytes)}, must come from that node, which has "
                       f"{gb(node.available_bytes)} available (SGLang sizes them against the whole host's "
                       f"MemAvailable); allowed: sglang_numa_bind: off, or pools of at most "
                       f"{gb(node.available_bytes // max(len(node.gpus), 1))} per rank")
    return [{"node": node.node, "gpus": list(node.gpus), "need_bytes": node.need_bytes,
             "available_bytes": node.available_bytes, "fits": node.fits} for node in nodes]


def _host(inputs: PlanInputs, problems: Problems, device_tokens: int, cell: int, draft_cell: int,
          mla: bool) -> dict[str, Any]:
    ranks = _ranks_per_host(inputs)
    empty = {"host_kv_tokens_per_rank": 0, "host_kv_bytes_per_rank": 0, "host_kv_bytes_total": 0,
             "host": {"enabled": False, "ranks_per_host": ranks}}
    if not inputs.hicache_enabled:
        return empty
    version = inputs.version
    default = default_hicache_ratio(version, inputs.hicache_host_memory_mode)
    fraction = inputs.hicache_host_memory_fraction if at_least(version, "0.5.21") else None
    auto = auto_sizing(version, inputs.hicache_ratio, inputs.hicache_size_gb, fraction)
    budget = rank_host_budget(version, inputs.host_mem_available_bytes, ranks, inputs.cgroup_headroom_bytes)
    ratio = inputs.hicache_ratio if inputs.hicache_ratio is not None else default
    mode = "size" if inputs.hicache_size_gb > 0 else "auto" if auto else "ratio"
    if auto:
        ratio = auto_hicache_ratio(int(budget * float(fraction or 0)), device_tokens * (cell + draft_cell), default)
        if ratio <= 0:
            problems.error("host_mem_available_bytes", "No host memory is left for HiCache after the 10 GiB reserve "
                           "(SGLang's auto-sizing raises); allowed: more free host memory, or hicache disabled")
            return empty
    tokens = host_pool_tokens(device_tokens, cell, ratio, inputs.hicache_size_gb, inputs.page_size)
    draft_tokens = draft_host_pool_tokens(version, tokens, inputs.page_size) if draft_cell else 0
    target_bytes, draft_bytes = tokens * cell, draft_tokens * draft_cell
    per_rank = target_bytes + draft_bytes
    check = host_memory_check(version, target_bytes, draft_bytes, ranks, inputs.host_mem_available_bytes,
                              inputs.cgroup_headroom_bytes, auto)
    key = "hicache_size_gb" if mode == "size" else "hicache_ratio"
    if tokens <= device_tokens:
        if not at_least(version, "0.5.15"):
            problems.error(key, f"the host pool ({tokens:,} tokens) is not larger than the device pool "
                           f"({device_tokens:,} tokens); sglang {version} fails with AssertionError "
                           f"'{HOST_LARGER_THAN_DEVICE}'; allowed: a host pool larger than the device pool")
        else:
            problems.warn(key, f"the host pool ({tokens:,} tokens) is not larger than the device pool "
                          f"({device_tokens:,} tokens): HiCache only duplicates what is on the GPU")
    pools = Pools(key, mode, ratio, device_tokens, cell, target_bytes, draft_bytes, ranks, mla)
    explain_host(inputs.version, inputs.hicache_size_gb, inputs.host_mem_available_bytes, problems, pools, check)
    numa = _numa(inputs, per_rank, ranks, problems)
    return {
        "host_kv_tokens_per_rank": tokens,
        "host_kv_bytes_per_rank": per_rank,
        "host_kv_bytes_total": per_rank * ranks,
        "host": {
            "enabled": True, "mode": mode, "ratio": round(ratio, 4) if mode != "size" else None,
            "size_gb_per_rank": inputs.hicache_size_gb or None, "ranks_per_host": ranks,
            "target_bytes_per_rank": target_bytes, "draft_tokens_per_rank": draft_tokens,
            "draft_bytes_per_rank": draft_bytes, "reserve_bytes": HOST_RESERVE_BYTES,
            "effective_available_bytes": check.effective_available_bytes,
            "numa": numa,
            "headroom_bytes": check.effective_available_bytes - HOST_RESERVE_BYTES - per_rank * ranks,
            "check": {"verdict": check.verdict, "rule": check.rule,
                      "per_rank_budget_bytes": check.per_rank_budget_bytes,
                      "safe_target_bytes_per_rank": check.safe_per_rank_bytes,
                      "fit_target_bytes_per_rank": check.fit_per_rank_bytes},
        },
    }


# What a start must share with the plan for its figures to stand in for the estimates: everything that
# decides the memory before the KV pool. mem_fraction_static, HiCache and the pool's size may differ.
_SAME_START = ("tp_size", "kv_cache_dtype", "page_size")


def calibrate(inputs: PlanInputs, measured: dict[str, Any], source: str) -> tuple[PlanInputs, list[str]]:
    """The inputs with a start's measured free memory before and after the weights (a
    sglang_startup.Startup.as_dict()), or unchanged with the reasons the start does not match."""
    differences = []
    architectures = [load["architecture"] for load in measured.get("loads", []) if load.get("architecture")]
    planned = str((inputs.model_config.get("architectures") or [""])[0])
    if architectures and planned and architectures[0] != planned:
        differences.append(f"the model: the log loaded {architectures[0]}, the plan is for {planned}")
    draft_first = bool(inputs.draft_config) and at_least(inputs.version, "0.5.14")
    if draft_first and len(architectures) < 2:
        differences.append("the draft: the plan loads a draft before the KV pool, the log did not")
    if not draft_first and len(architectures) > 1:
        differences.append(f"the draft: the log loaded {architectures[1]} before the KV pool, the plan does not")
    args = measured.get("server_args") or {}
    for key in _SAME_START:
        logged, planned_value = args.get(key), getattr(inputs, key)
        if key == "page_size" and logged is None:
            logged = 1
        if key in args and str(logged) != str(planned_value):
            differences.append(f"{key}: the log ran {logged}, the plan has {planned_value}")
    if differences:
        return inputs, differences
    calibration = {"source": source, "pre_load_free_bytes": measured["pre_load_free_bytes"],
                   "weights_bytes": measured["weights_bytes"], "kv_tokens": measured.get("kv_tokens"),
                   "mem_fraction_static": args.get("mem_fraction_static"), "ranks": measured.get("ranks")}
    return replace(inputs, calibration=calibration), []


def plan(inputs: PlanInputs) -> dict[str, Any]:
    """The capacity plan of one host: the keys plan.yml's JSON promises, plus details and what-ifs."""
    problems = Problems({**input_names(), **inputs.sources})
    _check_inputs(inputs, problems)
    core = _core(inputs, problems) if not problems.errors else None
    result: dict[str, Any] = {
        "ok": False, "errors": problems.errors, "warnings": problems.warnings,
        "kv_bytes_per_token": 0, "device_kv_tokens": 0, "host_kv_tokens_per_rank": 0, "host_kv_bytes_per_rank": 0,
        "host_kv_bytes_total": 0, "host_mem_available_bytes": int(inputs.host_mem_available_bytes),
        "max_concurrent_requests": 0, "version": inputs.version,
    }
    if core is not None:
        result.update(core)
        if inputs.what_if:
            result["what_if"] = _what_if(inputs, core)
    result["ok"] = not problems.errors
    return result


def _variant(inputs: PlanInputs, **changes: Any) -> dict[str, Any]:
    quiet = replace(inputs, what_if=False, **changes)
    problems = Problems()
    core = _core(quiet, problems)
    if core is None:
        return {"ok": False}
    host = core.get("host", {})
    return {"ok": not problems.errors, "device_kv_tokens": core["device_kv_tokens"],
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
        "does_not_add": "concurrency: every running request's KV must be on the GPU, so max_concurrent_requests "
                        "is the same with and without it",
    }
    return out
