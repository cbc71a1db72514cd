"""The simulator's /metrics has every SGLang metric the alert rules and the dashboard read, so the Molecule
scenarios can drive them (queue depth, token usage, the HiCache host pool), written per rank as SGLang 0.5.23
writes them (test_sim_fidelity.py holds the families to a real server's scrape)."""

from __future__ import annotations

import re
from types import ModuleType, SimpleNamespace

from promql import all_queries, names


def engine(running: int = 2) -> SimpleNamespace:
    streams = {"false": SimpleNamespace(prompt_tokens=90, generation_tokens=40, requests=2),
               "true": SimpleNamespace(prompt_tokens=10, generation_tokens=10, requests=1)}
    stats = SimpleNamespace(running=running, queued=3, used_tokens=50, prompt_tokens_total=100,
                            generation_tokens_total=50, requests_total=3, by_stream=streams)
    return SimpleNamespace(stats=stats, max_total_tokens=100, throughput=lambda: 12.5)  # 150 processed: 50 evicted


def render(metrics: ModuleType, tp_size: int = 1, all_schedulers: bool = False) -> str:
    ranks = metrics.Ranks(model_name="kimi", local=tuple(range(tp_size)), tp_size=tp_size,
                          all_schedulers=all_schedulers)
    constants = metrics.Constants(max_total_num_tokens=100, context_len=4096)
    return metrics.render(engine(), ranks, constants, 2001, ("host_pressure", "write_through_unbacked_eviction"))


def test_the_simulator_exports_every_sglang_metric_the_queries_read(sim_package: ModuleType) -> None:
    from sglang._sim import metrics

    text = render(metrics)
    exported = set(re.findall(r"^([a-z_:]+)\{", text, re.M))
    read = {name for expr in all_queries() for name in names(expr) if name.startswith("sglang:")}
    assert read and read <= exported, read - exported
    assert re.search(r"^sglang:hicache_host_used_tokens\{[^}]*\} 150\.0$", text, re.M)  # what it processed
    assert re.search(r"^sglang:token_usage\{[^}]*\} 0\.5$", text, re.M)
    assert re.search(r'^sglang:evicted_tokens_total\{cache_type="UnifiedRadixCache",dp_rank="0",pp_rank="0",'
                     r'tp_rank="0"\} 50\.0$', text, re.M)  # what did not fit in the device pool
    assert len(re.findall(r"^sglang:hicache_dropped_tokens_total\{[^}]*\} 0\.0$", text, re.M)) == 2  # pre-seeded
    # The labels of the real 0.5.23, in name order, and no *_created series (multiprocess mode).
    scheduler = re.search(r"^sglang:token_usage\{([^}]*)\}", text, re.M)
    tokenizer = re.findall(r"^sglang:num_requests_total\{([^}]*)\} (\S+)$", text, re.M)
    assert scheduler and tokenizer
    assert re.findall(r'(\w+)="', scheduler.group(1)) == ["engine_type", "model_name", "moe_ep_rank", "pp_rank",
                                                          "tp_rank"]
    assert [(re.findall(r'(\w+)="', labels), value) for labels, value in tokenizer] == [
        (["engine_type", "is_streaming", "model_name"], "2.0"), (["engine_type", "is_streaming", "model_name"], "1.0")]
    assert "_created" not in text


def test_constants_come_from_every_rank_and_stats_from_rank_0(sim_package: ModuleType) -> None:
    from sglang._sim import metrics

    def ranks(text: str, family: str) -> list[str]:
        return re.findall(rf'^{family}\{{[^}}]*tp_rank="(\d+)"[^}}]*\}}', text, re.M)

    text = render(metrics, tp_size=4)
    assert ranks(text, "sglang:max_total_num_tokens") == ranks(text, "sglang:context_len") == ["0", "1", "2", "3"]
    assert ranks(text, "sglang:evicted_tokens_total") == ["0", "1", "2", "3"]  # every rank's own cache
    assert ranks(text, "sglang:token_usage") == ranks(text, "sglang:hicache_host_total_tokens") == ["0"]
    assert ranks(render(metrics, tp_size=4, all_schedulers=True), "sglang:num_queue_reqs") == ["0", "1", "2", "3"]
