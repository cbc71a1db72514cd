# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private to this collection: the units a rolling play takes out of service, and how many per batch.

A unit is one server: a single host, or the hosts of one ``sglang_multinode_<name>`` group, which restart
together. Read by the rollout filters (the batches and the plan) and the monitoring filters (how many
servers a rollout may take out at once, the routers' healthy floor). Standard library only; a refusal is a
ValueError whose text names the variable and what is allowed.
"""

from __future__ import annotations

from typing import Any

MULTINODE_PREFIX = "sglang_multinode_"


def units(groups: Any, members: str = "sglang_workers") -> list[list[str]]:
    """The hosts of group `members`, in the order of sglang_workers, as units: a multi-node server's hosts
    together, which must be next to each other and all in `members` or none."""
    chosen = set(groups.get(members, []))
    workers = [host for host in groups.get("sglang_workers", []) if host in chosen]
    owner = {host: name for name, hosts in groups.items() if name.startswith(MULTINODE_PREFIX) for host in hosts}
    found: list[list[str]] = []
    for host in workers:
        if host in owner and found and found[-1][0] in owner and owner[found[-1][0]] == owner[host]:
            found[-1].append(host)
        else:
            found.append([host])
    for name in {owner[host] for host in workers if host in owner}:
        mine = [unit for unit in found if owner.get(unit[0]) == name]
        if len(mine) != 1 or sorted(mine[0]) != sorted(groups[name]):
            raise ValueError(
                f"the hosts of {name} must all be in sglang_workers, next to each other in inventory order, "
                f"so they roll out as one unit; got {groups[name]} within {workers}")
    return found


def units_per_batch(serial: Any, count: int) -> int:
    """The units in one batch for sglang_rolling_serial `serial`: a count >= 1, or a percentage ("25%") of
    `count` units (at least one)."""
    text = str(serial).strip()
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if not 0 < percent <= 100:
                raise ValueError
            return max(1, int(count * percent / 100))
        number = int(text)
        if number < 1:
            raise ValueError
        return number
    except ValueError:
        raise ValueError(f"sglang_rolling_serial: {serial!r} is not a count >= 1 or a percentage like 25%; "
                         "allowed: 1, 2, ... or 1%..100%") from None
