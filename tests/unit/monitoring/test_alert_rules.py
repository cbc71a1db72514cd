"""The alert rules, run by the real promtool (Debian's prometheus package, installed by scripts/setup.sh): every
alert fires on the series that describe its fault and stays quiet on the ones next to it (a normal restart, a
queue without a full cache, a rollout's host out of the router, ...).

The fleet: three servers behind one router, sglang_rolling_serial 1 (so the router must keep 2 healthy), a and
b with HiCache at ratio 2, c without HiCache. The series carry exactly the labels Prometheus gives them: the
file_sd target labels of sglang_monitoring's targets file, the instance, and SGLang 0.5.23's own metric labels
(sglang/srt/observability/metrics_collector.py "mc.py"): a scheduler gauge's (mc.py:1375-1396), one series per
TP rank where every scheduler writes it (the start-up constants), and the prefix cache counters' (cache_type,
tp_rank, pp_rank, dp_rank, mc.py:2416-2432), which every rank of the example's --tp-size 8 writes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.sglang.deploy.plugins.filter import monitoring as monitoring_filter
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_monitoring as mon

SCHEDULER = {"engine_type": "unified", "model_name": "kimi-k2.5", "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}
TP = 8  # the example's --tp-size
GROUPS = {"sglang_workers": ["a", "b", "c"], "sglang_routers": ["r"]}
ROUTER = "r:29000"


def fleet() -> list[mon.Server]:
    def one(host: str, hicache: bool) -> mon.Server:
        settings = {"enable_metrics": {"value": True}, "enable_hierarchical_cache": {"value": hicache}}
        if hicache:
            settings["hicache_ratio"] = {"value": 2.0}
        config = {"primary": True, "url": f"http://{host}:30000", "unit": "sglang-kimi.service",
                  "version": "0.5.23", "settings": settings}
        server = mon.server(host, config, 1080)
        assert server is not None
        return server
    return [one("a", True), one("b", True), one("c", False)]


SERVERS = fleet()
TARGET_LABELS = {group["targets"][0]: group["labels"] for group in mon.targets(SERVERS, [ROUTER], mon.options({}))}


def labels(host: str, **extra: str) -> dict[str, str]:
    """What Prometheus attaches to a sample scraped from server `host`."""
    instance = f"{host}:30000"
    return {**TARGET_LABELS[instance], "instance": instance, **extra}


def series(metric: str, values: str, **labels_: str) -> dict[str, str]:
    inner = ",".join(f'{key}="{value}"' for key, value in sorted(labels_.items()))
    return {"series": f"{metric}{{{inner}}}", "values": values}


def server_series(metric: str, host: str, values: str, rank: int = 0) -> dict[str, str]:
    return series(metric, values, **labels(host, **{**SCHEDULER, "tp_rank": str(rank)}))


def every_rank(metric: str, host: str, values: str) -> list[dict[str, str]]:
    """A scheduler gauge every rank writes (emit_constants: max_total_num_tokens, context_len, ...)."""
    return [server_series(metric, host, values, rank) for rank in range(TP)]


def cache_series(metric: str, host: str, values: str, **extra: str) -> list[dict[str, str]]:
    """A counter of the prefix cache (RadixCacheMetricsCollector): one series per rank, all counting alike."""
    return [series(metric, values, **labels(host, cache_type="UnifiedRadixCache", tp_rank=str(rank), pp_rank="0",
                                            dp_rank="0", **extra)) for rank in range(TP)]


def hicache(host: str, evicted: str, lost: str, reason: str = "write_through_unbacked_eviction",
            used: str = "232000x40") -> list[dict[str, str]]:
    """A HiCache server under write_through (reason write_through_unbacked_eviction) or write_back
    (host_pressure): its host pool used (of 232343 tokens, rank 0's log_stats) and, on every rank, the tokens
    evicted from GPU memory and the ones of them lost; the other reason's series stays at its pre-seeded 0."""
    other = "host_pressure" if reason != "host_pressure" else None
    return ([server_series("sglang:hicache_host_used_tokens", host, used),
             server_series("sglang:hicache_host_total_tokens", host, "232343x40")]
            + cache_series("sglang:evicted_tokens_total", host, evicted)
            + cache_series("sglang:hicache_dropped_tokens_total", host, lost, reason=reason, pool="kv")
            + (cache_series("sglang:hicache_dropped_tokens_total", host, "0x40", reason=other, pool="kv")
               if other else []))


def router_series(metric: str, values: str, **extra: str) -> dict[str, str]:
    return series(metric, values, job="sglang-router", instance=ROUTER, **extra)


def node_series(metric: str, values: str, **extra: str) -> dict[str, str]:
    return series(metric, values, job="node", instance="a:9100", **extra)


RULES = yaml.safe_load(monitoring_filter.alert_rules([s.__dict__ for s in SERVERS], [ROUTER], GROUPS, 1))


def annotations(alert: str, alert_labels: dict[str, str], value: str, only: dict[str, str] | None = None
                ) -> dict[str, str]:
    """The annotations Prometheus renders for the rule of `alert` that matches `only` (its static labels)."""
    rule = next(r for r in RULES["groups"][0]["rules"] if r["alert"] == alert
                and all(r["labels"].get(k) == v for k, v in (only or {}).items()))

    def render(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: alert_labels.get(m.group(1), ""), text)
        text = text.replace("{{ $value | humanizePercentage }}", f"{float(value) * 100:g}%")
        return text.replace("{{ $value }}", value)
    return {key: render(text) for key, text in rule["annotations"].items()}


def expect(alert: str, labels_: dict[str, str], value: str, only: dict[str, str] | None = None) -> dict[str, Any]:
    """An alert as promtool reports it: the rule's labels over the series' (the metric name dropped)."""
    rule = next(r for r in RULES["groups"][0]["rules"] if r["alert"] == alert
                and all(r["labels"].get(k) == v for k, v in (only or {}).items()))
    full = {**labels_, **rule["labels"]}
    return {"exp_labels": full, "exp_annotations": annotations(alert, full, value, only)}


def per_server(host: str) -> dict[str, str]:
    """The labels left by `max by (job, instance, sglang_host, sglang_unit)`."""
    return {"job": "sglang", "instance": f"{host}:30000", "sglang_host": host, "sglang_unit": "sglang-kimi.service"}


# (test name, input series, alert name, evaluation time, expected alerts)
CASES: list[tuple[str, list[dict[str, str]], str, str, list[dict[str, Any]]]] = [
    ("stuck loading past its budget fires",
     [series("up", "0x25", **labels("a"))], "SGLangServerNotServing", "19m",
     [expect("SGLangServerNotServing", labels("a"), "0")]),
    ("a restart within the load budget stays quiet",
     [series("up", "1x2 0x10 1x12", **labels("a"))], "SGLangServerNotServing", "24m", []),
    ("the KV cache full with a deep queue fires",
     [server_series("sglang:token_usage", "a", "0.9x10"), server_series("sglang:num_queue_reqs", "a", "100x10")],
     "SGLangKVCacheSaturated", "7m", [expect("SGLangKVCacheSaturated", per_server("a"), "0.9")]),
    ("a full cache without a queue stays quiet",
     [server_series("sglang:token_usage", "a", "0.96x10"), server_series("sglang:num_queue_reqs", "a", "3x10")],
     "SGLangKVCacheSaturated", "7m", []),
    ("a deep queue on a cache with room stays quiet",
     [server_series("sglang:token_usage", "a", "0.5x10"), server_series("sglang:num_queue_reqs", "a", "100x10")],
     "SGLangKVCacheSaturated", "7m", []),
    # The host pool is 99.85% used in every HiCache case: SGLang frees host slots only when a backup does not fit.
    ("a busy HiCache server with a full host pool that loses nothing stays quiet",
     hicache("a", evicted="0+6000x40", lost="0x40"), "SGLangHiCacheHostPoolPressure", "30m", []),
    ("an idle HiCache server with a full host pool stays quiet",
     hicache("a", evicted="600000x40", lost="1000x40"), "SGLangHiCacheHostPoolPressure", "30m", []),
    ("a host pool without room for a quarter of what the GPU evicts fires",
     hicache("a", evicted="0+6000x40", lost="0+1500x40"), "SGLangHiCacheHostPoolPressure", "30m",
     [expect("SGLangHiCacheHostPoolPressure", per_server("a"), "0.25")]),
    ("write-back drops for host memory pressure fire",
     hicache("b", evicted="0+6000x40", lost="0+3000x40", reason="host_pressure"),
     "SGLangHiCacheHostPoolPressure", "30m", [expect("SGLangHiCacheHostPoolPressure", per_server("b"), "0.5")]),
    ("a loss under the share on each of eight ranks stays quiet: ranks are not added",  # 8 x 4% would be 32%
     hicache("a", evicted="0+6000x40", lost="0+240x40"), "SGLangHiCacheHostPoolPressure", "30m", []),
    ("a loss that stops within the pressure window stays quiet",
     hicache("a", evicted="0+6000x40", lost="0+1500x10 15000x30"), "SGLangHiCacheHostPoolPressure", "30m", []),
    ("a unit systemd gave up on fires",
     [node_series("node_systemd_unit_state", "1x5", name="sglang-kimi.service", state="failed", type="simple")],
     "SGLangServiceFailed", "3m",
     [expect("SGLangServiceFailed", {"job": "node", "instance": "a:9100", "name": "sglang-kimi.service",
                                     "state": "failed", "type": "simple"}, "1")]),
    ("an active unit stays quiet",
     [node_series("node_systemd_unit_state", "0x5", name="sglang-kimi.service", state="failed", type="simple"),
      node_series("node_systemd_unit_state", "1x5", name="sglang-kimi.service", state="active", type="simple")],
     "SGLangServiceFailed", "3m", []),
    ("another unit failing stays quiet",
     [node_series("node_systemd_unit_state", "1x5", name="sglang-kimixservice", state="failed", type="simple")],
     "SGLangServiceFailed", "3m", []),
    ("three restarts in half an hour fire",
     [node_series("node_systemd_service_restart_total", "0 0 1 1 2 2 3 3 3 3 3", name="sglang-kimi.service")],
     "SGLangServiceRestarting", "10m",
     [expect("SGLangServiceRestarting", {"job": "node", "instance": "a:9100", "name": "sglang-kimi.service"}, "3")]),
    ("one restart stays quiet",
     [node_series("node_systemd_service_restart_total", "0 0 1 1 1 1 1 1 1 1 1", name="sglang-kimi.service")],
     "SGLangServiceRestarting", "10m", []),
    ("a router that does not answer fires",
     [router_series("up", "0x5")], "SGLangRouterDown", "3m", [expect("SGLangRouterDown", {
         "job": "sglang-router", "instance": ROUTER}, "0")]),
    ("a router that answers stays quiet", [router_series("up", "1x5")], "SGLangRouterDown", "3m", []),
    ("one healthy server of three fires",
     [router_series("up", "1x5"), router_series("smg_worker_health", "1x5", worker="http://a:30000"),
      router_series("smg_worker_health", "0x5", worker="http://b:30000"),
      router_series("smg_worker_health", "-1x5", worker="http://c:30000")],
     "SGLangRouterFewHealthyWorkers", "4m",
     [expect("SGLangRouterFewHealthyWorkers", {"job": "sglang-router", "instance": ROUTER}, "1")]),
    ("a router with no server registered fires",
     [router_series("up", "1x5")], "SGLangRouterFewHealthyWorkers", "4m",
     [expect("SGLangRouterFewHealthyWorkers", {"instance": ROUTER, "job": "sglang-router"}, "0")]),
    ("one server out for a rollout stays quiet",
     [router_series("up", "1x5"), router_series("smg_worker_health", "1x5", worker="http://a:30000"),
      router_series("smg_worker_health", "1x5", worker="http://b:30000"),
      router_series("smg_worker_health", "-1x5", worker="http://c:30000")],
     "SGLangRouterFewHealthyWorkers", "4m", []),
    ("a server running without the HiCache the repository enables fires",
     [series("up", "1x15", **labels("a")), server_series("sglang:max_total_num_tokens", "a", "100000x15")],
     "SGLangConfigDrift", "12m",
     [expect("SGLangConfigDrift", per_server("a"), "1", {"drift": "hicache_enabled"})]),
    ("a server running with the HiCache the repository disables fires",
     [series("up", "1x15", **labels("c")), server_series("sglang:hicache_host_total_tokens", "c", "200001x15")],
     "SGLangConfigDrift", "12m",
     [expect("SGLangConfigDrift", per_server("c"), "200001", {"drift": "hicache_disabled"})]),
    ("a host pool at another ratio than the repository's fires",
     [series("up", "1x15", **labels("a")), server_series("sglang:max_total_num_tokens", "a", "100000x15"),
      server_series("sglang:hicache_host_total_tokens", "a", "150001x15")],
     "SGLangConfigDrift", "12m",
     [expect("SGLangConfigDrift", per_server("a"), "0.49999", {"drift": "hicache_ratio"})]),
    ("eight ranks at the repository's ratio stay quiet",  # the KV pool from every rank, the host pool from rank 0
     [series("up", "1x15", **labels("a")), *every_rank("sglang:max_total_num_tokens", "a", "116171x15"),
      server_series("sglang:hicache_host_total_tokens", "a", "232343x15")],
     "SGLangConfigDrift", "12m", []),
    ("servers as the repository says stay quiet",
     [series("up", "1x15", **labels("a")), server_series("sglang:max_total_num_tokens", "a", "100000x15"),
      server_series("sglang:hicache_host_total_tokens", "a", "200001x15"),
      series("up", "1x15", **labels("c")), server_series("sglang:max_total_num_tokens", "c", "100000x15")],
     "SGLangConfigDrift", "12m", []),
]


def test_every_alert_has_a_case_that_fires_it_and_one_that_keeps_it_quiet() -> None:
    alerts = {rule["alert"] for rule in RULES["groups"][0]["rules"]}
    fired = {case[2] for case in CASES if case[4]}
    quiet = {case[2] for case in CASES if not case[4]}
    assert alerts == fired == quiet, (alerts, fired, quiet)
    drifts = {r["labels"]["drift"] for r in RULES["groups"][0]["rules"] if r["alert"] == "SGLangConfigDrift"}
    assert drifts == {"hicache_enabled", "hicache_disabled", "hicache_ratio"}


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: scripts/setup.sh installs Debian's prometheus package"
    return found


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules")
    (path / "sglang-alerts.yml").write_text(
        monitoring_filter.alert_rules([s.__dict__ for s in SERVERS], [ROUTER], GROUPS, 1))
    return path


def test_promtool_checks_the_rules(workdir: Path) -> None:
    result = subprocess.run([promtool(), "check", "rules", str(workdir / "sglang-alerts.yml")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RULES['groups'][0]['rules'])} rules found" in result.stdout


@pytest.mark.parametrize(("name", "inputs", "alert", "at", "alerts"), CASES, ids=[case[0] for case in CASES])
def test_promtool_runs_the_case(workdir: Path, name: str, inputs: list[dict[str, str]], alert: str, at: str,
                                alerts: list[dict[str, Any]]) -> None:
    test = {"rule_files": ["sglang-alerts.yml"], "evaluation_interval": "1m",
            "tests": [{"name": name, "interval": "1m", "input_series": inputs,
                       "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": alerts}]}]}
    path = workdir / (re.sub(r"\W+", "-", name) + ".yml")
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", path.name], cwd=workdir, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def pressure_rule(given: dict[str, Any]) -> dict[str, Any]:
    rules = mon.alert_rules(SERVERS, [ROUTER], 1, given)["groups"][0]["rules"]
    return next(rule for rule in rules if rule["alert"] == "SGLangHiCacheHostPoolPressure")


