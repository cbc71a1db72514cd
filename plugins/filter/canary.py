# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary judge, on the controller (module_utils/_canary.py). Documented in its sidecar file, canary_verdict.yml."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import _canary


def canary_verdict(canary: Any, baseline: Any, min_requests: int = 50, alpha: float = 0.01, margin: float = 0.10,
                   metrics: int = 3, failing_windows: int = 0,
                   guardrails: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return _canary.verdict(canary, baseline, min_requests=int(min_requests), alpha=float(alpha), margin=float(margin),
                           metrics=int(metrics), failing_windows=int(failing_windows), guardrails=guardrails)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"canary_verdict": canary_verdict}
