"""The status filters: SGLang's metrics read as one server, dd's read rate and status.yml's table."""

from __future__ import annotations

import pytest
from ansible_collections.sglang.deploy.plugins.filter import status
from helpers import ROOT

METRICS = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="kimi",tp_rank="0"} 3.0
sglang:num_running_reqs{model_name="kimi",tp_rank="1"} 3.0
sglang:num_queue_reqs{model_name="kimi"} 2
sglang:token_usage{model_name="kimi"} 0.42
sglang:hicache_host_used_tokens{model_name="kimi"} 250
sglang:hicache_host_total_tokens{model_name="kimi"} 1000
sglang:gen_throughput{model_name="kimi"} NaN
sglang:prompt_tokens_total{model_name="kimi"} 99
"""


def test_metrics_reads_the_status_gauges_and_leaves_out_the_rest() -> None:
    assert status.metrics(METRICS) == {"num_running_reqs": 3.0, "num_queue_reqs": 2.0, "token_usage": 0.42,
                                       "hicache_host_used_tokens": 250.0, "hicache_host_total_tokens": 1000.0}
    assert status.metrics(METRICS, ["num_running_reqs", "num_queue_reqs"]) == {"num_running_reqs": 3.0,
                                                                               "num_queue_reqs": 2.0}
    assert status.metrics(None) == {} and status.metrics("") == {}


# A real 0.5.23 server's /metrics, built as its schedulers write it (metrics_collector.py "mc.py" of 0.5.23):
# every scheduler labels its series engine_type, model_name, moe_ep_rank, pp_rank, tp_rank (mc.py:1375-1396;
# + priority="" with --enable-priority-scheduling, + dp_rank with --dp-size > 1); the start-up constants come
# from every TP rank (emit_constants, scheduler.py:631); log_stats from attention-TP rank 0, or from every
# rank with --enable-metrics-for-all-schedulers (mc.py:1362-1367); queue counts add per-priority series
# (mc.py:1415-1429). The values: the example's Kimi-K2.5 on 8 GPUs, busy, HiCache ratio 2.
POOL, HOST_POOL = 116171, 232343


CONSTANTS = {"max_total_num_tokens": POOL, "context_len": 131072, "page_size": 1}


LOGGED = {"num_running_reqs": 48, "num_queue_reqs": 100, "token_usage": 0.91, "num_used_tokens": 105716,
          "gen_throughput": 1520.5, "cache_hit_rate": 0.62, "hicache_host_used_tokens": 232000,
          "hicache_host_total_tokens": HOST_POOL}


EXPECTED = {**{name: float(value) for name, value in LOGGED.items()}, "max_total_num_tokens": float(POOL)}


def sample(name: str, value: float, rank: int, **extra: str) -> str:
    labels = {"engine_type": "unified", "model_name": "kimi-k2.5", "moe_ep_rank": "0", "pp_rank": "0",
              "tp_rank": str(rank), **extra}
    inner = ",".join(f'{key}="{labels[key]}"' for key in sorted(labels))
    return f"sglang:{name}{{{inner}}} {float(value)}"


def scrape(logged_by: range, constants_by: range = range(8), priorities: dict[str, int] | None = None,
           dp: dict[int, str] | None = None, logged: dict[str, float] | None = None) -> str:
    """The /metrics text of a server: the constants from the ranks `constants_by`, log_stats from `logged_by`;
    `priorities` {priority: queued} adds the per-priority queue series; `dp` {tp_rank: dp_rank} the DP label."""
    extra = ({"priority": ""} if priorities is not None else {})
    lines = [f"# TYPE sglang:{name} gauge" for name in {**CONSTANTS, **LOGGED}]
    for rank in sorted(set(constants_by) | set(logged_by)):
        labels = {**extra, **({"dp_rank": dp[rank]} if dp else {})}
        if rank in constants_by:
            lines += [sample(name, value, rank, **labels) for name, value in CONSTANTS.items()]
        if rank in logged_by:
            lines += [sample(name, value, rank, **labels) for name, value in (logged or LOGGED).items()]
            for priority, queued in (priorities or {}).items():
                lines.append(sample("num_queue_reqs", queued, rank, **{**labels, "priority": priority}))
                lines.append(sample("num_running_reqs", 24, rank, **{**labels, "priority": priority}))
    lines += ["# TYPE sglang:prompt_tokens_total counter",
              'sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="kimi-k2.5"} 900.0',
              'sglang:prompt_tokens_total{engine_type="unified",is_streaming="true",model_name="kimi-k2.5"} 100.0']
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("page", [
    scrape(logged_by=range(1)),                                   # the default: log_stats on rank 0 only
    scrape(logged_by=range(8)),                                   # --enable-metrics-for-all-schedulers
    scrape(logged_by=range(1), priorities={"0": 60, "10": 40}),   # --enable-priority-scheduling
    scrape(logged_by=range(8), priorities={"0": 60, "10": 40}),   # both
], ids=["rank-0", "all-schedulers", "priority", "all-schedulers-priority"])
def test_eight_ranks_read_as_one_server(page: str) -> None:
    # The old sum said 8 x 116171 = 929368 tokens of KV pool, and 8 x or 2 x the queue with the flags.
    assert status.metrics(page) == EXPECTED


def test_dp_ranks_add_their_requests_and_show_the_fullest_pool() -> None:
    # --tp-size 8 --dp-size 2 --enable-dp-attention: attention-TP rank 0 of each DP rank is tp_rank 0 and 4.
    dp = {rank: str(rank // 4) for rank in range(8)}
    ranks = [scrape(logged_by=range(4 * d, 4 * d + 1), constants_by=range(4 * d, 4 * d + 4), dp=dp,
                    logged=dict(LOGGED, num_running_reqs=20 + 8 * d, num_queue_reqs=d, token_usage=0.5 + 0.4 * d,
                                gen_throughput=700.0 + d))
             for d in (0, 1)]
    got = status.metrics("".join(ranks))
    assert (got["num_running_reqs"], got["num_queue_reqs"], got["gen_throughput"]) == (48.0, 1.0, 1401.0)
    assert (got["token_usage"], got["max_total_num_tokens"]) == (0.9, float(POOL))


def test_counters_and_other_gauges_are_aggregated_as_what_they_are() -> None:
    page = scrape(logged_by=range(8)) + "".join(
        sample("num_grammar_queue_reqs", 2, rank) + "\n" for rank in range(8)) + (
        "# TYPE sglang:http_requests_active gauge\n"
        'sglang:http_requests_active{endpoint="/generate",method="POST"} 3.0\n'
        'sglang:http_requests_active{endpoint="/v1/completions",method="POST"} 2.0\n')
    assert status.metrics(page, ["prompt_tokens_total", "num_grammar_queue_reqs", "http_requests_active",
                                 "context_len"]) == {
        "prompt_tokens_total": 1000.0,     # a counter: the sum of its series
        "num_grammar_queue_reqs": 2.0,     # a scheduler gauge, one series per rank: one rank's
        "http_requests_active": 5.0,       # the HTTP process's gauge, one series per endpoint: their sum
        "context_len": 131072.0}           # a start-up constant of every rank


def test_the_drain_waits_for_the_server_total_of_requests() -> None:
    """drain.yml: ``metrics(['num_running_reqs', 'num_queue_reqs']).values() | sum == 0``."""
    idle = dict(LOGGED, num_running_reqs=0, num_queue_reqs=0)
    pages = (scrape(logged_by=range(8), logged=idle),
             scrape(logged_by=range(1), logged=idle, priorities={"0": 0, "10": 0}))
    for page in pages:
        assert sum(status.metrics(page, ["num_running_reqs", "num_queue_reqs"]).values()) == 0
    busy = status.metrics(scrape(logged_by=range(8), priorities={"0": 60, "10": 40}),
                          ["num_running_reqs", "num_queue_reqs"])
    assert busy == {"num_running_reqs": 48.0, "num_queue_reqs": 100.0}
    last = dict(idle, num_running_reqs=1)  # one request still decoding on one DP rank
    dp = {rank: str(rank // 4) for rank in range(8)}
    page = scrape(logged_by=range(1), constants_by=range(4), dp=dp, logged=idle) + scrape(
        logged_by=range(4, 5), constants_by=range(4, 8), dp=dp, logged=last)
    assert sum(status.metrics(page, ["num_running_reqs", "num_queue_reqs"]).values()) == 1


def test_the_real_scrape_of_a_single_rank_server() -> None:
    """What a real 0.5.23 server (CPU, tp_size 1, no HiCache) served, after 5 requests."""
    page = (ROOT / "tests" / "fixtures" / "sglang-engine" / "metrics-0.5.23-cpu.txt").read_text()
    assert status.metrics(page) == {"num_running_reqs": 0.0, "num_queue_reqs": 0.0, "token_usage": 0.0,
                                    "num_used_tokens": 0.0, "max_total_num_tokens": 4096.0, "gen_throughput": 0.0,
                                    "cache_hit_rate": 0.0}
    assert status.metrics(page, ["prompt_tokens_total", "cached_tokens_total", "fwd_occupancy"]) == {
        "prompt_tokens_total": 43.0, "cached_tokens_total": 12.0}  # NaN is left out
    row = status.status_table([dict(ROW, metrics=page)]).splitlines()[2].split()
    assert row[8:10] == ["0%", "-"]  # KV used; no HiCache host pool


def test_the_status_table_reads_eight_ranks_as_one_server() -> None:
    row = status.status_table([dict(ROW, metrics=scrape(logged_by=range(8), priorities={"0": 60, "10": 40}))])
    assert row.splitlines()[2].split()[8:10] == ["91%", "100%"]  # 232000 / 232343: full by design


ROW = {"host": "gpu-node-1", "state": "active/running", "healthy": True, "health": 200, "uptime_s": 3723,
       "restarts": 0, "version": "0.5.23", "drift": False}


@pytest.mark.parametrize("metrics", [METRICS, status.metrics(METRICS)], ids=["text", "parsed"])
def test_status_table_shows_a_row_per_server(metrics: object) -> None:
    # The real host's load: 547 GiB of weights read in 664 s; its disk reads 5.5 GB/s sequentially.
    load = {"total_s": 712.4, "weights_load_s": 664.0, "weights_bytes": 547 * 2**30, "read_gb_per_s": 0.885}
    lines = status.status_table([dict(ROW, metrics=metrics, kv_tokens_planned=116171, plan_calibrated=True,
                                      kv_tokens_observed=116171, load=load, disk_read_gb_per_s=5.5),
                                 dict(ROW, host="gpu-node-2", healthy=False, health=503, drift=True, metrics={},
                                      kv_tokens_planned="314297", plan_calibrated="False", kv_tokens_observed=None,
                                      load=None, disk_read_gb_per_s=None)]).splitlines()
    assert lines[0].split() == ["host", "state", "health", "uptime", "restarts", "version", "config", "KV", "used",
                                "host", "KV", "used", "KV", "pool", "planned", "KV", "pool", "seen", "last", "load",
                                "weights", "read", "disk", "reads", "at", "disk", "rate"]
    assert lines[2].split() == ["gpu-node-1", "active/running", "ok", "1h02m", "0", "0.5.23", "in", "sync", "42%",
                                "25%", "116,171*", "116,171", "11m52s", "0.89", "GB/s", "5.50", "GB/s", "1m47s"]
    assert lines[3].split() == ["gpu-node-2", "active/running", "503", "1h02m", "0", "0.5.23", "DRIFT", "-", "-",
                                "314,297", "-", "-", "-", "-", "-"]
    assert len({len(line) for line in lines}) == 1  # the columns line up


def test_the_status_table_says_stale_with_the_reasons() -> None:
    row = {"host": "gpu-node-1", "state": "active/running", "healthy": True, "health": 200, "uptime_s": 60,
           "restarts": 0, "version": "0.5.23", "drift": [], "stale": ["the running server (PID 1) started before "
                                                                      "kimi.env changed"], "metrics": {}}
    table = status.status_table([row])
    assert " STALE " in table.splitlines()[2]
    assert table.splitlines()[-1] == "gpu-node-1: STALE: the running server (PID 1) started before kimi.env changed"
    assert " in sync " in status.status_table([dict(row, stale=[])]).splitlines()[2]


def test_the_status_table_gives_each_servers_load_speed_advice_after_it() -> None:
    from ansible_collections.sglang.deploy.plugins.filter.load import load_advice
    load = {"total_s": 712.4, "weights_load_s": 664.0, "weights_bytes": 547_000_000_000, "read_gb_per_s": 0.824}
    rows = [dict(ROW, load=load, disk_read_gb_per_s=5.5, load_advice=load_advice({"load": load}, {"gb_per_s": 5.5})),
            dict(ROW, host="gpu-node-2", load_advice=load_advice({}, None)), dict(ROW, host="gpu-node-3")]
    lines = status.status_table(rows).splitlines()
    assert len(lines) == 2 + 3 + 2
    assert lines[-2].startswith("gpu-node-1: LOAD SPEED: lever: presharded, up to 564 s faster (the last load read "
                                "the weights at 0.82 GB/s, 15% of the disk's 5.50 GB/s")
    assert lines[-1] == "gpu-node-2: LOAD SPEED: unknown: the disk's read rate is not measured on this host yet"


def test_status_table_says_whether_the_presharded_dump_is_ready() -> None:
    key = "0123456789abcdef"
    ready = {"enabled": True, "key": key, "dir": "/var/lib/sglang/presharded", "ready": True, "bytes": 5 * 10**9}
    dumping = {**ready, "ready": False, "need_bytes": 12 * 10**9, "free_bytes": 40 * 10**9}
    lines = status.status_table([dict(ROW, presharded=ready), dict(ROW, host="b", presharded=dumping),
                                 dict(ROW, host="c", presharded={"enabled": False})]).splitlines()
    assert lines[-2] == f"{ROW['host']}: presharded: ready, key {key} (5.0 GB in /var/lib/sglang/presharded/{key})"
    assert lines[-1] == (f"b: presharded: NOT READY for key {key}: the next start dumps about 12.0 GB into "
                         f"/var/lib/sglang/presharded/{key} (40.0 GB free), and loads from it on the starts after")
