# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the rolling play: the sizes of its batches, and the plan it prints before it drains any server.
Each filter is documented in its sidecar file, <filter>.yml."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils import _rollout


def _units(groups: Any, members: str = "sglang_workers") -> list[list[str]]:
    """The servers of group `members` as units (module_utils _rollout), a refusal as a filter error."""
    try:
        return _rollout.units(groups, members)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def rollout_batches(groups: Any, serial: Any = 1, members: str = "sglang_workers", parallel: bool = False) -> list[int]:
    """Batch sizes for the rolling play's `serial`, over the hosts of group `members` (the servers that
    restart; by default every server) in inventory order, where the hosts of one sglang_multinode_<name>
    group form a single unit (restarted together). `serial` is a count of units or a percentage ("25%")
    of all the servers' units per batch. `parallel` (a first install: nothing serves yet) puts them all
    in one batch."""
    units = _units(groups, members)
    if parallel:
        return [sum(len(u) for u in units) or 1]
    try:
        per_batch = _rollout.units_per_batch(serial, len(_units(groups, "sglang_workers")))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None
    return [sum(len(u) for u in units[i:i + per_batch]) for i in range(0, len(units), per_batch)] or [1]


def rollout_batch_numbers(groups: Any, serial: Any = 1, restarting: Any = (), parallel: bool = False) -> dict[str, int]:
    """`groups | rollout_batch_numbers(serial, hosts, parallel)`: host -> the number (from 1) of the batch it restarts
    in, for the `restarting` hosts and the other hosts of their multi-node servers, as `rollout_batches` cuts them
    over the same hosts; the others are not in the result."""
    chosen = {str(host) for host in restarting or ()}
    owner = {host: name for name, hosts in groups.items() if str(name).startswith("sglang_multinode_")
             for host in hosts}
    chosen |= {host for host in groups.get("sglang_workers", []) if host in owner
               and owner[host] in {owner[other] for other in chosen if other in owner}}
    members = {**groups, "__restarting": [host for host in groups.get("sglang_workers", []) if host in chosen]}
    numbers: dict[str, int] = {}
    hosts = members["__restarting"]
    index = 0
    for number, size in enumerate(rollout_batches(members, serial, "__restarting", parallel), 1):
        numbers.update(dict.fromkeys(hosts[index:index + size], number))
        index += size
    return numbers


# What a plan prints for each rolling action: the groups of the hosts it takes and leaves (made by
# deploy.yml and reboot.yml), its title, what it does to a host, and what the hosts left alone are.
_PLANS = {
    "restart": ("sglang_rollout_restart", "sglang_rollout_keep", "ROLLOUT PLAN", "restarted",
                "Unchanged and serving"),
    "reboot": ("sglang_reboot", "sglang_reboot_not", "REBOOT PLAN", "rebooted", "No reboot pending"),
}


def rollout_plan(groups: Any, serial: Any = 1, parallel: bool = False, action: str = "restart",
                 why: Any = None, expected: Any = None, advice: Any = None, refusals: Any = None) -> str:
    """What the rolling play will do, printed before any server is drained: the servers that restart (or
    reboot, playbooks/reboot.yml), in their batches, and the ones left alone; `why` (host -> reasons) says
    after each host what changes there and whether it reboots; `advice` (host -> one line of load-speed advice)
    adds one sentence per host that restarts; `refusals` (host -> reasons; empty for a host not refused) puts the
    refused hosts first, with their reasons, and says that nothing changes anywhere."""
    if action not in _PLANS:
        raise AnsibleFilterError(f"rollout_plan: action {action!r}; allowed: {', '.join(_PLANS)}")
    refused = _refused(groups, refusals)
    plan = _plan(groups, serial, parallel, action, why, expected, advice)
    return f"{refused}Had they not been: {plan}" if refused else plan


def _refused(groups: Any, refusals: Any) -> str:
    """The refused hosts in inventory order, each with its reasons; empty when none is."""
    reasons = {host: [str(reason) for reason in value] for host, value in dict(refusals or {}).items() if value}
    hosts = [host for host in groups.get("sglang_workers", []) if host in reasons]
    if not hosts:
        return ""
    listed = "; ".join(f"{host} ({'; '.join(reasons[host])})" for host in hosts)
    return f"REFUSED, so nothing changes on any host: {listed}. "


