# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Prometheus needs to watch the fleet, from the inventory: the scrape targets (with labels that name
each server's host, unit, load budget and HiCache), the alert rules, and a Grafana dashboard.

Metric names are the pinned wheels' (tests/fixtures/metrics/ records them per version, with the file and
line each is defined at): SGLang's scheduler gauges (``sglang:token_usage``, ``sglang:num_queue_reqs``, ...;
``sglang:hicache_host_*`` from 0.5.12, only with HiCache), its prefix cache's counters
(``sglang:evicted_tokens_total``; ``sglang:hicache_dropped_tokens_total`` from 0.5.19), sglang-router's
``smg_worker_health``, and, for the systemd state of the units, node_exporter's systemd collector
(``node_systemd_unit_state``; its ``node_systemd_service_restart_total`` needs
``--collector.systemd.enable-restarts-metrics``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import _field_rules

SERVER_JOB = "sglang"
ROUTER_JOB = "sglang-router"
# The first release whose scheduler exports the HiCache host pool gauges (tests/fixtures/metrics/).
HICACHE_METRICS_SINCE = (0, 5, 12)
# The first release whose prefix cache counts the KV it destroys without a host copy (tests/fixtures/metrics/).
HICACHE_DROPPED_SINCE = (0, 5, 19)

# Every option the rules read, with its default (the role's defaults/main.yml holds the same values).
DEFAULTS: dict[str, Any] = {
    "server_job": SERVER_JOB,
    "router_job": ROUTER_JOB,
    "node_job": "node",
    "load_budget": 0,
    "token_usage": 0.85,
    "queue_depth": 50,
    "saturated_for": "5m",
    "hicache_dropped_share": 0.05,
    "hicache_pressure_window": "10m",
    "hicache_pressure_for": "15m",
    "restarts": 3,
    "restart_window": "30m",
    "failed_for": "1m",
    "router_down_for": "1m",
    "router_workers_for": "2m",
    "drift_for": "10m",
    "hicache_ratio_tolerance": 0.02,
}

# Options that are gone, with what replaced them.
REMOVED: dict[str, str] = {
    "hicache_host_usage": "the HiCache host pool fills to ~100% by design, so its used share fires no alert; "
                          "SGLangHiCacheHostPoolPressure fires on the share of evicted KV the host pool had no "
                          "room for: sglang_monitoring_hicache_dropped_share",
    "hicache_full_for": "SGLangHiCacheHostPoolPressure waits sglang_monitoring_hicache_pressure_for",
}


class MonitoringError(ValueError):
    """An input the rules cannot be made from; the message names the variable."""


@dataclass(frozen=True)
class Server:
    """One served model as Prometheus sees it: its rank-0 host's /metrics."""

    host: str
    target: str
    unit: str
    version: str
    load_budget: int
    hicache: str  # on / off / unobservable (a release without the HiCache gauges)
    hicache_ratio: float | None  # the ratio SGLang must run with, when the repository fixes one
    scheme: str = "http"  # https with TLS on the server (sglang_tls_cert): the scheme of its url, _live.scheme's

    def labels(self, server_job: str) -> dict[str, str]:
        labels = {"job": server_job, "sglang_host": self.host, "sglang_unit": self.unit,
                  "sglang_version": self.version, "sglang_load_budget_seconds": str(self.load_budget),
                  "sglang_hicache": self.hicache}
        if self.scheme != "http":
            labels["__scheme__"] = self.scheme  # Prometheus scrapes this target over https (tls_config: its CA)
        if self.hicache_ratio is not None:
            labels["sglang_hicache_ratio"] = number(self.hicache_ratio)
        return labels


def number(value: float) -> str:
    """A number as PromQL and a label read it: 2.0 -> "2", 0.85 -> "0.85"."""
    return f"{float(value):g}"


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("+", maxsplit=1)[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _setting(config: dict[str, Any], dest: str) -> Any:
    return ((config.get("settings") or {}).get(dest) or {}).get("value")


def server(host: str, config: dict[str, Any], ready_timeout: Any, load_budget: Any = 0) -> Server | None:
    """The server of a resolved host (role sglang_config's sglang_config), or None when Prometheus has nothing
    to scrape there: not rank 0 of its server, or metrics turned off (SGLang serves /metrics only with
    --enable-metrics)."""
    if not config.get("primary") or not _setting(config, "enable_metrics"):
        return None
    scheme, _sep, target = str(config.get("url") or "").rpartition("://")
    if not target:
        raise MonitoringError(f"sglang_advertise_host: empty on {host}; allowed: the address Prometheus scrapes")
    budget = _seconds(load_budget, "sglang_monitoring_load_budget") or _seconds(ready_timeout, "sglang_ready_timeout")
    if budget <= 0:
        raise MonitoringError(f"sglang_ready_timeout: {ready_timeout!r} on {host}; allowed: seconds > 0")
    version = str(config.get("version") or "")
    enabled = bool(_setting(config, "enable_hierarchical_cache"))
    observable = _version(version) >= HICACHE_METRICS_SINCE
    ratio = _setting(config, "hicache_ratio")
    fixed = enabled and observable and ratio is not None and not _setting(config, "hicache_size")
    return Server(host=host, target=target, unit=str(config.get("unit") or ""), version=version,
                  load_budget=budget, hicache=("on" if enabled else "off") if observable else "unobservable",
                  hicache_ratio=float(ratio) if fixed else None, scheme=scheme or "http")


def _seconds(value: Any, name: str) -> int:
    if value in (None, ""):
        return 0
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        raise MonitoringError(f"{name}: {value!r} is not a number of seconds; allowed: an integer >= 0") from None
    if seconds < 0:
        raise MonitoringError(f"{name}: {value!r} is negative; allowed: an integer >= 0")
    return seconds


def options(given: dict[str, Any] | None) -> dict[str, Any]:
    """The rules' options: the defaults overlaid with what is given, each checked."""
    merged = dict(DEFAULTS)
    for key, value in (given or {}).items():
        if key in REMOVED:
            raise MonitoringError(f"sglang_monitoring_{key}: no longer an option; {REMOVED[key]}")
        if key not in DEFAULTS:
            raise MonitoringError(f"sglang_monitoring_{key}: not an option of the rules; allowed: "
                                  + ", ".join(f"sglang_monitoring_{k}" for k in DEFAULTS))
        merged[key] = value
    for key in ("token_usage", "hicache_ratio_tolerance"):
        merged[key] = _number(key, merged[key], float, "a fraction in (0, 1]", lambda v: 0 < v <= 1)
    # A share of the evicted tokens: 0 fires on any loss; 1 or more could never be exceeded.
    merged["hicache_dropped_share"] = _number("hicache_dropped_share", merged["hicache_dropped_share"], float,
                                              "a fraction in [0, 1) (0: any evicted KV lost)",
                                              lambda v: 0 <= v < 1)
    for key in ("queue_depth", "restarts", "load_budget"):
        merged[key] = _number(key, merged[key], int, "an integer >= 0", lambda v: v >= 0)
    # The job names and the durations: the rules the up-front check applies (one home, _field_rules).
    for key in [*("server_job", "router_job", "node_job"), *(k for k in merged if k.endswith(("_for", "_window")))]:
        rule = _field_rules.RULES[f"sglang_monitoring_{key}"]
        if not rule.accepts(merged[key]):
            raise MonitoringError(f"sglang_monitoring_{key}: {merged[key]!r}; allowed: {rule.allowed}")
    return merged


def _number(key: str, value: Any, kind: type, allowed: str, good: Any) -> Any:
    try:
        number_ = kind(value)
    except (TypeError, ValueError):
        number_ = None
    if number_ is None or not good(number_):
        raise MonitoringError(f"sglang_monitoring_{key}: {value}; allowed: {allowed}")
    return number_


def targets(servers: list[Server], routers: list[str], opts: dict[str, Any]) -> list[dict[str, Any]]:
    """Prometheus file_sd: one group per server (its labels name it in alerts), one for the routers."""
    groups = [{"targets": [s.target], "labels": s.labels(opts["server_job"])} for s in servers]
    if routers:
        groups.append({"targets": list(routers), "labels": {"job": opts["router_job"]}})
    return groups


# ---- alert rules --------------------------------------------------------------------------------------

# What the descriptions tell the operator to run.
_HOST = "{{ $labels.sglang_host }}"
_STATUS = "`ansible-playbook playbooks/status.yml`"
_ROUTERS = "`ansible-playbook deploy.yml --tags router`"


def _deploy(args: str) -> str:
    return f"`ansible-playbook deploy.yml {args}`".replace(" `", "`")


def _ratio_hint(ratio: str) -> str:
    return (f"`ansible-playbook playbooks/plan.yml -e hicache_ratio={ratio}` shows what the hosts hold, "
            f"{_deploy('-e hicache_ratio=' + ratio)} rolls it")


def _by(job: str) -> str:
    return f'{{job="{job}"}}'


def _alert(name: str, expr: str, duration: str, severity: str, summary: str, description: str,
           **labels: str) -> dict[str, Any]:
    """One rule; `labels` tell apart the rules of one alert (promtool refuses two with the same labels)."""
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if duration:
        rule["for"] = duration
    rule["labels"] = {"severity": severity, **labels}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def server_rules(servers: list[Server], o: dict[str, Any]) -> list[dict[str, Any]]:
    """Stuck loading or down, KV cache saturated with a queue, a HiCache host pool without room."""
    job = o["server_job"]
    rules = []
    for budget in sorted({s.load_budget for s in servers}):
        rules.append(_alert(
            "SGLangServerNotServing",
            f'up{{job="{job}",sglang_load_budget_seconds="{budget}"}} == 0', f"{budget}s", "critical",
            "{{ $labels.sglang_host }}: {{ $labels.sglang_unit }} has not served for longer than a load "
            f"({budget} s)",
            f"No answer on /metrics for {budget} s, the load budget of this server (sglang_ready_timeout): it is "
            f"stuck loading, crash-looping or stopped. {_STATUS[:-1]} --limit {_HOST}` shows the unit and its last "
            "load phase; `journalctl -u {{ $labels.sglang_unit }}` why. A deploy rolled back a start that failed; "
            f"once the cause is fixed, {_deploy('--limit ' + _HOST)} starts it again.",
            sglang_load_budget_seconds=str(budget)))
    per_server = "max by (job, instance, sglang_host, sglang_unit)"
    rules.append(_alert(
        "SGLangKVCacheSaturated",
        f"{per_server} (sglang:token_usage{_by(job)}) > {number(o['token_usage'])}\n"
        f"and on (instance) {per_server} (sglang:num_queue_reqs{_by(job)}) > {int(o['queue_depth'])}",
        o["saturated_for"], "warning",
        "{{ $labels.sglang_host }}: KV cache {{ $value | humanizePercentage }} used with requests queued",
        f"Token usage above {number(o['token_usage'])} (sglang_monitoring_token_usage) with more than "
        f"{int(o['queue_depth'])} requests waiting (sglang_monitoring_queue_depth) for {o['saturated_for']}: "
        "requests wait for KV cache. More KV per server: HiCache (sglang_hicache_enabled) and a larger "
        f"hicache_ratio - {_ratio_hint('3.0')}; or more servers in sglang_workers."))
    rules.append(_hicache_pressure(job, o))
    return rules


def _hicache_pressure(job: str, o: dict[str, Any]) -> dict[str, Any]:
    """SGLangHiCacheHostPoolPressure: the share of the KV tokens evicted from GPU memory that were destroyed
    because the host pool had no room for them, on the worst rank of a server.

    Why not the pool's used share: SGLang 0.5.23 frees host slots only when a new backup does not fit
    (mem_cache/unified_radix_cache.py:1745-1749 evict_host(needed)), and write_through backs up on the first
    insert (unified_radix_cache.py:558-560), so sglang:hicache_host_used_tokens / _total_tokens climbs to ~1.0
    and stays there on any server that has seen ratio x its KV pool, busy or idle.

    What sglang:hicache_dropped_tokens_total{reason,pool} counts (observability/metrics_collector.py:2606-2614;
    pool is always "kv"), both reasons pre-seeded at 0 when HiCache runs (unified_radix_cache.py:565-575):
    - reason="write_through_unbacked_eviction" (write_through, host_memory_mode cache,
      unified_radix_cache.py:1060-1065): the GPU evicted tokens that had no host copy
      (unified_radix_cache.py:908-914, 923-929; mem_cache/unified_cache/unified_tree_core.py:2247-2252). A
      write_through backup is locked until its copy lands (unified_radix_cache.py:1707-1709), so a node is
      left without one only when its backup found no host room: the pool was full and evict_host could not
      free enough (unified_radix_cache.py:1745-1749, or the allocation failed,
      managers/cache_controller.py:876-878), since only evicted, unlocked host leaves can go
      (unified_tree_core.py:2366-2385) - the host pool holds little more than copies of what the GPU holds.
    - reason="host_pressure" (write_back): a write-back at eviction failed for host memory pressure and the
      subtree was dropped (unified_radix_cache.py:1030-1046, 939-950).
    Both are lost prefixes that later requests recompute: host-pool pressure. The alert divides them by
    sglang:evicted_tokens_total (metrics_collector.py:2534, the Full-layer tokens of every device eviction,
    backed up or not, unified_radix_cache.py:833-834, base_prefix_cache.py:419-424), so the threshold is a
    share whatever the traffic. Both counters are written by EVERY scheduler rank with the labels cache_type,
    tp_rank, pp_rank, dp_rank (metrics_collector.py:2416-2432); the TP (and PP) ranks of one cache count the
    same logical tokens, each for its shard, so the share is taken per rank and the server's is its worst rank
    (max), never a sum over ranks. 0.5.19-0.5.22 count only write_back drops, on counters without rank labels
    that the multiprocess registry adds over ranks - numerator and denominator alike, so the share holds.
    """
    window, per_server = o["hicache_pressure_window"], "max by (job, instance, sglang_host, sglang_unit)"
    share = number(o["hicache_dropped_share"])
    return _alert(
        "SGLangHiCacheHostPoolPressure",
        f"{per_server} (\n"
        f"  sum without (reason, pool) (rate(sglang:hicache_dropped_tokens_total{_by(job)}[{window}]))\n"
        f"  / rate(sglang:evicted_tokens_total{_by(job)}[{window}])\n"
        f") > {share}",
        o["hicache_pressure_for"], "warning",
        "{{ $labels.sglang_host }}: HiCache host pool without room, {{ $value | humanizePercentage }} of the "
        "evicted KV lost",
        f"Over {window}, more than {share} (sglang_monitoring_hicache_dropped_share) of the KV tokens evicted from "
        "GPU memory were destroyed instead of kept in the host pool (sglang:hicache_dropped_tokens_total over "
        f"sglang:evicted_tokens_total), for {o['hicache_pressure_for']}: the host pool has no room for what the "
        "GPU evicts, and the requests that come back for those prefixes recompute them. A larger host pool, if "
        f"the host's memory allows: {_ratio_hint('N')} (or sglang_hicache_size). The host pool's used share "
        "(sglang:hicache_host_used_tokens) stays near 100% by design and says nothing of this.")


def systemd_rules(servers: list[Server], o: dict[str, Any]) -> list[dict[str, Any]]:
    """The units' systemd state, through node_exporter's systemd collector (none without sglang_monitoring_node_job)."""
    units = sorted({s.unit for s in servers if s.unit})
    if not o["node_job"] or not units:
        return []
    names = "|".join(unit.replace(".", "\\\\.") for unit in units)
    select = f'job="{o["node_job"]}",name=~"{names}"'
    return [
        _alert("SGLangServiceFailed", f'node_systemd_unit_state{{{select},state="failed"}} == 1', o["failed_for"],
               "critical", "{{ $labels.instance }}: systemd gave up restarting {{ $labels.name }}",
               "The unit failed and stays failed: it crashed sglang_service_start_limit_burst times within "
               "sglang_service_start_limit_interval (a crash loop), or a start timed out. `journalctl -u "
               "{{ $labels.name }}` says why; once fixed, " + _deploy("") + " starts it (it resets the failed "
               "state)."),
        _alert("SGLangServiceRestarting",
               f"increase(node_systemd_service_restart_total{{{select}}}[{o['restart_window']}]) "
               f">= {int(o['restarts'])}", "", "warning",
               "{{ $labels.instance }}: {{ $labels.name }} restarted {{ $value }} times in "
               f"{o['restart_window']}",
               f"systemd restarted the server at least {int(o['restarts'])} times (sglang_monitoring_restarts) in "
               f"{o['restart_window']}: each restart is a full model load. `journalctl -u {{{{ $labels.name }}}}` "
               "shows the exits; node_exporter needs --collector.systemd.enable-restarts-metrics for this alert."),
    ]


def router_rules(servers: list[Server], routers: list[str], unavailable: int,
                 o: dict[str, Any]) -> list[dict[str, Any]]:
    """A router down, or with fewer healthy servers than a rollout leaves serving."""
    if not routers:
        return []
    job = o["router_job"]
    rules = [_alert(
        "SGLangRouterDown", f"up{_by(job)} == 0", o["router_down_for"], "critical",
        "{{ $labels.instance }}: sglang-router does not answer on its metrics port",
        "The router serves no request while it is down. `systemctl status sglang-router` on the router host; "
        f"{_ROUTERS} installs and starts it again.")]
    least = len(servers) - unavailable
    if least > 0:
        healthy = f"sum by (job, instance) (smg_worker_health{_by(job)} == bool 1)"
        rules.append(_alert(
            "SGLangRouterFewHealthyWorkers",
            f"({healthy}\n or on (instance) (up{_by(job)} == 1) * 0) < {least}",
            o["router_workers_for"], "critical",
            "{{ $labels.instance }}: {{ $value }} healthy servers, fewer than the "
            f"{least} a rollout leaves serving",
            f"Of the {len(servers)} servers of the inventory, a rollout takes at most {unavailable} out of the "
            f"routers at a time (sglang_rolling_serial), so at least {least} must be healthy. Fewer for "
            f"{o['router_workers_for']}: servers failed or were left out. {_STATUS} shows each "
            f"server and the routers' view; {_ROUTERS} registers the inventory's servers again."))
    return rules


def drift_rules(servers: list[Server], o: dict[str, Any]) -> list[dict[str, Any]]:
    """A server whose running HiCache differs from the repository's: on/off, and the ratio it was given."""
    job = o["server_job"]
    per_server = "max by (job, instance, sglang_host, sglang_unit)"

    def description(what: str) -> str:
        return (f"The repository says {what}. The server runs otherwise: it was started by hand or from an edited "
                f"unit, or a deploy did not finish. {_deploy('--check --diff --limit ' + _HOST)} shows what "
                f"differs; {_deploy('')} rolls the repository's configuration out.")

    rules = []
    if any(s.hicache == "on" for s in servers):
        rules.append(_alert(
            "SGLangConfigDrift",
            f'{per_server} (up{{job="{job}",sglang_hicache="on"}}) == 1\n'
            f"unless on (instance) sglang:hicache_host_total_tokens{_by(job)}", o["drift_for"], "warning",
            "{{ $labels.sglang_host }}: runs without HiCache, the repository enables it",
            description("sglang_hicache_enabled: true"), drift="hicache_enabled"))
    if any(s.hicache == "off" for s in servers):
        rules.append(_alert(
            "SGLangConfigDrift",
            f'{per_server} (sglang:hicache_host_total_tokens{{job="{job}",sglang_hicache="off"}})',
            o["drift_for"], "warning", "{{ $labels.sglang_host }}: runs with HiCache, the repository disables it",
            description("sglang_hicache_enabled: false"), drift="hicache_disabled"))
    tolerance = float(o["hicache_ratio_tolerance"])
    for ratio in sorted({s.hicache_ratio for s in servers if s.hicache_ratio is not None}):
        select = f'job="{job}",sglang_hicache_ratio="{number(ratio)}"'
        rules.append(_alert(
            "SGLangConfigDrift",
            f"abs({per_server} (sglang:hicache_host_total_tokens{{{select}}})\n"
            f"    / {per_server} (sglang:max_total_num_tokens{{{select}}}) - {number(ratio)}) "
            f"> {number(ratio * tolerance)}",
            o["drift_for"], "warning",
            "{{ $labels.sglang_host }}: HiCache host pool is not " + number(ratio) + " x the KV pool",
            description(f"hicache_ratio {number(ratio)} (the host pool {number(ratio)} times the GPU "
                        "KV pool, within sglang_monitoring_hicache_ratio_tolerance)"),
            drift="hicache_ratio", sglang_hicache_ratio=number(ratio)))
    return rules


def alert_rules(servers: list[Server], routers: list[str], unavailable: int, given: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    """The rule file: one group of every alert, each with what to do in its description."""
    o = options(given)
    rules = (server_rules(servers, o) + systemd_rules(servers, o) + router_rules(servers, routers, unavailable, o)
             + drift_rules(servers, o))
    return {"groups": [{"name": "sglang-deploy", "rules": rules}]} if servers else {"groups": []}
