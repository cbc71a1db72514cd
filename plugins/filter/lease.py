# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters of the rollout lease, on the controller. Documented in their sidecar files, lease_gone.yml and
lease_running.yml."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import _controller


def lease_gone(lease: Any) -> dict[str, str]:
    return _controller.gone(lease)


def lease_running(lease: Any) -> str:
    return _controller.still_running(lease)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"lease_gone": lease_gone, "lease_running": lease_running}
