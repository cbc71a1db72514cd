# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the plan: the version/hardware rules and the capacity plan of a resolved host."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import sglang_preflight

DOCUMENTATION = r"""
name: preflight
short_description: Apply the rules and the capacity plan to a resolved host, and print the plan
description:
  - C(sglang.deploy.preflight) applies the version and hardware rules and the capacity plan to a host
    resolved by C(sglang.deploy.resolve), with the inventory's facts and, during a deploy, the host's.
  - C(sglang.deploy.plan_table) prints it for a person; C(sglang.deploy.plan_json) gives plan.yml's JSON.
"""

EXAMPLES = r"""
- name: Rules and plan
  ansible.builtin.set_fact:
    checks: "{{ sglang_config | sglang.deploy.preflight(inventory_facts, host_facts, 8192, true) }}"
"""

RETURN = r"""
_value:
  description: For preflight, a dict with ok, errors, warnings, drop_env, plan, facts and hardware.
  type: raw
"""


def preflight(resolved: Any, pinned: Any, detected: Any = None, avg_seq_len: Any = 8192,
              need_plan: bool = False, advisory_plan: bool = False) -> dict[str, Any]:
    """Rules and capacity plan of a host: `config | sglang.deploy.preflight(inventory_facts, host_facts)`."""
    return sglang_preflight.run(dict(resolved), dict(pinned or {}), dict(detected) if detected else None,
                                int(avg_seq_len), bool(need_plan), bool(advisory_plan))


def plan_table(result: Any, host: str) -> str:
    return sglang_preflight.table(host, dict(result))


def plan_json(result: Any) -> dict[str, Any]:
    return sglang_preflight.plan_json(dict(result))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"preflight": preflight, "plan_table": plan_table, "plan_json": plan_json}
