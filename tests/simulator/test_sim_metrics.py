"""The simulator's /metrics has every SGLang metric the alert rules and the dashboard read, so the Molecule
scenarios can drive them (queue depth, token usage, the HiCache host pool)."""

from __future__ import annotations

import re
from types import ModuleType, SimpleNamespace

from promql import all_queries, names


def test_the_simulator_exports_every_sglang_metric_the_queries_read(sim_package: ModuleType) -> None:
    from sglang._sim import metrics

    stats = SimpleNamespace(running=2, queued=3, used_tokens=500, prompt_tokens_total=100,
                            generation_tokens_total=50, requests_total=3)
    engine = SimpleNamespace(stats=stats, max_total_tokens=1000, throughput=lambda: 12.5)
    text = metrics.render(engine, "kimi", 2001)
    exported = set(re.findall(r"^([a-z_:]+)\{", text, re.M))
    read = {name for expr in all_queries() for name in names(expr) if name.startswith("sglang:")}
    assert read and read <= exported, read - exported
    assert re.search(r"^sglang:hicache_host_used_tokens\{[^}]*\} 150\.0$", text, re.M)  # what it processed
    # The labels of the real 0.5.23 (tests/fixtures/metrics/), and no *_created series (multiprocess mode).
    scheduler = re.search(r"^sglang:token_usage\{([^}]*)\}", text, re.M)
    tokenizer = re.search(r"^sglang:num_requests_total\{([^}]*)\}", text, re.M)
    assert scheduler and tokenizer
    assert sorted(re.findall(r'(\w+)="', scheduler.group(1))) == sorted(
        ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"])
    assert sorted(re.findall(r'(\w+)="', tokenizer.group(1))) == ["engine_type", "is_streaming", "model_name"]
    assert "_created" not in text
