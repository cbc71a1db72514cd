# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of a server's status: SGLang's /metrics read into one number per gauge, the disk's read rate, and
status.yml's table. Each filter is documented in its sidecar file, <filter>.yml."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import _prometheus
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_types import positive_number

# How status.yml reads each SGLang gauge it shows (by its name after "sglang:"), as a real 0.5.23 server writes
# it (sglang/srt/observability/metrics_collector.py, "mc.py", and managers/scheduler.py of 0.5.23):
# - every scheduler process has its own series, labelled engine_type, model_name, tp_rank, pp_rank, moe_ep_rank,
#   + dp_rank with --dp-size > 1, + priority="" with --enable-priority-scheduling (mc.py:1375-1396);
# - the start-up constants (max_total_num_tokens, context_len, page_size, ...) come from EVERY scheduler, one
#   equal series per TP rank (emit_constants mc.py:1769-1800, called by scheduler.py:631 and 1278-1282);
# - the others come from attention-TP rank 0 of each DP rank, or from every rank with
#   --enable-metrics-for-all-schedulers (mc.py:1362-1367), so the TP ranks of one DP rank repeat its values;
# - a queue count also writes one series per priority beside its total under priority="" (mc.py:1415-1429).
PER_RANK = "per rank"          # one rank's pool or share: the largest rank's (the fullest DP rank with DP)
SERVER_TOTAL = "server total"  # a DP rank's part of the server's work: one TP rank's per dp_rank, added up
ADDED = "added"                # counters and histograms, and gauges of one writer split by a label: the sum
STATUS_GAUGES: dict[str, str] = {
    "num_running_reqs": SERVER_TOTAL, "num_queue_reqs": SERVER_TOTAL, "gen_throughput": SERVER_TOTAL,
    "token_usage": PER_RANK, "num_used_tokens": PER_RANK, "max_total_num_tokens": PER_RANK,
    "hicache_host_used_tokens": PER_RANK, "hicache_host_total_tokens": PER_RANK, "cache_hit_rate": PER_RANK,
}
_PREFIX = "sglang:"


def metrics(text: Any, names: Any = None) -> dict[str, float]:
    """SGLang's Prometheus text -> {name: value}, each name aggregated over its series as what it is (see
    STATUS_GAUGES), for STATUS_GAUGES or the names given."""
    page = str(text or "")
    families = _prometheus.types(page)
    found = _prometheus.series(page, prefix=_PREFIX, names=STATUS_GAUGES if names is None else names)
    return {name: _aggregate(samples, _kind(name, samples, families)) for name, samples in found.items()}


def _kind(name: str, samples: list[_prometheus.Sample], families: dict[str, str]) -> str:
    """How a name is aggregated: as STATUS_GAUGES says, else by its TYPE and whether schedulers write it."""
    if name in STATUS_GAUGES:
        return STATUS_GAUGES[name]
    kind = _prometheus.type_of(_PREFIX + name, families)
    if kind in ("counter", "histogram", "summary") or (kind == "untyped" and name.endswith("_total")):
        return ADDED
    return PER_RANK if any("tp_rank" in sample.labels for sample in samples) else ADDED


def _aggregate(samples: list[_prometheus.Sample], kind: str) -> float:
    if kind == ADDED:
        return _prometheus.total(samples)
    totals = [sample for sample in samples if not sample.labels.get("priority")]  # priority="" is the total
    if kind == SERVER_TOTAL:
        return _prometheus.sum_of_largest(totals, "dp_rank")
    return _prometheus.largest(totals)


def _row_metrics(row: dict[str, Any]) -> dict[str, float]:
    """A status row's metrics: the parsed gauges, or the /metrics text itself."""
    value = row.get("metrics") or {}
    return metrics(value) if isinstance(value, str) else dict(value)


