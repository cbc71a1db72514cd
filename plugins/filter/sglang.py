# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Jinja filters over the project's Python: resolve SGLang args once, quote them for systemd."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from types import ModuleType
from typing import Any

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: sglang
short_description: Resolve SGLang arguments and quote them for systemd
description:
  - C(sglang_resolve) turns the role variables of one host into SGLang's argv and environment,
    validated against the flag catalog of C(sglang_version). It returns errors instead of raising,
    so a play can list every problem of a host at once.
  - C(sglang_exec_start) quotes an argv for a systemd C(ExecStart=) line.
  - C(sglang_env_lines) writes the body of an C(EnvironmentFile=).
  - C(sglang_preflight) applies the version/hardware rules and the capacity plan to a resolved host;
    C(sglang_plan_table) and C(sglang_plan_json) print it.
  - C(sglang_rollout_batches) gives the batch sizes of the rolling play, a multi-node group per batch.
  - C(sglang_metrics) and C(sglang_status_table) read and print a server's state for status.yml.
  - C(sglang_flags) turns a C({flag: value}) mapping into flag groups for a program without a catalog.
"""

EXAMPLES = r"""
- name: Resolve
  ansible.builtin.set_fact:
    __sglang_resolved: "{{ __sglang_inputs | sglang_resolve }}"
- name: ExecStart line
  ansible.builtin.debug:
    msg: "{{ [venv ~ '/bin/python', '-m', 'sglang.launch_server'] | sglang_exec_start(__sglang_resolved.args) }}"
"""

RETURN = r"""
_value:
  description: For sglang_resolve, a dict with ok, errors, warnings, version, instance, unit, args, argv, env.
  type: raw