def _plan(groups: Any, serial: Any, parallel: bool, action: str, why: Any, expected: Any, advice: Any) -> str:
    """The plan of the servers not refused: batches, then the servers left alone, changed live or waited for."""
    members, others, title, done, left = _PLANS[action]
    units = _units(groups, members)
    reasons = {host: list(value or []) for host, value in dict(why or {}).items()}
    kept = [_with_reasons(host, reasons) for host in groups.get("sglang_workers", [])
            if host in set(groups.get(others, []))]
    alone = f"{left}, not drained: {', '.join(kept)}." if kept else ""
    live = [_with_reasons(host, reasons) for host in groups.get("sglang_workers", [])
            if host in set(groups.get("sglang_rollout_live", []))]
    if live:  # changed through the server's API and read back, one at a time after the routers (deploy.yml)
        alone = (f"Changed live, not drained, not restarted (expected downtime 0 s): {', '.join(live)}. "
                 + alone).strip()
    waited = [host for host in groups.get("sglang_workers", []) if host in set(groups.get("sglang_rollout_rejoin", []))]
    if waited:  # started by an earlier run and still loading: out of service until ready, so before any batch
        alone = (f"Waited for first, then back in the routers (an earlier run started them; still loading): "
                 f"{', '.join(waited)}. " + alone).strip()
    if not units:
        return f"{title}: no server {action}s. " + alone
    hosts = [_with_reasons(host, reasons) for unit in units for host in unit]
    names = [host for unit in units for host in unit]
    if parallel:
        return (f"{title}: first install, no server runs yet: {', '.join(hosts)} start together. "
                + _expected([names], expected, "Expected time until they serve (the slowest host's last load)")
                + _advice(names, advice) + alone)
    sizes, lines, batches, index = rollout_batches(groups, serial, members), [], [], 0
    for number, size in enumerate(sizes, 1):
        lines.append(f"batch {number}: {', '.join(hosts[index:index + size])}")
        batches.append(names[index:index + size])
        index += size
    count = len(hosts)
    return (f"{title}: {count} server{'s' if count != 1 else ''} {action}{'' if count != 1 else 's'} in {len(sizes)} "
            f"batch{'es' if len(sizes) != 1 else ''} (sglang_rolling_serial {serial}), each drained, {done} "
            f"and back before the next: {'; '.join(lines)}. "
            + _expected(batches, expected, "Expected downtime per batch (its slowest host's last load, drain not "
                        "counted)") + _advice(names, advice) + alone).strip()


def _expected(batches: list[list[str]], expected: Any, title: str) -> str:
    """The downtime each batch is expected to cost (its slowest host's last load) and the roll's sum, when
    `expected` (host -> seconds, None when unknown) is given; which hosts have no figure."""
    if expected is None:
        return ""
    seconds = {host: value for host, value in dict(expected).items() if value is not None}
    unknown = [host for batch in batches for host in batch if host not in seconds]
    per_batch = [max(seconds[host] for host in batch if host in seconds) if any(h in seconds for h in batch)
                 else None for batch in batches]
    known = [value for value in per_batch if value is not None]
    if not known:
        return f"{title}: unknown (no load recorded on these hosts yet). "
    text = (f"{title}: "
            + ", ".join(f"batch {number}: {value:.0f} s" if value is not None else f"batch {number}: unknown"
                        for number, value in enumerate(per_batch, 1))
            + f"; the roll at least {sum(known) / 60:.1f} min")
    return text + (f" (no load recorded yet: {', '.join(unknown)}). " if unknown else ". ")


def _advice(hosts: list[str], advice: Any) -> str:
    """One sentence per host that restarts and has advice: "Load speed on <host>: <advice>." (advice only)."""
    lines = {str(host): str(text).strip().rstrip(".") for host, text in dict(advice or {}).items() if text}
    return "".join(f"Load speed on {host}: {lines[host]}. " for host in hosts if lines.get(host))


def _with_reasons(host: str, reasons: dict[str, list[str]]) -> str:
    return f"{host} ({'; '.join(reasons[host])})" if reasons.get(host) else host


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"rollout_batches": rollout_batches, "rollout_batch_numbers": rollout_batch_numbers,
                "rollout_plan": rollout_plan}
