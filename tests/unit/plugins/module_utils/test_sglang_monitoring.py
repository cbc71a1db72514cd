"""What Prometheus watches of a resolved host, the options of the rules, and the routers' healthy floor."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.filter import monitoring as monitoring_filter
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_config
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_monitoring as mon
from helpers import BASE, CATALOGS
from hypothesis import given
from hypothesis import strategies as st


def resolved(**changes: Any) -> dict[str, Any]:
    config = sglang_config.resolve(dict(BASE, sglang_advertise_host="10.0.0.1", **changes), str(CATALOGS))
    assert config["ok"], config["errors"]
    return config


def test_a_resolved_host_gives_its_target_unit_budget_and_hicache() -> None:
    server = mon.server("gpu-node-1", resolved(), 1080)
    assert server == mon.Server(host="gpu-node-1", target="10.0.0.1:30000", unit="sglang-kimi.service",
                                version="0.5.23", load_budget=1080, hicache="on", hicache_ratio=2.0)
    assert server.labels("sglang")["sglang_hicache_ratio"] == "2"


def test_the_load_budget_override_wins_over_the_ready_timeout() -> None:
    server = mon.server("h", resolved(), 1080, 300)
    assert server is not None and server.load_budget == 300


@pytest.mark.parametrize(("changes", "hicache", "ratio"), [
    ({"sglang_hicache_enabled": False, "sglang_hicache_ratio": None}, "off", None),
    ({"sglang_hicache_ratio": None, "sglang_hicache_size": 30}, "on", None),  # the size decides: no ratio to check
    ({"sglang_hicache_ratio": 3.5}, "on", 3.5),
])
def test_what_the_drift_rules_expect(changes: dict[str, Any], hicache: str, ratio: float | None) -> None:
    server = mon.server("h", resolved(**changes), 1080)
    assert server is not None and (server.hicache, server.hicache_ratio) == (hicache, ratio)


def test_a_release_without_the_hicache_gauges_is_not_checked_for_drift() -> None:
    config = dict(resolved(), version="0.5.9")
    server = mon.server("h", config, 1080)
    assert server is not None and (server.hicache, server.hicache_ratio) == ("unobservable", None)


def test_hosts_without_metrics_are_not_watched() -> None:
    assert mon.server("h", resolved(sglang_enable_metrics=False), 1080) is None
    assert mon.server("h", dict(resolved(), primary=False), 1080) is None  # another rank of a multi-node server


def test_an_unusable_budget_or_address_is_refused_by_name() -> None:
    with pytest.raises(mon.MonitoringError, match="sglang_ready_timeout: 0 on h; allowed: seconds > 0"):
        mon.server("h", resolved(), 0)
    with pytest.raises(mon.MonitoringError, match="sglang_monitoring_load_budget: 'soon'"):
        mon.server("h", resolved(), 1080, "soon")
    with pytest.raises(mon.MonitoringError, match="sglang_advertise_host: empty on h"):
        mon.server("h", dict(resolved(), url=""), 1080)


@pytest.mark.parametrize(("given_", "message"), [
    ({"token_usage": 0}, "sglang_monitoring_token_usage: 0; allowed: a fraction in (0, 1]"),
    ({"hicache_dropped_share": "full"}, "sglang_monitoring_hicache_dropped_share: full; allowed: a fraction"),
    ({"hicache_dropped_share": 1}, "sglang_monitoring_hicache_dropped_share: 1; allowed: a fraction in [0, 1)"),
    ({"queue_depth": -1}, "sglang_monitoring_queue_depth: -1; allowed: an integer >= 0"),
    ({"saturated_for": "5 minutes"}, "sglang_monitoring_saturated_for: '5 minutes'; allowed: a Prometheus duration"),
    ({"server_job": ""}, "sglang_monitoring_server_job: ''; allowed: a job name"),
    ({"node_job": 'a"b'}, "sglang_monitoring_node_job: 'a\"b'; allowed: a job name"),
    ({"tresholds": 1}, "sglang_monitoring_tresholds: not an option of the rules"),
])
def test_bad_options_are_refused_by_their_variable(given_: dict[str, Any], message: str) -> None:
    with pytest.raises(mon.MonitoringError) as raised:
        mon.options(given_)
    assert message in str(raised.value)


@given(st.text(max_size=20))
def test_any_job_name_either_passes_whole_into_promql_or_is_refused(job: str) -> None:
    """A job name is pasted into label matchers: only names that cannot break out of the quotes pass."""
    try:
        opts = mon.options({"router_job": job})
    except mon.MonitoringError:
        return
    assert job and all(ch.isalnum() or ch in "_.:-" for ch in job)
    assert opts["router_job"] == job


def rules(groups: dict[str, list[str]], serial: Any, servers: int) -> list[dict[str, Any]]:
    records = [{"host": f"h{i}", "target": f"h{i}:30000", "unit": "sglang-kimi.service", "version": "0.5.23",
                "load_budget": 1080, "hicache": "on", "hicache_ratio": 2.0} for i in range(servers)]
    text = monitoring_filter.alert_rules(records, ["r:29000"], groups, serial)
    return yaml.safe_load(text)["groups"][0]["rules"]


def floor(found: list[dict[str, Any]]) -> int | None:
    rule = [r for r in found if r["alert"] == "SGLangRouterFewHealthyWorkers"]
    return int(rule[0]["expr"].rsplit("<", 1)[1]) if rule else None


def test_the_routers_healthy_floor_is_the_servers_a_rollout_leaves() -> None:
    four = {"sglang_workers": ["h0", "h1", "h2", "h3"]}
    assert floor(rules(four, 1, 4)) == 3
    assert floor(rules(four, 2, 4)) == 2
    assert floor(rules(four, "50%", 4)) == 2
    assert floor(rules(four, "100%", 4)) is None  # every server may be out at once: the rule would mean nothing
    # A multi-node server is one server of the router: two hosts, one batch, one server out.
    multinode = {"sglang_workers": ["h0", "m1", "m2"], "sglang_multinode_big": ["m1", "m2"]}
    assert floor(rules(multinode, 1, 2)) == 1


def test_a_bad_serial_is_refused_by_the_rules_too() -> None:
    with pytest.raises(AnsibleFilterError, match="sglang_rolling_serial"):
        rules({"sglang_workers": ["h0"]}, "0", 1)


def test_one_not_serving_rule_per_load_budget() -> None:
    servers = [mon.Server("a", "a:1", "u", "0.5.23", 1080, "on", 2.0),
               mon.Server("b", "b:1", "u", "0.5.23", 600, "on", 2.0)]
    found = mon.alert_rules(servers, [], 0)["groups"][0]["rules"]
    budgets = [(r["for"], r["labels"]["sglang_load_budget_seconds"]) for r in found
               if r["alert"] == "SGLangServerNotServing"]
    assert budgets == [("600s", "600"), ("1080s", "1080")]
    assert mon.alert_rules([], [], 0) == {"groups": []}