"""

_HERE = os.path.dirname(os.path.abspath(__file__))
_UTILS = os.path.join(_HERE, "..", "module_utils")


def _load(name: str) -> ModuleType:
    """Import a module from plugins/module_utils by path (this repository is not a collection)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(_UTILS, name + ".py"))
    if spec is None or spec.loader is None:  # pragma: no cover
        raise AnsibleFilterError(f"cannot load {name} from {_UTILS}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_load("sglang_types")
_load("sglang_gpu_topology")
_load("sglang_catalog")
_args = _load("sglang_args")
_load("sglang_capacity")
_load("sglang_rules")
_preflight = _load("sglang_preflight")


def sglang_resolve(inputs: Any) -> dict[str, Any]:
    if not isinstance(inputs, dict):
        raise AnsibleFilterError(f"sglang_resolve expects a mapping of variables, got {type(inputs).__name__}")
    return _args.resolve(dict(inputs))


def sglang_exec_start(prefix: Any, args: Any = None) -> str:
    """`[python, -m, sglang.launch_server] | sglang_exec_start(resolved.args)`."""
    try:
        return _args.systemd_exec_line([str(w) for w in prefix], [[str(w) for w in group] for group in args or []])
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sglang_exec_start: {exc}") from exc


def sglang_env_lines(env: Any) -> str:
    """`resolved.env | sglang_env_lines`: the EnvironmentFile body."""
    try:
        return _args.env_file_lines({str(k): str(v) for k, v in dict(env).items()})
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sglang_env_lines: {exc}") from exc


def sglang_preflight(resolved: Any, pinned: Any, detected: Any = None, avg_seq_len: Any = 8192,
                     need_plan: bool = False, advisory_plan: bool = False) -> dict[str, Any]:
    """Rules and capacity plan of a host: `__sglang | sglang_preflight(inventory_facts, host_facts)`."""
    return _preflight.run(dict(resolved), dict(pinned or {}), dict(detected) if detected else None,
                          int(avg_seq_len), bool(need_plan), bool(advisory_plan))


def sglang_plan_table(result: Any, host: str) -> str:
    return _preflight.table(host, dict(result))


def sglang_plan_json(result: Any) -> dict[str, Any]:
    return _preflight.plan_json(dict(result))


def sglang_flags(mapping: Any, var: str = "extra_args") -> list[list[str]]:
    """`{flag: value}` -> `[[--flag, value], [--bare]]` for programs without a flag catalog."""
    try:
        return _args.flag_groups(dict(mapping or {}), var)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(str(exc)) from exc


def sglang_rollout_batches(groups: Any, serial: Any = 1) -> list[int]:
    """Batch sizes for the rolling play's `serial`: hosts of group sglang_workers in order, where the
    hosts of one sglang_multinode_<name> group form a single unit (restarted together). `serial` is
    a count of units or a percentage ("25%") per batch."""
    workers = list(groups.get("sglang_workers", []))
    owner = {host: name for name, members in groups.items() if name.startswith("sglang_multinode_")
             for host in members}
    units: list[list[str]] = []
    for host in workers:
        if host in owner and units and units[-1][0] in owner and owner[units[-1][0]] == owner[host]:
            units[-1].append(host)
        else:
            units.append([host])
    for name in set(owner.values()):
        members = [u for u in units if owner.get(u[0]) == name]
        if len(members) != 1 or sorted(members[0]) != sorted(groups[name]):
            raise AnsibleFilterError(
                f"the hosts of {name} must all be in sglang_workers, next to each other in inventory order, "
                f"so they roll out as one unit; got {groups[name]} within {workers}")
    per_batch = _units_per_batch(serial, len(units))
    return [sum(len(u) for u in units[i:i + per_batch]) for i in range(0, len(units), per_batch)] or [1]


def _units_per_batch(serial: Any, units: int) -> int:
    text = str(serial).strip()
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if not 0 < percent <= 100:
                raise ValueError
            return max(1, int(units * percent / 100))
        count = int(text)
        if count < 1:
            raise ValueError
        return count
    except ValueError:
        raise AnsibleFilterError(f"sglang_rolling_serial: {serial!r} is not a count >= 1 or a percentage "
                                 "like 25%; allowed: 1, 2, ... or 1%..100%") from None


_METRICS = ("num_running_reqs", "num_queue_reqs", "token_usage", "num_used_tokens", "max_total_num_tokens",
            "hicache_host_used_tokens", "hicache_host_total_tokens", "gen_throughput", "cache_hit_rate")


def sglang_metrics(text: Any) -> dict[str, float]:
    """SGLang's Prometheus text -> {name: value} for the gauges status.yml shows (summed over labels)."""
    values: dict[str, float] = {}
    for line in str(text or "").splitlines():
        match = re.match(r"^sglang:(\w+)(?:\{[^}]*\})?\s+([-+0-9.eE]+|NaN)$", line.strip())
        if match and match.group(1) in _METRICS and match.group(2) != "NaN":
            values[match.group(1)] = values.get(match.group(1), 0.0) + float(match.group(2))
    return values


def sglang_status_table(rows: Any) -> str:
    """status.yml's table, one line per server."""
    head = f"{'host':<24} {'state':<16} {'health':<7} {'uptime':>8} {'restarts':>8} {'version':<12} {'config':<8}" \
           f" {'KV used':>8} {'host KV used':>13}"
    lines = [head, "-" * len(head)]
    for row in rows or []:
        metrics = row.get("metrics") or {}
        host_total = metrics.get("hicache_host_total_tokens") or 0
        host_used = (f"{metrics.get('hicache_host_used_tokens', 0) / host_total:.0%}" if host_total else "-")
        kv = f"{metrics['token_usage']:.0%}" if "token_usage" in metrics else "-"
        uptime = int(row.get("uptime_s") or 0)
        lines.append(f"{row['host']:<24} {row['state']:<16} {'ok' if row['healthy'] else str(row['health']):<7}"
                     f" {uptime // 3600:>4}h{uptime % 3600 // 60:02d}m {row['restarts']:>8} {row['version']!s:<12}"
                     f" {'DRIFT' if row['drift'] else 'in sync':<8} {kv:>8} {host_used:>13}")
    return "\n".join(lines)


def sglang_probe_line(check: Any) -> str:
    """One line of the probe report: `  ok   cuda: ...` / `  FAIL toolchain: ...`."""
    item = dict(check or {})
    return f"  {'ok  ' if item.get('ok') else 'FAIL'} {item.get('check')}: {item.get('detail')}"


def sglang_apt_missing(specs: Any, packages: Any) -> list[str]:
    """`['g++', 'cuda-nvcc-13-0=13.0.88-1'] | sglang_apt_missing(ansible_facts.packages)`: the specs
    that package_facts does not show installed (at exactly that version, for name=version)."""
    missing = []
    for spec in specs or []:
        name, _, version = str(spec).partition("=")
        installed = [str(entry.get("version")) for entry in (packages or {}).get(name) or []]
        if not installed or (version and version not in installed):
            missing.append(str(spec))
    return missing


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "sglang_resolve": sglang_resolve,
            "sglang_exec_start": sglang_exec_start,
            "sglang_env_lines": sglang_env_lines,
            "sglang_flags": sglang_flags,
            "sglang_metrics": sglang_metrics,
            "sglang_status_table": sglang_status_table,
            "sglang_rollout_batches": sglang_rollout_batches,
            "sglang_preflight": sglang_preflight,
            "sglang_plan_table": sglang_plan_table,
            "sglang_plan_json": sglang_plan_json,
            "sglang_apt_missing": sglang_apt_missing,
            "sglang_probe_line": sglang_probe_line,
        }
