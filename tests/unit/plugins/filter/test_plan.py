"""The preflight filter: a resolved configuration gets its rules and capacity plan (checks); one already
refused (its variables or their resolution) is passed on unchanged, so that sglang_config's main.yml can
resolve and plan in one task."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.filter import plan
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_config
from helpers import BASE, CATALOGS

EXAMPLE = {"gpu_count": 8, "gpu_memory_mib": 97887, "compute_capability": "12.0"}


def test_a_refused_configuration_is_passed_on_as_it_is() -> None:
    refused = {"ok": False, "errors": ["hicache_ratio: must be a number"], "warnings": []}
    assert plan.preflight(refused, EXAMPLE, None, 8192, "required") == refused


def test_a_resolved_configuration_gets_its_checks() -> None:
    resolved: dict[str, Any] = sglang_config.resolve(dict(BASE), str(CATALOGS))
    assert resolved["ok"], resolved["errors"]
    checked = plan.preflight(resolved, EXAMPLE, None, 8192, "optional")
    assert "checks" not in resolved and set(checked["checks"]) >= {"ok", "errors", "warnings", "plan"}
    assert checked["args"] == resolved["args"]
