"""/metrics in the Prometheus text format, as SGLang 0.5.23 serves it (prometheus_client's MultiProcessCollector over
every process's files): no *_created series, labels in name order, the metric's own documentation as HELP
(tests/fixtures/sglang-engine/metrics-0.5.23-cpu.txt).

Who writes what (srt/observability/metrics_collector.py, "mc.py", of 0.5.23):

- the start-up constants (``emit_constants``, mc.py:1769-1800) come from EVERY scheduler process, one series per
  TP rank (scheduler.py:631 -> 1278-1282);
- the ``log_stats`` gauges (mc.py:1646-1680: running/queued requests, token usage, throughput, HiCache host pool)
  only from attention-TP rank 0, unless ``--enable-metrics-for-all-schedulers`` (mc.py:1362-1367), when every rank
  writes the same values;
- the tokenizer's request counters from the HTTP process, labelled by ``is_streaming`` (mc.py:1807-1812), a value
  only once a request of that kind finished;
- the prefix cache's counters (RadixCacheMetricsCollector, mc.py:2416-2614) from EVERY rank, labelled cache_type,
  tp_rank, pp_rank, dp_rank: ``evicted_tokens_total`` from the first eviction (base_prefix_cache.py:418-424),
  ``hicache_dropped_tokens_total`` pre-seeded at 0 when HiCache runs (unified_radix_cache.py:565-575).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from sglang._sim.engine import Engine

Labels = dict[str, str]
Sample = tuple[Labels, float]

# HELP of each family the simulator serves: the documentation string of its Gauge/Counter in mc.py.
HELP = {
    "sglang:max_total_num_tokens": "Maximum total number of tokens in the KV cache pool.",
    "sglang:weight_memory_usage_gb": "Memory used by model weights in GB.",
    "sglang:kv_cache_memory_usage_gb": "Memory used by the KV cache pools in GB.",
    "sglang:graph_memory_usage_gb": "Memory used by captured device graphs in GB.",
    "sglang:page_size": "KV cache page size in tokens.",
    "sglang:num_pages": "Number of KV cache pages.",
    "sglang:context_len": "Maximum context length.",
    "sglang:startup_available_gpu_memory_gb": "Available GPU memory in GB at startup.",
    "sglang:num_running_reqs": "The number of running requests.",
    "sglang:num_queue_reqs": "The number of requests in the waiting queue.",
    "sglang:gen_throughput": "The generation throughput (token/s).",
    "sglang:cache_hit_rate": "The prefix cache hit rate.",
    "sglang:token_usage": "The token usage.",
    "sglang:num_used_tokens": "The number of used tokens.",
    "sglang:hicache_host_used_tokens": "Number of tokens currently used in the host KV cache.",
    "sglang:hicache_host_total_tokens": "Total capacity of the host KV cache in tokens.",
    "sglang:prompt_tokens_total": "Number of prefill tokens processed.",
    "sglang:generation_tokens_total": "Number of generation tokens processed.",
    "sglang:num_requests_total": "Number of requests processed.",
    "sglang:evicted_tokens_total": "The number of device KV token slots freed by eviction, regardless of whether the "
                                   "data was backed up to host (see sglang:hicache_backup_tokens_total) or destroyed "
                                   "(see sglang:hicache_dropped_tokens_total).",
    "sglang:hicache_dropped_tokens_total": "The number of logical device KV tokens destroyed without a host backup. "
                                           "The pool label is always kv; reason is host_pressure for write-back "
                                           "failure, or write_through_unbacked_eviction when eager write-through did "
                                           "not complete before eviction.",
}
CACHE_TYPE = "UnifiedRadixCache"  # the tree cache class of 0.5.23 ("impl=UnifiedRadixCache" in its log)
GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")


@dataclass(frozen=True)
class Ranks:
    """The schedulers whose files this node's /metrics reads, and how they label their series."""

    model_name: str
    local: tuple[int, ...]       # TP ranks of this node's schedulers
    tp_size: int = 1
    ep_size: int = 1
    all_schedulers: bool = False  # --enable-metrics-for-all-schedulers

    def labels(self, rank: int) -> Labels:
        """mc.py:1382-1388 (engine_type is "unified" without disaggregation)."""
        moe_ep_rank = rank // max(self.tp_size // max(self.ep_size, 1), 1)
        return {"engine_type": "unified", "model_name": self.model_name, "moe_ep_rank": str(moe_ep_rank),
                "pp_rank": "0", "tp_rank": str(rank)}

    @property
    def stats_ranks(self) -> tuple[int, ...]:
        """The ranks that run log_stats: attention-TP rank 0, or all with --enable-metrics-for-all-schedulers."""
        return self.local if self.all_schedulers else tuple(rank for rank in self.local if rank == 0)


@dataclass(frozen=True)
class Constants:
    """What emit_constants() writes once at start-up (GB figures as SGLang computes them)."""

    max_total_num_tokens: int
    context_len: int
    page_size: int = 1
    weight_gb: float = 0.0
    kv_cache_gb: float = 0.0
    startup_available_gb: float = 0.0
    graph_gb: dict[str, float] = field(default_factory=dict)  # phase -> GB; missing phases are 0


