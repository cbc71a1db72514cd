# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of monitoring: the fleet's Prometheus targets, alert rules and Grafana dashboard. Each filter is documented
in its sidecar file, <filter>.yml."""

from __future__ import annotations

from typing import Any

import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils import _rollout, sglang_dashboard, sglang_monitoring


def _servers(records: Any) -> list[sglang_monitoring.Server]:
    return [sglang_monitoring.Server(**record) for record in records or [] if record]


def monitoring_server(config: Any, host: str, ready_timeout: Any, load_budget: Any = 0) -> dict[str, Any] | None:
    try:
        found = sglang_monitoring.server(str(host), dict(config or {}), ready_timeout, load_budget)
    except sglang_monitoring.MonitoringError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    return None if found is None else dict(found.__dict__)


def monitoring_targets(records: Any, routers: Any, given: Any = None) -> list[dict[str, Any]]:
    try:
        return sglang_monitoring.targets(_servers(records), list(routers or []), sglang_monitoring.options(given))
    except sglang_monitoring.MonitoringError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class _RulesDumper(yaml.SafeDumper):
    """Rule files as people write them: keys in Prometheus' order, multi-line PromQL as literal blocks."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_RulesDumper.add_representer(str, _text)
_RulesDumper.add_multi_representer(str, _text)  # Ansible's tagged strings are str subclasses


def alert_rules(records: Any, routers: Any, groups: Any, serial: Any = 1, given: Any = None) -> str:
    """The rule file's text. How many servers a rollout may take out at once is its largest batch, in servers
    (a multi-node server is one): the routers' healthy floor is the rest."""
    try:
        units = len(_rollout.units(groups))
        unavailable = min(_rollout.units_per_batch(serial, units), units) if units else 0
        rules = sglang_monitoring.alert_rules(_servers(records), list(routers or []), unavailable, dict(given or {}))
    except ValueError as exc:  # a bad serial or multi-node group, or a MonitoringError
        raise AnsibleFilterError(str(exc)) from exc
    return yaml.dump(rules, Dumper=_RulesDumper, sort_keys=False, width=120, allow_unicode=True)


def grafana_dashboard(given: Any = None) -> dict[str, Any]:
    try:
        opts = sglang_monitoring.options(dict(given or {}))
    except sglang_monitoring.MonitoringError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    return sglang_dashboard.dashboard(opts["server_job"], opts["router_job"], opts["node_job"])


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"monitoring_server": monitoring_server, "monitoring_targets": monitoring_targets,
                "alert_rules": alert_rules, "grafana_dashboard": grafana_dashboard}