def status_table(rows: Any) -> str:
    """status.yml's table, one line per server; a row's metrics are parsed gauges or the /metrics text.
    "config" is DRIFT when the deployed files differ from what the repository renders, STALE when they do not
    but the running server was not started from them (its reasons follow the table), else "in sync".
    "KV pool planned" ends in "*" when the plan is calibrated from the last start; "weights read" is the
    last load's rate, "disk reads" the disk's sequential rate, and "at disk rate" the weights' size over it. Each
    server's load-speed advice (filter load_advice) follows the table, one line each."""
    head = f"{'host':<24} {'state':<16} {'health':<7} {'uptime':>8} {'restarts':>8} {'version':<12} {'config':<8}" \
           f" {'KV used':>8} {'host KV used':>13} {'KV pool planned':>16} {'KV pool seen':>13}" \
           f" {'last load':>10} {'weights read':>13} {'disk reads':>11} {'at disk rate':>13}"
    lines = [head, "-" * len(head)]
    for row in rows or []:
        gauges = _row_metrics(row)
        host_total = gauges.get("hicache_host_total_tokens") or 0
        host_used = (f"{gauges.get('hicache_host_used_tokens', 0) / host_total:.0%}" if host_total else "-")
        kv = f"{gauges['token_usage']:.0%}" if "token_usage" in gauges else "-"
        uptime = int(row.get("uptime_s") or 0)
        planned = _tokens(row.get("kv_tokens_planned")) + ("*" if _true(row.get("plan_calibrated")) else " ")
        lines.append(f"{row['host']:<24} {row['state']:<16} {'ok' if row['healthy'] else str(row['health']):<7}"
                     f" {uptime // 3600:>4}h{uptime % 3600 // 60:02d}m {row['restarts']:>8} {row['version']!s:<12}"
                     f" {_config(row):<8} {kv:>8} {host_used:>13}"
                     f" {planned:>16} {_tokens(row.get('kv_tokens_observed')):>13} {_load_columns(row)}")
    lines += [f"{row['host']}: STALE: {reason}" for row in rows or [] if not row.get("drift")
              for reason in row.get("stale") or []]
    lines += [f"{row['host']}: LOAD SPEED: {text}" for row in rows or [] if (text := _advice(row))]
    lines += [f"{row['host']}: {_presharded(row['presharded'])}" for row in rows or []
              if (row.get("presharded") or {}).get("enabled")]
    return "\n".join(lines)


def _advice(row: dict[str, Any]) -> str:
    """The row's load-speed advice as one line (filter load_advice's ``text``), or "" without one."""
    advice = row.get("load_advice")
    return str(advice.get("text") or "") if isinstance(advice, dict) else str(advice or "")


def _presharded(dump: dict[str, Any]) -> str:
    """The presharded dump of a server with sglang_presharded: ready for which key, and its size."""
    key, directory = dump.get("key"), dump.get("dir")
    if not key:
        return f"presharded: key not known (the weights under {directory} were not read)"
    if _true(dump.get("ready")):
        return f"presharded: ready, key {key} ({int(dump.get('bytes') or 0) / 1e9:,.1f} GB in {directory}/{key})"
    free, need = dump.get("free_bytes"), int(dump.get("need_bytes") or 0)
    return (f"presharded: NOT READY for key {key}: the next start dumps about {need / 1e9:,.1f}"
            f" GB into {directory}/{key} ({'?' if free is None else f'{int(free) / 1e9:,.1f}'} GB free), and loads"
            " from it on the starts after")


def _config(row: dict[str, Any]) -> str:
    return "DRIFT" if row.get("drift") else "STALE" if row.get("stale") else "in sync"


def _true(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def _load_columns(row: dict[str, Any]) -> str:
    load = row.get("load") if isinstance(row.get("load"), dict) else {}
    disk = positive_number(row.get("disk_read_gb_per_s"))
    read = positive_number(load.get("read_gb_per_s"))
    size = positive_number(load.get("weights_bytes"))
    floor = _duration(size / 1e9 / disk) if disk and size else "-"
    return (f"{_duration(positive_number(load.get('total_s'))):>10} {_rate(read):>13} {_rate(disk):>11} {floor:>13}")


def _rate(value: float | None) -> str:
    return f"{value:.2f} GB/s" if value else "-"


def _duration(seconds: float | None) -> str:
    if not seconds:
        return "-"
    whole = round(seconds)
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{seconds:.1f}s"


def _tokens(value: Any) -> str:
    """A token count with thousands separators, or '-' when there is none."""
    try:
        return f"{int(value):,}" if value not in (None, "", "None") else "-"
    except (TypeError, ValueError):
        return "-"


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"metrics": metrics, "status_table": status_table}
