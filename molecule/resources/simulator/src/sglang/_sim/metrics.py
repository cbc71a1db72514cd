"""/metrics in the Prometheus text format, as prometheus_client writes SGLang's metrics (0.5.23's names and labels,
tests/fixtures/metrics/sglang-0.5.23.json): multiprocess mode, so no *_created series."""

from __future__ import annotations

import math

from sglang._sim.engine import Engine

Sample = tuple[str, str, str, float]  # name, type, help, value


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


def _labels(labels: dict[str, str]) -> str:
    inner = ",".join('{}="{}"'.format(key, value.replace("\\", "\\\\").replace('"', '\\"'))
                     for key, value in labels.items())
    return f"{{{inner}}}"


def _family(name: str, kind: str, help_text: str, labels: dict[str, str],
            value: float) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}",
            f"{name}{_labels(labels)} {go_float(value)}"]


def render(engine: Engine, model_name: str, host_total_tokens: int | None) -> str:
    stats = engine.stats
    scheduler = {"engine_type": "unified", "model_name": model_name, "moe_ep_rank": "0", "pp_rank": "0",
                 "tp_rank": "0"}
    tokenizer = {"engine_type": "unified", "is_streaming": "false", "model_name": model_name}
    gauges = [
        ("sglang:num_running_reqs", "The number of running requests.", stats.running),
        ("sglang:num_used_tokens", "The number of used tokens.", stats.used_tokens),
        ("sglang:token_usage", "The token usage.",
         round(stats.used_tokens / engine.max_total_tokens, 4)),
        ("sglang:gen_throughput", "The generation throughput (token/s).", engine.throughput()),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", stats.queued),
        ("sglang:cache_hit_rate", "The prefix cache hit rate.", 0.0),
        ("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.",
         engine.max_total_tokens),
    ]
    if host_total_tokens is not None:
        gauges += [
            # Write-through: every finished sequence's KV is backed up to the host pool until it is full
            # (then the oldest is evicted), so the pool fills with the tokens the server has processed.
            ("sglang:hicache_host_used_tokens", "The number of used tokens in the HiCache host "
             "pool.", min(host_total_tokens, stats.prompt_tokens_total + stats.generation_tokens_total)),
            ("sglang:hicache_host_total_tokens", "The total number of tokens in the HiCache "
             "host pool.", host_total_tokens),
        ]
    out: list[str] = []
    for name, help_text, value in gauges:
        out += _family(name, "gauge", help_text, scheduler, value)
    counters = [
        ("sglang:prompt_tokens", "Number of prefill tokens processed.",
         stats.prompt_tokens_total),
        ("sglang:generation_tokens", "Number of generation tokens processed.",
         stats.generation_tokens_total),
        ("sglang:num_requests", "Number of requests processed.", stats.requests_total),
    ]
    for name, help_text, value in counters:
        out += _family(name + "_total", "counter", help_text, tokenizer, value)
    return "\n".join(out) + "\n"