def test_the_pressure_rule_takes_its_share_window_and_duration() -> None:
    rule = pressure_rule({"hicache_dropped_share": "0", "hicache_pressure_window": "30m", "hicache_pressure_for": "1h"})
    assert rule["expr"].endswith(") > 0") and rule["expr"].count("[30m]") == 2 and rule["for"] == "1h"
    assert "sglang:hicache_host_used_tokens" not in rule["expr"]  # the used share is no alert: full by design
    default = pressure_rule({})
    assert default["expr"].endswith(") > 0.05") and default["expr"].count("[10m]") == 2 and default["for"] == "15m"


@pytest.mark.parametrize(("given", "message"), [
    ({"hicache_dropped_share": 1}, "sglang_monitoring_hicache_dropped_share: 1; allowed: a fraction in [0, 1)"),
    ({"hicache_dropped_share": -0.1}, "sglang_monitoring_hicache_dropped_share: -0.1; allowed: a fraction in [0, 1)"),
    ({"hicache_dropped_share": "some"}, "sglang_monitoring_hicache_dropped_share: some; allowed: a fraction"),
    ({"hicache_dropped_share": "nan"}, "sglang_monitoring_hicache_dropped_share: nan; allowed: a fraction"),
    ({"hicache_pressure_window": "ten minutes"},
     "sglang_monitoring_hicache_pressure_window: 'ten minutes'; allowed: a Prometheus duration"),
    ({"hicache_pressure_for": "15"}, "sglang_monitoring_hicache_pressure_for: '15'; allowed: a Prometheus duration"),
    ({"hicache_host_usage": 0.95}, "sglang_monitoring_hicache_host_usage: no longer an option; the HiCache host pool "
                                   "fills to ~100% by design"),
    ({"hicache_full_for": "15m"}, "sglang_monitoring_hicache_full_for: no longer an option; "
                                  "SGLangHiCacheHostPoolPressure waits sglang_monitoring_hicache_pressure_for"),
])
def test_a_bad_pressure_option_is_refused_by_its_variable(given: dict[str, Any], message: str) -> None:
    with pytest.raises(mon.MonitoringError) as raised:
        mon.options(given)
    assert message in str(raised.value)
