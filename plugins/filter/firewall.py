# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters of the server unit's IP allow-list (module_utils _firewall). Documented in their sidecar files,
ip_sources.yml, ip_names.yml and ip_allow.yml."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils import _firewall


def ip_sources(hostvars: Any, groups: Any, host: str, multinode_group: str = "", prometheus_group: str = "",
               bind: str = "", extra: Any = None) -> list[dict[str, str]]:
    return _firewall.sources(hostvars, dict(groups), str(host), str(multinode_group or ""),
                             str(prometheus_group or ""), str(bind or ""), list(extra or []))


def ip_names(sources: Any) -> list[str]:
    return _firewall.names_to_resolve(list(sources or []))


def ip_allow(sources: Any, getent: Any = None, where: str = "the server host") -> list[dict[str, str]]:
    try:
        return _firewall.allow_list(list(sources or []), _firewall.resolved(list(getent or [])), str(where))
    except _firewall.FirewallError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ip_sources": ip_sources, "ip_names": ip_names, "ip_allow": ip_allow}