def go_float(value: float) -> str:
    """prometheus_client's floatToGoString."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = (f"{text[0]}.{text[1:dot]}{text[dot + 1:]}").rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _labels(labels: Labels) -> str:
    inner = ",".join('{}="{}"'.format(key, labels[key].replace("\\", "\\\\").replace('"', '\\"'))
                     for key in sorted(labels))
    return f"{{{inner}}}"


def _family(name: str, kind: str, samples: Sequence[Sample]) -> list[str]:
    """HELP, TYPE and the series of one family; nothing for a family without series (as the collector does)."""
    if not samples:
        return []
    return [f"# HELP {name} {HELP[name]}", f"# TYPE {name} {kind}",
            *(f"{name}{_labels(labels)} {go_float(value)}" for labels, value in samples)]


def constant_families(ranks: Ranks, constants: Constants) -> list[str]:
    values = {
        "sglang:max_total_num_tokens": constants.max_total_num_tokens,
        "sglang:weight_memory_usage_gb": constants.weight_gb,
        "sglang:kv_cache_memory_usage_gb": constants.kv_cache_gb,
        "sglang:page_size": constants.page_size,
        "sglang:num_pages": constants.max_total_num_tokens // max(constants.page_size, 1),
        "sglang:context_len": constants.context_len,
        "sglang:startup_available_gpu_memory_gb": constants.startup_available_gb,
    }
    out: list[str] = []
    for name, value in values.items():
        out += _family(name, "gauge", [(ranks.labels(rank), value) for rank in ranks.local])
        if name == "sglang:kv_cache_memory_usage_gb":  # the scrape's order: the graphs come next
            graphs = [(dict(ranks.labels(rank), phase=phase), constants.graph_gb.get(phase, 0.0))
                      for rank in ranks.local for phase in GRAPH_PHASES]
            out += _family("sglang:graph_memory_usage_gb", "gauge", graphs)
    return out


def stats_families(engine: Engine, ranks: Ranks, host_total_tokens: int | None) -> list[str]:
    stats = engine.stats
    values: dict[str, float] = {
        "sglang:num_running_reqs": stats.running,
        "sglang:num_queue_reqs": stats.queued,
        "sglang:gen_throughput": engine.throughput(),
        "sglang:cache_hit_rate": 0.0,
        # round(max pool usage, 2) (scheduler_components/pool_stats_observer.py:155)
        "sglang:token_usage": round(stats.used_tokens / engine.max_total_tokens, 2),
        "sglang:num_used_tokens": stats.used_tokens,
    }
    if host_total_tokens is not None:
        # Write-through: every finished sequence's KV is backed up to the host pool until it is full (then the
        # oldest is evicted), so the pool fills with the tokens the server has processed.
        processed = stats.prompt_tokens_total + stats.generation_tokens_total
        values["sglang:hicache_host_used_tokens"] = min(host_total_tokens, processed)
        values["sglang:hicache_host_total_tokens"] = host_total_tokens
    out: list[str] = []
    for name, value in values.items():
        out += _family(name, "gauge", [(ranks.labels(rank), value) for rank in ranks.stats_ranks])
    return out


def counter_families(engine: Engine, model_name: str) -> list[str]:
    by_stream = dict(sorted(engine.stats.by_stream.items()))
    fields = {"sglang:prompt_tokens_total": "prompt_tokens", "sglang:generation_tokens_total": "generation_tokens",
              "sglang:num_requests_total": "requests"}
    out: list[str] = []
    for name, attribute in fields.items():
        samples = [({"engine_type": "unified", "is_streaming": streaming, "model_name": model_name},
                    float(getattr(counts, attribute))) for streaming, counts in by_stream.items()]
        out += _family(name, "counter", samples)
    return out


def cache_families(engine: Engine, ranks: Ranks, dropped_reasons: Sequence[str]) -> list[str]:
    """The device cache keeps finished sequences until the pool is full, then evicts as much as comes in; with
    HiCache every evicted token has its host copy (write-through), so none is dropped."""
    stats = engine.stats
    evicted = max(stats.prompt_tokens_total + stats.generation_tokens_total - engine.max_total_tokens, 0)
    labels = [{"cache_type": CACHE_TYPE, "dp_rank": "0", "pp_rank": "0", "tp_rank": str(rank)} for rank in ranks.local]
    dropped = [(dict(rank, pool="kv", reason=reason), 0.0) for rank in labels for reason in dropped_reasons]
    return [*_family("sglang:evicted_tokens_total", "counter", [(rank, evicted) for rank in labels if evicted]),
            *_family("sglang:hicache_dropped_tokens_total", "counter", dropped)]


def render(engine: Engine, ranks: Ranks, constants: Constants, host_total_tokens: int | None = None,
           dropped_reasons: Sequence[str] = ()) -> str:
    """The scrape; dropped_reasons: the hicache_dropped_tokens_total reasons SGLang pre-seeds (HiCache only)."""
    lines = [*constant_families(ranks, constants), *stats_families(engine, ranks, host_total_tokens),
             *counter_families(engine, ranks.model_name), *cache_families(engine, ranks, dropped_reasons)]
    return "\n".join(lines) + "\n" if lines else ""
