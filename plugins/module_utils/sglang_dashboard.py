# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's Grafana dashboard (JSON model, provisioning-ready): per server token usage, queue, running
requests, generation throughput, cache hit rate, the HiCache host pool and the KV it had no room for,
serving/loading and restarts; per router healthy servers and request rates. Its queries use the labels
sglang_monitoring's targets give (job, sglang_host) and the metric names of the pinned wheels
(tests/fixtures/metrics/)."""

from __future__ import annotations

from typing import Any

UID = "sglang-deploy-fleet"
SCHEMA_VERSION = 39  # Grafana 10.4 / 11's dashboard JSON model
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# (title, unit, [(expr, legend)], description): the server panels, one row per line of two.
SERVER_PANELS: list[tuple[str, str, list[tuple[str, str]], str]] = [
    ("KV cache token usage", "percentunit",
     [('max by (sglang_host) (sglang:token_usage{job="$server_job",sglang_host=~"$host"})', "{{sglang_host}}")],
     "Fraction of the GPU KV pool in use (SGLang's sglang:token_usage); the SGLangKVCacheSaturated alert "
     "fires above sglang_monitoring_token_usage with a queue."),
    ("Queued requests", "short",
     [('max by (sglang_host) (sglang:num_queue_reqs{job="$server_job",sglang_host=~"$host"})', "{{sglang_host}}")],
     "Requests waiting for KV cache or a running slot."),
    ("Running requests", "short",
     [('max by (sglang_host) (sglang:num_running_reqs{job="$server_job",sglang_host=~"$host"})',
       "{{sglang_host}}")],
     "Requests being decoded."),
    ("Generation throughput", "tokens/s",
     [('max by (sglang_host) (sglang:gen_throughput{job="$server_job",sglang_host=~"$host"})', "{{sglang_host}}")],
     "Tokens generated per second, as the scheduler last measured it."),
    ("Prefix cache hit rate", "percentunit",
     [('max by (sglang_host) (sglang:cache_hit_rate{job="$server_job",sglang_host=~"$host"})', "{{sglang_host}}")],
     "Share of prompt tokens served from the prefix cache (GPU and, with HiCache, host memory)."),
    ("HiCache host pool", "percentunit",
     [('max by (sglang_host) (sglang:hicache_host_used_tokens{job="$server_job",sglang_host=~"$host"})\n'
       '/ max by (sglang_host) (sglang:hicache_host_total_tokens{job="$server_job",sglang_host=~"$host"})',
       "{{sglang_host}}")],
     "Used share of the host-memory KV pool (SGLang 0.5.12 and later, with HiCache). It fills to ~100% by "
     "design and stays there, busy or idle: SGLang frees host slots only when a new backup does not fit. "
     "Pressure on it is the next panel."),
    ("HiCache: evicted KV lost for lack of host room", "percentunit",
     [('max by (sglang_host) (\n'
       '  sum without (reason, pool) (rate(sglang:hicache_dropped_tokens_total{job="$server_job",'
       'sglang_host=~"$host"}[5m]))\n'
       '  / rate(sglang:evicted_tokens_total{job="$server_job",sglang_host=~"$host"}[5m])\n)', "{{sglang_host}}")],
     "Share of the KV tokens evicted from GPU memory that were destroyed instead of kept in the host pool, on "
     "a server's worst rank (SGLang 0.5.19 and later, with HiCache; 0.5.19-0.5.22 count write_back drops only). "
     "SGLangHiCacheHostPoolPressure fires above sglang_monitoring_hicache_dropped_share."),
    ("Serving (1) or loading / down (0)", "short",
     [('max by (sglang_host) (up{job="$server_job",sglang_host=~"$host"})', "{{sglang_host}}")],
     "Whether /metrics answers: a server answers once its model is loaded; 0 for longer than its load budget "
     "fires SGLangServerNotServing."),
    ("Restarts by systemd (30 min)", "short",
     [('increase(node_systemd_service_restart_total{job="$node_job",name=~"sglang-.+\\\\.service"}[30m])',
       "{{instance}} {{name}}")],
     "From node_exporter's systemd collector with --collector.systemd.enable-restarts-metrics; empty without it."),
]

ROUTER_PANELS: list[tuple[str, str, list[tuple[str, str]], str]] = [
    ("Healthy servers per router", "short",
     [('sum by (instance) (smg_worker_health{job="$router_job"} == bool 1)', "{{instance}} healthy"),
      ('count by (instance) (smg_worker_health{job="$router_job"} >= 0)', "{{instance}} registered")],
     "Servers the router sends traffic to (smg_worker_health 1) and all it lists (0: failing its health checks; "
     "a removed server stays at -1); a rollout takes sglang_rolling_serial of them out at a time."),
    ("Router requests per second", "reqps",
     [('sum by (instance) (rate(smg_router_requests_total{job="$router_job"}[5m]))', "{{instance}}"),
      ('sum by (instance) (rate(smg_router_request_errors_total{job="$router_job"}[5m]))', "{{instance}} errors")],
     "Requests the router took and the ones it failed."),
    ("Router responses by status code", "reqps",
     [('sum by (status_code) (rate(smg_http_responses_total{job="$router_job"}[5m]))', "{{status_code}}")],
     "HTTP responses the router sent, per status code."),
]


def _panel(number: int, title: str, unit: str, queries: list[tuple[str, str]], description: str,
           x: int, y: int) -> dict[str, Any]:
    return {
        "id": number, "type": "timeseries", "title": title, "description": description,
        "datasource": DATASOURCE, "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
        "targets": [{"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": chr(ord("A") + i)}
                    for i, (expr, legend) in enumerate(queries)],
    }


def _row(number: int, title: str, y: int) -> dict[str, Any]:
    return {"id": number, "type": "row", "title": title, "collapsed": False, "panels": [],
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}}


def _constant(name: str, value: str, label: str) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "constant", "hide": 2, "query": value,
            "current": {"text": value, "value": value}, "options": [{"selected": True, "text": value, "value": value}]}


def _templating(server_job: str, router_job: str, node_job: str) -> dict[str, Any]:
    return {"list": [
        {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "options": []},
        _constant("server_job", server_job, "server job"),
        _constant("router_job", router_job, "router job"),
        _constant("node_job", node_job or "node", "node_exporter job"),
        {"name": "host", "label": "server", "type": "query", "datasource": DATASOURCE,
         "query": {"query": f'label_values(up{{job="{server_job}"}}, sglang_host)', "refId": "hosts"},
         "definition": f'label_values(up{{job="{server_job}"}}, sglang_host)',
         "includeAll": True, "multi": True, "allValue": ".+", "current": {}, "refresh": 2, "sort": 1,
         "hide": 0, "options": []},
    ]}


def dashboard(server_job: str = "sglang", router_job: str = "sglang-router", node_job: str = "node",
              title: str = "SGLang fleet") -> dict[str, Any]:
    """The dashboard JSON: a row of server panels (two per line), then a row of router panels."""
    panels: list[dict[str, Any]] = []
    y, number = 0, 1
    for row_title, specs in (("Servers", SERVER_PANELS), ("Routers", ROUTER_PANELS)):
        panels.append(_row(number, row_title, y))
        number, y = number + 1, y + 1
        for index, (title_, unit, queries, description) in enumerate(specs):
            panels.append(_panel(number, title_, unit, queries, description, 12 * (index % 2), y + 8 * (index // 2)))
            number += 1
        y += 8 * ((len(specs) + 1) // 2)
    return {
        "uid": UID, "title": title, "tags": ["sglang", "sglang-deploy"], "timezone": "browser",
        "schemaVersion": SCHEMA_VERSION, "version": 1, "editable": True, "graphTooltip": 1,
        "time": {"from": "now-6h", "to": "now"}, "refresh": "30s",
        "annotations": {"list": []}, "links": [], "templating": _templating(server_job, router_job, node_job),
        "panels": panels,
    }


def queries(model: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard model (its panels and its query variables)."""
    exprs = [target["expr"] for panel in model.get("panels", []) for target in panel.get("targets", [])]
    exprs += [var["definition"] for var in model.get("templating", {}).get("list", []) if var.get("type") == "query"]
    return exprs
