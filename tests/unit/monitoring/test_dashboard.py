"""The dashboard and the rules read metrics that exist: every name in their PromQL is in the pinned wheels' metric
lists (tests/fixtures/metrics/, read from the wheels on PyPI) for the versions that can run it (the simulator's
side: tests/simulator/test_sim_metrics.py); and the dashboard JSON has the structure Grafana's model requires."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_dashboard, sglang_monitoring
from helpers import ROOT
from promql import all_queries, names

FIXTURES = ROOT / "tests" / "fixtures" / "metrics"
PINNED_SGLANG = sorted(p.name.removeprefix("sglang-").removesuffix(".txt")
                       for p in (ROOT / "roles" / "sglang_stack" / "files" / "constraints").glob("sglang-*.txt"))
BUILTIN = {"up"}


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_the_fixtures_cover_every_pinned_release() -> None:
    assert PINNED_SGLANG, "no pinned SGLang releases found"
    for version in PINNED_SGLANG:
        data = fixture(f"sglang-{version}")
        assert data["version"] == version and data["source"] and data["metrics"]
    assert fixture("sglang-router-0.3.2")["metrics"]
    assert fixture("node-exporter-systemd")["metrics"]


def test_the_name_reader_finds_metrics_and_nothing_else() -> None:
    assert names('max by (job, instance) (sglang:token_usage{job="x"}) > 0.85 and on (instance) '
                 "sglang:num_queue_reqs > 5") == {"sglang:token_usage", "sglang:num_queue_reqs"}
    assert names('increase(node_systemd_service_restart_total{name=~"a\\\\.b"}[30m]) >= 3') == {
        "node_systemd_service_restart_total"}
    assert names('label_values(up{job="sglang"}, sglang_host)') == {"up"}


def known(name: str) -> list[str]:
    """The versions of the pinned packages that export `name` (empty: none does)."""
    if name in BUILTIN:
        return ["prometheus"]
    if name.startswith("sglang:"):
        return [v for v in PINNED_SGLANG if name in fixture(f"sglang-{v}")["metrics"]]
    if name.startswith("smg_"):
        return ["0.3.2"] if name in fixture("sglang-router-0.3.2")["metrics"] else []
    if name.startswith("node_"):
        return ["node_exporter"] if name in fixture("node-exporter-systemd")["metrics"] else []
    return []


# The SGLang metrics that came after the oldest pinned release, with the first release that has them.
SINCE = {"sglang:hicache_host_used_tokens": sglang_monitoring.HICACHE_METRICS_SINCE,
         "sglang:hicache_host_total_tokens": sglang_monitoring.HICACHE_METRICS_SINCE,
         "sglang:hicache_dropped_tokens_total": sglang_monitoring.HICACHE_DROPPED_SINCE}


@pytest.mark.parametrize("expr", all_queries())
def test_every_metric_of_every_query_exists_in_the_pinned_wheels(expr: str) -> None:
    for name in names(expr):
        versions = known(name)
        if name.startswith("sglang:"):
            since = SINCE.get(name, (0,))
            assert versions == [v for v in PINNED_SGLANG if tuple(map(int, v.split("."))) >= since], (name, versions)
        else:
            assert versions, name


def test_the_hicache_metrics_the_rules_read_are_dated() -> None:
    """A metric the queries read that not every pinned release has must say since when (SINCE)."""
    read = {name for expr in all_queries() for name in names(expr) if name.startswith("sglang:hicache_")}
    assert read == set(SINCE)


def test_the_dashboard_is_a_well_formed_grafana_model() -> None:
    model = json.loads(json.dumps(sglang_dashboard.dashboard()))  # what the JSON file holds
    assert model["uid"] and model["title"] and isinstance(model["schemaVersion"], int)
    panels = model["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    variables = {var["name"] for var in model["templating"]["list"]}
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["type"] == "timeseries" and panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids))
        for target in panel["targets"]:
            used = set(re.findall(r"\$\{?(\w+)", target["expr"] + target["legendFormat"]))
            assert used <= variables, (panel["title"], used - variables)
    # Panels do not overlap: each cell of the grid belongs to one panel at most.
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        xs, ys = range(grid["x"], grid["x"] + grid["w"]), range(grid["y"], grid["y"] + grid["h"])
        mine = {(x, y) for x in xs for y in ys}
        assert not cells & mine, panel["title"]
        cells |= mine


def test_the_dashboard_selects_the_jobs_the_variables_name() -> None:
    model = sglang_dashboard.dashboard("srv", "rtr", "")
    jobs = {var["name"]: var["query"] for var in model["templating"]["list"] if var["type"] == "constant"}
    assert jobs == {"server_job": "srv", "router_job": "rtr", "node_job": "node"}
    assert 'label_values(up{job="srv"}, sglang_host)' in sglang_dashboard.queries(model)
