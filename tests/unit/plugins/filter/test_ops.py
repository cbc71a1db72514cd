"""The operations filters: deploy.yml's serial (servers per batch, a multi-node server always in one batch),
SGLang's metrics, systemctl's properties and status.yml's table."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.filter import ops
from ansible_collections.sglang.deploy.plugins.filter.ops import rollout_batches as batches
from hypothesis import given
from hypothesis import strategies as st

SINGLES = {"sglang_workers": ["w1", "w2", "w3"]}


@pytest.mark.parametrize(("serial", "expected"), [
    (1, [1, 1, 1]), ("1", [1, 1, 1]), (2, [2, 1]), (5, [3]), ("34%", [1, 1, 1]), ("67%", [2, 1]), ("100%", [3]),
])
def test_count_or_percentage_of_servers(serial: object, expected: list[int]) -> None:
    assert batches(SINGLES, serial) == expected


def test_a_multinode_server_is_one_unit() -> None:
    groups = {"sglang_workers": ["a0", "a1", "w1", "w2"], "sglang_multinode_big": ["a0", "a1"]}
    assert batches(groups, 1) == [2, 1, 1]
    assert batches(groups, 2) == [3, 1]


def test_members_apart_in_the_order_are_refused() -> None:
    groups = {"sglang_workers": ["a0", "w1", "a1"], "sglang_multinode_big": ["a0", "a1"]}
    with pytest.raises(AnsibleFilterError, match="next to each other"):
        batches(groups, 1)


FLEET = {"sglang_workers": ["a0", "a1", "w1", "w2", "w3", "w4"], "sglang_multinode_big": ["a0", "a1"]}


def test_only_the_servers_that_restart_are_batched() -> None:
    groups = dict(FLEET, sglang_rollout_restart=["w3", "a1", "a0"], sglang_rollout_keep=["w1", "w2", "w4"])
    assert batches(groups, 1, "sglang_rollout_restart") == [2, 1]  # the multi-node server, then w3
    # A percentage is of the whole fleet's units (5): 40 % = 2 units per batch, whatever restarts.
    assert batches(groups, "40%", "sglang_rollout_restart") == [3]
    assert batches(groups, 1, "sglang_rollout_restart", parallel=True) == [3]
    assert batches(dict(FLEET, sglang_rollout_restart=[]), 1, "sglang_rollout_restart") == [1]


def test_a_multinode_server_restarts_whole_or_not_at_all() -> None:
    with pytest.raises(AnsibleFilterError, match="as one unit"):
        batches(dict(FLEET, sglang_rollout_restart=["a0", "w1"]), 1, "sglang_rollout_restart")


def test_the_rollout_plan_names_each_batch_and_the_servers_left_alone() -> None:
    groups = dict(FLEET, sglang_rollout_restart=["w3", "a0", "a1"], sglang_rollout_keep=["w1", "w2", "w4"])
    assert ops.rollout_plan(groups, 1) == (
        "ROLLOUT PLAN: 3 servers restart in 2 batches (sglang_rolling_serial 1), each drained, restarted and back "
        "before the next: batch 1: a0, a1; batch 2: w3. Unchanged and serving, not drained: w1, w2, w4.")
    assert ops.rollout_plan(groups, 1, True) == (
        "ROLLOUT PLAN: first install, no server runs yet: a0, a1, w3 start together. Unchanged and serving, not "
        "drained: w1, w2, w4.")
    nothing = dict(FLEET, sglang_rollout_keep=FLEET["sglang_workers"])
    assert ops.rollout_plan(nothing, 1) == ("ROLLOUT PLAN: no server restarts. Unchanged and serving, not drained: "
                                            "a0, a1, w1, w2, w3, w4.")


def test_the_reboot_plan_reads_the_reboot_groups() -> None:
    groups = dict(FLEET, sglang_reboot=["w4", "w1"], sglang_reboot_not=["a0", "a1", "w2", "w3"],
                  sglang_rollout_restart=["w2"])
    assert ops.rollout_plan(groups, 1, False, "reboot") == (
        "REBOOT PLAN: 2 servers reboot in 2 batches (sglang_rolling_serial 1), each drained, rebooted and back "
        "before the next: batch 1: w1; batch 2: w4. No reboot pending, not drained: a0, a1, w2, w3.")
    assert ops.rollout_plan(dict(FLEET, sglang_reboot_not=["w1"]), 1, False, "reboot") == (
        "REBOOT PLAN: no server reboots. No reboot pending, not drained: w1.")
    with pytest.raises(AnsibleFilterError, match="action 'drain'; allowed: restart, reboot"):
        ops.rollout_plan(groups, 1, False, "drain")


@pytest.mark.parametrize("serial", [0, "-1", "0%", "150%", "half"])
def test_a_bad_serial_names_the_variable(serial: object) -> None:
    with pytest.raises(AnsibleFilterError, match="sglang_rolling_serial"):
        batches(SINGLES, serial)


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
    assert ops.metrics(METRICS) == {"num_running_reqs": 3.0, "num_queue_reqs": 2.0, "token_usage": 0.42,
                                    "hicache_host_used_tokens": 250.0, "hicache_host_total_tokens": 1000.0}
    assert ops.metrics(METRICS, ["num_running_reqs", "num_queue_reqs"]) == {"num_running_reqs": 3.0,
                                                                            "num_queue_reqs": 2.0}
    assert ops.metrics(None) == {} and ops.metrics("") == {}


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
    assert ops.metrics(page) == EXPECTED


def test_dp_ranks_add_their_requests_and_show_the_fullest_pool() -> None:
    # --tp-size 8 --dp-size 2 --enable-dp-attention: attention-TP rank 0 of each DP rank is tp_rank 0 and 4.
    dp = {rank: str(rank // 4) for rank in range(8)}
    ranks = [scrape(logged_by=range(4 * d, 4 * d + 1), constants_by=range(4 * d, 4 * d + 4), dp=dp,
                    logged=dict(LOGGED, num_running_reqs=20 + 8 * d, num_queue_reqs=d, token_usage=0.5 + 0.4 * d,
                                gen_throughput=700.0 + d))
             for d in (0, 1)]
    got = ops.metrics("".join(ranks))
    assert (got["num_running_reqs"], got["num_queue_reqs"], got["gen_throughput"]) == (48.0, 1.0, 1401.0)
    assert (got["token_usage"], got["max_total_num_tokens"]) == (0.9, float(POOL))


def test_counters_and_other_gauges_are_aggregated_as_what_they_are() -> None:
    page = scrape(logged_by=range(8)) + "".join(
        sample("num_grammar_queue_reqs", 2, rank) + "\n" for rank in range(8)) + (
        "# TYPE sglang:http_requests_active gauge\n"
        'sglang:http_requests_active{endpoint="/generate",method="POST"} 3.0\n'
        'sglang:http_requests_active{endpoint="/v1/completions",method="POST"} 2.0\n')
    assert ops.metrics(page, ["prompt_tokens_total", "num_grammar_queue_reqs", "http_requests_active",
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
        assert sum(ops.metrics(page, ["num_running_reqs", "num_queue_reqs"]).values()) == 0
    busy = ops.metrics(scrape(logged_by=range(8), priorities={"0": 60, "10": 40}),
                       ["num_running_reqs", "num_queue_reqs"])
    assert busy == {"num_running_reqs": 48.0, "num_queue_reqs": 100.0}
    last = dict(idle, num_running_reqs=1)  # one request still decoding on one DP rank
    dp = {rank: str(rank // 4) for rank in range(8)}
    page = scrape(logged_by=range(1), constants_by=range(4), dp=dp, logged=idle) + scrape(
        logged_by=range(4, 5), constants_by=range(4, 8), dp=dp, logged=last)
    assert sum(ops.metrics(page, ["num_running_reqs", "num_queue_reqs"]).values()) == 1


def test_the_real_scrape_of_a_single_rank_server() -> None:
    """What a real 0.5.23 server (CPU, tp_size 1, no HiCache) served, after 5 requests."""
    page = (ROOT / "tests" / "fixtures" / "sglang-engine" / "metrics-0.5.23-cpu.txt").read_text()
    assert ops.metrics(page) == {"num_running_reqs": 0.0, "num_queue_reqs": 0.0, "token_usage": 0.0,
                                 "num_used_tokens": 0.0, "max_total_num_tokens": 4096.0, "gen_throughput": 0.0,
                                 "cache_hit_rate": 0.0}
    assert ops.metrics(page, ["prompt_tokens_total", "cached_tokens_total", "fwd_occupancy"]) == {
        "prompt_tokens_total": 43.0, "cached_tokens_total": 12.0}  # NaN is left out
    row = ops.status_table([dict(ROW, metrics=page)]).splitlines()[2].split()
    assert row[8:10] == ["0%", "-"]  # KV used; no HiCache host pool


def test_the_status_table_reads_eight_ranks_as_one_server() -> None:
    row = ops.status_table([dict(ROW, metrics=scrape(logged_by=range(8), priorities={"0": 60, "10": 40}))])
    assert row.splitlines()[2].split()[8:10] == ["91%", "100%"]  # 232000 / 232343: full by design


ROW = {"host": "gpu-node-1", "state": "active/running", "healthy": True, "health": 200, "uptime_s": 3723,
       "restarts": 0, "version": "0.5.23", "drift": False}


@pytest.mark.parametrize("metrics", [METRICS, ops.metrics(METRICS)], ids=["text", "parsed"])
def test_status_table_shows_a_row_per_server(metrics: object) -> None:
    # The real host's load: 547 GiB of weights read in 664 s; its disk reads 5.5 GB/s sequentially.
    load = {"total_s": 712.4, "weights_load_s": 664.0, "weights_bytes": 547 * 2**30, "read_gb_per_s": 0.885}
    lines = ops.status_table([dict(ROW, metrics=metrics, kv_tokens_planned=116171, plan_calibrated=True,
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


def test_dd_rate_is_bytes_over_seconds_whatever_dd_rounds() -> None:
    assert ops.dd_rate("64+0 records in\n64+0 records out\n"
                       "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.195 s, 5.5 GB/s\n") == 5.506368
    assert ops.dd_rate("1073741824 bytes (1,1 GB, 1,0 GiB) copied, 0,195 s, 5,5 GB/s") == 5.506368  # de_DE
    assert ops.dd_rate("dd: failed to open 'x': Invalid argument") is None
    assert ops.dd_rate("0 bytes copied, 0.0001 s, 0.0 kB/s") is None
    assert ops.dd_rate(None) is None


def test_load_budget_raises_the_configured_values_to_what_the_last_load_needed() -> None:
    record = {"recorded_at": "2026-12-01T06:00:00Z", "identity": {"model_path": "/models/k", "tp_size": 8},
              "load": {"total_s": 712.4, "silence_s": {"loading_weights": 14.0, "cuda_graphs": 200.0}}}
    budget = ops.load_budget(record, {"model_path": "/models/k", "tp_size": 8}, 900,
                             {"loading_weights": 300, "cuda_graphs": "180"})
    assert budget == {"timeout": 1425, "stall_timeouts": {"loading_weights": 300, "cuda_graphs": 600},
                      "note": "learned from the load of 2026-12-01T06:00:00Z (712.4 s): budget 1425 s, cuda_graphs "
                              "600 s"}
    assert ops.load_budget(None, {}, 900, {})["note"] == "configured"


def test_files_to_copy_lists_what_the_host_lacks_or_holds_otherwise(tmp_path: Path) -> None:
    files_to_copy = ops.files_to_copy
    for name, content in (("a.whl", b"a"), ("b.whl", b"b"), ("c.whl", b"c")):
        (tmp_path / name).write_bytes(content)
    found = {"files": [{"path": "/opt/w/a.whl", "checksum": hashlib.sha1(b"a").hexdigest()},
                       {"path": "/opt/w/b.whl", "checksum": hashlib.sha1(b"old").hexdigest()},
                       {"path": "/opt/w/stale.whl", "checksum": "x"}]}
    assert [Path(p).name for p in files_to_copy(str(tmp_path), found)] == ["b.whl", "c.whl"]
    assert [Path(p).name for p in files_to_copy(str(tmp_path), {"files": []})] == ["a.whl", "b.whl", "c.whl"]
    all_there = {"files": [{"path": f"/w/{n}", "checksum": hashlib.sha1(n[0].encode()).hexdigest()}
                           for n in ("a.whl", "b.whl", "c.whl")]}
    assert files_to_copy(str(tmp_path), all_there) == []


def test_stamp_digest_covers_the_inputs_and_the_code(tmp_path: Path) -> None:
    role = tmp_path / "role"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text("---\n")
    base = ops.stamp_digest({"b": 1, "a": [1, 2]}, [str(role)])
    assert base == ops.stamp_digest({"a": [1, 2], "b": 1}, [str(role)])  # key order does not matter
    assert base != ops.stamp_digest({"a": [2, 1], "b": 1}, [str(role)])
    (role / "__pycache__").mkdir()
    (role / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (role / "tasks" / "y.pyc").write_bytes(b"\0")
    assert ops.stamp_digest({"b": 1, "a": [1, 2]}, [str(role)]) == base  # byte-code caches do not count
    (role / "tasks" / "main.yml").write_text("---\n# changed\n")
    assert ops.stamp_digest({"b": 1, "a": [1, 2]}, [str(role)]) != base
    with pytest.raises(AnsibleFilterError, match="is not a directory"):
        ops.stamp_digest({}, [str(tmp_path / "missing")])


def test_stamp_digest_of_the_trees_read_before_the_fork_is_the_streamed_one(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """before_fork (the prefork callback) keeps the collection's trees in memory: the digest is the same as when
    each worker reads them, and it is what the run started with."""
    monkeypatch.setattr(ops, "_TREES", {})
    (tmp_path / "plugins" / "filter").mkdir(parents=True)
    (tmp_path / "plugins" / "filter" / "f.py").write_text("x = 1\n")
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text("---\n")
    paths = [str(tmp_path / "roles" / "r"), str(tmp_path / "roles" / "r" / ".." / ".." / "plugins")]
    streamed = ops.stamp_digest({"a": 1}, paths)
    ops.before_fork(str(tmp_path))
    assert ops.stamp_digest({"a": 1}, paths) == streamed
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text("---\n# changed during the run\n")
    assert ops.stamp_digest({"a": 1}, paths) == streamed


ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("role", ["nvidia_driver", "sglang_stack", "sglang_weights"])
def test_role_dir_is_the_role_that_runs_and_keeps_the_stamps_digest(role: str) -> None:
    """role_dir replaced role_path in the install roles' code paths (deploy.yml decides their stamps outside
    them): it must name the same files, so that a host stamped before still converges (the same digest)."""
    assert Path(ops.role_dir(role)).samefile(ROOT / "roles" / role)
    before = [str(ROOT / "roles" / role), str(ROOT / "roles" / role / ".." / ".." / "plugins")]
    after = [ops.role_dir(role), ops.role_dir(role) + "/../../plugins"]
    assert ops.stamp_digest({"a": 1}, after) == ops.stamp_digest({"a": 1}, before)


@pytest.mark.parametrize("name", ["sglang_stak", "../roles/sglang_stack", ""])
def test_role_dir_refuses_a_role_the_collection_lacks(name: str) -> None:
    with pytest.raises(AnsibleFilterError, match=r"has no role .*it has .*sglang_stack"):
        ops.role_dir(name)


@pytest.mark.parametrize(("stamp", "enabled", "converged", "why"), [
    ({"found": True, "digest": "d", "drift": []}, True, True, ""),
    ({"found": True, "digest": "d", "drift": []}, False, False, "not trusted"),
    ({"found": False, "digest": None, "drift": ["no stamp: the role has not converged"]}, True, False, "no stamp"),
    (None, True, False, "no stamp was read"),
    ({"found": True, "digest": "old", "drift": []}, True, False, "its inputs changed"),
    ({"found": True, "digest": "d", "drift": ["path /a: x -> absent", "unit u: y -> z"]}, True, False,
     "the host moved since it last converged here: path /a: x -> absent; unit u: y -> z"),
])
def test_stamp_state(stamp: object, enabled: bool, converged: bool, why: str) -> None:
    state = ops.stamp_state(stamp, "d", enabled)
    assert state["converged"] is converged and state["digest"] == "d" and why in state["why"]
    assert bool(state["why"]) is not converged


# nvidia_driver's plan of a host serving 580.95.05 (roles/nvidia_driver/tasks/preflight_host.yml).
DRIVER = {"pin": "580.105.08", "packages": ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"],
          "installed": {"nvidia-driver-cuda": "580.95.05-1", "nvidia-kernel-open-dkms": "580.95.05-1"},
          "running": "580.95.05", "reboot_policy": "auto"}
AT_PIN = dict(DRIVER, installed={"nvidia-driver-cuda": "580.105.08-1", "nvidia-kernel-open-dkms": "580.105.08-1"},
              running="580.105.08")


def plan(*args: Any) -> dict[str, Any]:
    result = ops.restart_plan(*args)
    assert result.pop("files") == list(args[0] or [])
    assert result.pop("stale") == []  # nothing runs in these cases, or nothing says it is older than its files
    assert result.pop("rejoin") is False
    return result


def test_a_serving_host_takes_its_driver_change_in_its_batch_and_reboots() -> None:
    assert plan([], "active", DRIVER) == {
        "restart": True, "driver": True, "reboot": True, "why": ["driver 580.95.05 -> 580.105.08", "REBOOTS"]}
    # Installed at the pin but an older module still runs (an earlier run could not reboot): a reboot only.
    assert plan([], "active", dict(AT_PIN, running="580.95.05")) == {
        "restart": True, "driver": True, "reboot": True, "why": ["driver 580.105.08 installed, 580.95.05 running",
                                                                 "REBOOTS"]}
    # No driver runs at all (its module failed to load at the last boot): a reboot too.
    assert plan([], "active", dict(AT_PIN, running=None))["why"] == ["driver 580.105.08 installed, none running",
                                                                     "REBOOTS"]
    # A package left behind at another version is a change too.
    mixed = dict(AT_PIN, installed={"nvidia-driver-cuda": "580.105.08-1", "nvidia-kernel-open-dkms": "580.95.05-1"})
    assert plan([], "active", mixed)["why"][0] == "driver 580.105.08/580.95.05 -> 580.105.08"


def test_a_driver_change_is_made_in_place_when_nothing_serves_or_the_policy_never_reboots() -> None:
    assert plan([], "inactive", DRIVER) == {
        "restart": True, "driver": False, "reboot": False,
        "why": ["inactive: will be started", "driver 580.95.05 -> 580.105.08, in place (not serving)"]}
    assert plan([], "active", dict(DRIVER, reboot_policy="never")) == {
        "restart": False, "driver": False, "reboot": False,
        "why": ["driver 580.95.05 -> 580.105.08, in place (nvidia_driver_reboot_policy never)"]}
    container = dict(DRIVER, container=True)
    assert plan([], "active", container)["why"] == [
        "driver 580.95.05 -> 580.105.08, in place (a container that cannot reboot)"]
    assert plan([], "active", container, None, False, True)["reboot"] is True  # sglang_service_reboot_command
    # No driver installed yet (a first install), or no plan (the driver phase left out by --tags): nothing.
    assert plan([], "active", dict(DRIVER, installed={})) == {
        "restart": False, "driver": False, "reboot": False, "why": []}
    assert plan([], "active", None) == plan([], "active", {})


def test_new_files_restart_and_a_pending_reboot_waits_unless_allowed() -> None:
    files = ["/etc/systemd/system/sglang-kimi.service", "/etc/sglang/kimi.env"]
    assert plan(files, "active", AT_PIN) == {
        "restart": True, "driver": False, "reboot": False, "why": ["new sglang-kimi.service, kimi.env"]}
    pending = {"required": True, "packages": ["linux-image-6.1.0-41-amd64"]}
    assert plan([], "active", AT_PIN, pending) == {
        "restart": False, "driver": False, "reboot": False,
        "why": ["reboot pending (linux-image-6.1.0-41-amd64): left for playbooks/reboot.yml"]}
    assert plan([], "active", AT_PIN, pending, True) == {
        "restart": True, "driver": False, "reboot": True,
        "why": ["reboot pending (linux-image-6.1.0-41-amd64)", "REBOOTS"]}
    assert plan([], "failed", AT_PIN, {"required": True}, True) == {
        "restart": True, "driver": False, "reboot": False,
        "why": ["failed: will be started", "reboot pending (/run/reboot-required)"]}


def test_the_plan_says_what_changes_on_each_host() -> None:
    groups = dict(FLEET, sglang_rollout_restart=["w1", "w3"], sglang_rollout_keep=["a0", "a1", "w2", "w4"])
    why = {"w1": ["driver 580.95.05 -> 580.105.08", "REBOOTS"], "w3": ["new sglang-kimi.service"], "w2": [],
           "w4": ["reboot pending (/run/reboot-required): left for playbooks/reboot.yml"]}
    assert ops.rollout_plan(groups, 1, False, "restart", why) == (
        "ROLLOUT PLAN: 2 servers restart in 2 batches (sglang_rolling_serial 1), each drained, restarted and back "
        "before the next: batch 1: w1 (driver 580.95.05 -> 580.105.08; REBOOTS); batch 2: w3 (new "
        "sglang-kimi.service). Unchanged and serving, not drained: a0, a1, w2, w4 (reboot pending "
        "(/run/reboot-required): left for playbooks/reboot.yml).")


@given(state=st.sampled_from(["active", "activating", "inactive", "failed", ""]),
       installed=st.sampled_from(["580.95.05-1", "580.105.08-1", None]),
       running=st.sampled_from([None, "580.95.05", "580.105.08"]),
       policy=st.sampled_from(["auto", "always", "never"]),
       container=st.booleans(), pending=st.booleans(), allowed=st.booleans(), reboots_container=st.booleans())
def test_a_driver_change_in_the_batch_always_reboots_it(state: str, installed: str | None, running: str | None,
                                                        policy: str, container: bool, pending: bool, allowed: bool,
                                                        reboots_container: bool) -> None:
    """roles/sglang_service/tasks/rolling.yml takes the maintenance path on `reboot` alone: `driver` implies it."""
    driver = dict(DRIVER, installed=dict.fromkeys(DRIVER["packages"], installed) if installed else {},
                  running=running, reboot_policy=policy, container=container)
    result = ops.restart_plan([], state, driver, {"required": pending}, allowed, reboots_container)
    assert not result["driver"] or (result["reboot"] and result["restart"])


# --- a running server not started from the files on disk ----------------------------------------------------
UNIT = ("[Unit]\nDescription=SGLang server kimi\n\n[Service]\nType=simple\n"
        "ExecStart=/opt/sglang/0.5.23/venv/bin/python -m sglang.launch_server \\\n"
        "    --model-path /models/kimi-k2.5 \\\n    --hicache-ratio 3.0 \\\n    --served-model-name \"kimi k2.5\"\n"
        "KillMode=mixed\n")
ARGV = ["/opt/sglang/0.5.23/venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/models/kimi-k2.5",
        "--hicache-ratio", "3.0", "--served-model-name", "kimi k2.5"]
RUNNING = {"pid": 4242, "argv": ARGV, "started": 1796425664.0, "need_daemon_reload": False, "changed_after_start": []}


def test_a_server_running_what_its_unit_says_is_left_alone() -> None:
    assert ops.stale_process(RUNNING, UNIT) == []
    assert ops.restart_plan([], "active", None, None, False, False, RUNNING, UNIT)["restart"] is False


@pytest.mark.parametrize(("running", "why"), [
    (dict(RUNNING, argv=[*ARGV[:6], "2.0", *ARGV[7:]]),
     "the running server (PID 4242) was started with `--hicache-ratio 2.0`, its unit says `--hicache-ratio 3.0`"),
    (dict(RUNNING, argv=ARGV[:7]),
     "the running server (PID 4242) was started with `nothing more`, its unit says `--served-model-name 'kimi k2.5'`"),
    (dict(RUNNING, need_daemon_reload=True),
     "systemd still runs an older version of its unit file (NeedDaemonReload=yes)"),
    (dict(RUNNING, changed_after_start=["/etc/sglang/kimi.env"]),
     "the running server (PID 4242) started before kimi.env changed"),
])
def test_a_server_started_from_older_files_restarts_and_says_why(running: dict[str, Any], why: str) -> None:
    """What a deploy that died between writing the files and restarting the server leaves behind: each kind of
    evidence alone is enough, and the files themselves are in sync (no drift)."""
    assert ops.stale_process(running, UNIT) == [why]
    result = ops.restart_plan([], "activating", None, None, False, False, running, UNIT)
    assert result["restart"] is True and result["stale"] == [why] and result["why"] == [why]


@pytest.mark.parametrize("running", [
    dict(RUNNING, argv=None),                                    # /proc/<pid>/cmdline unreadable
    dict(RUNNING, argv=["sglang::main"]),                        # a process that rewrote its title
    dict(RUNNING, pid=0), None,                                  # nothing runs
])
def test_an_argv_that_is_no_launch_of_the_server_is_no_evidence(running: dict[str, Any] | None) -> None:
    assert ops.stale_process(running, UNIT) == []


def test_a_unit_systemd_would_fill_in_is_not_compared_by_argv() -> None:
    """A site template with a specifier or a variable in ExecStart: its argv is known only to systemd."""
    for text in (UNIT.replace("/models/kimi-k2.5", "/models/%i"), UNIT.replace("3.0", "${RATIO}")):
        assert ops.stale_process(dict(RUNNING, argv=["x", "sglang.launch_server"]), text) == []


def test_new_files_or_a_stopped_unit_need_no_other_evidence() -> None:
    older = dict(RUNNING, need_daemon_reload=True)
    files = ["/etc/systemd/system/sglang-kimi.service"]
    assert ops.restart_plan(files, "active", None, None, False, False, older, UNIT)["stale"] == []
    assert ops.restart_plan([], "inactive", None, None, False, False, older, UNIT)["stale"] == []


def test_the_restart_decision_renders_once_and_reads_the_host_once() -> None:
    files = [{"dest": "/etc/systemd/system/sglang-kimi.service", "template": "sglang.service.j2"},
             {"dest": "/etc/sglang/kimi.env", "template": "sglang.env.j2"}]
    env = 'CUDA_DEVICE_ORDER="PCI_BUS_ID"\n'
    deployed = {"files": {files[0]["dest"]: hashlib.sha1(UNIT.encode()).hexdigest(),
                          files[1]["dest"]: hashlib.sha1(env.encode()).hexdigest()},
                "unit": {"ActiveState": "active"}, "running": dict(RUNNING, argv=[*ARGV[:6], "2.0", *ARGV[7:]]),
                "reboot": {"required": False}}
    decided = ops.restart_decision([UNIT, env], files, deployed)
    assert decided["restart"] and decided["files"] == [] and "--hicache-ratio 2.0" in decided["stale"][0]
    in_sync = ops.restart_decision([UNIT, env], files, dict(deployed, running=RUNNING))
    assert in_sync["restart"] is False and in_sync["why"] == []
    changed = ops.restart_decision([UNIT, env + 'X="1"\n'], files, dict(deployed, running=RUNNING))
    assert changed["restart"] and changed["files"] == ["/etc/sglang/kimi.env"]


def test_the_status_table_says_stale_with_the_reasons() -> None:
    row = {"host": "gpu-node-1", "state": "active/running", "healthy": True, "health": 200, "uptime_s": 60,
           "restarts": 0, "version": "0.5.23", "drift": [], "stale": ["the running server (PID 1) started before "
                                                                      "kimi.env changed"], "metrics": {}}
    table = ops.status_table([row])
    assert " STALE " in table.splitlines()[2]
    assert table.splitlines()[-1] == "gpu-node-1: STALE: the running server (PID 1) started before kimi.env changed"
    assert " in sync " in ops.status_table([dict(row, stale=[])]).splitlines()[2]


def test_a_server_an_earlier_run_left_loading_is_waited_for_first() -> None:
    """Killed after the restart and before ready: the server runs its files (nothing to restart) but has not
    opened its port; it is out of service, so the rollout waits for it (rejoin) before it drains another."""
    loading = dict(RUNNING, listening=False)
    result = ops.restart_plan([], "active", None, None, False, False, loading, UNIT)
    assert result["restart"] is False and result["rejoin"] is True
    assert result["why"][0].startswith("still loading, started by an earlier run (its port is not open yet)")
    for running in (dict(RUNNING, listening=True), dict(RUNNING, listening=None), None):  # serving, or not known
        assert ops.restart_plan([], "active", None, None, False, False, running, UNIT)["rejoin"] is False
    # A server that must restart anyway (new files, older process) is not a rejoin.
    assert ops.restart_plan(["/etc/sglang/kimi.env"], "active", None, None, False, False, loading, UNIT)["rejoin"] \
        is False
    older = dict(loading, need_daemon_reload=True)
    assert ops.restart_plan([], "active", None, None, False, False, older, UNIT)["rejoin"] is False
