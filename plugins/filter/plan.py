# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the plan: the version/hardware rules and the capacity plan of a resolved host. Each filter is documented
in its sidecar file, <filter>.yml."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_plan_text, sglang_preflight, sglang_startup


def preflight(config: Any, pinned: Any, detected: Any = None, avg_seq_len: Any = 8192,
              plan: str = "optional") -> dict[str, Any]:
    """`sglang_config | sglang.deploy.preflight(inventory_facts, host_facts, 8192, 'required')`: the
    configuration with its rules and capacity plan (``checks``), minus the environment the rules drop. A
    configuration already refused (``ok`` false: its variables or their resolution) is passed on as it is."""
    if not config.get("ok", True):
        return dict(config)
    try:
        return sglang_preflight.apply(dict(config), dict(pinned or {}), dict(detected) if detected else None,
                                      int(avg_seq_len), str(plan))
    except ValueError as exc:
        raise AnsibleFilterError(f"preflight: {exc}") from exc


def plan_table(config: Any, host: str) -> str:
    return sglang_plan_text.table(host, dict(config))


def plan_json(config: Any) -> dict[str, Any]:
    return sglang_plan_text.plan_json(dict(config))


def memory_identity(config: Any) -> dict[str, Any]:
    return sglang_startup.memory_identity(dict(config))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"preflight": preflight, "plan_table": plan_table, "plan_json": plan_json,
                "memory_identity": memory_identity}
