# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of a server's load: the readiness budget and stall bounds of the next one, learned from the last, one
line of a load's timings, and which lever would make the next one faster. Each filter is documented in its sidecar
file, <filter>.yml."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import _load, _load_speed
from ansible_collections.sglang.deploy.plugins.module_utils._stall import stall_bounds


def load_budget(record: Any, identity: Any, timeout: Any, stall_timeouts: Any) -> dict[str, Any]:
    """`observed | load_budget(identity, sglang_ready_timeout, sglang_service_stall_timeouts)`."""
    bounds, _problems = stall_bounds(dict(stall_timeouts or {}))  # the variable check refused bad ones already
    return _load.learned(record if isinstance(record, dict) else None, dict(identity or {}), int(timeout), bounds)


def load_downtime(record: Any, identity: Any) -> dict[str, Any]:
    """`observed | load_downtime(identity)`: the downtime a restart is expected to cost, from the last load."""
    return _load.expected_downtime(record if isinstance(record, dict) else None, dict(identity or {}))


def load_summary(load: Any) -> str:
    return _load.summary(load if isinstance(load, dict) else None)


def disk_stale(record: Any, model_path: Any, remeasure: Any = False) -> str:
    """`disk_record | disk_stale(sglang_model_path, remeasure)`: why the disk under the weights must be measured
    (again), or "" when its record holds (module_utils _load_speed.stale, the rule module sglang_disk_rate keeps)."""
    return _load_speed.stale(record if isinstance(record, dict) else None, str(model_path or ""), _true(remeasure))


def load_advice(record: Any, disk: Any, presharded: Any = False, threads: Any = None,
                weights_bytes: Any = None) -> dict[str, Any]:
    """`observed | load_advice(disk_record, presharded, threads)`: module_utils _load_speed.advise on the record's
    last load, with its one line as ``text``."""
    load = record.get("load") if isinstance(record, dict) else None
    advice = _load_speed.advise(load if isinstance(load, dict) else None, disk if isinstance(disk, dict) else None,
                                weights_bytes, _true(presharded), _count(threads))
    return dict(advice, text=_load_speed.line(advice))


def _true(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes")


def _count(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") and int(value) > 0 else None
    except (TypeError, ValueError):
        return None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"load_budget": load_budget, "load_downtime": load_downtime, "load_summary": load_summary,
                "load_advice": load_advice, "disk_stale": disk_stale}
