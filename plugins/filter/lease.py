# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter of the rollout lease, on the controller. Documented in its sidecar file, lease_gone.yml."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import _controller


def lease_gone(lease: Any) -> dict[str, str]:
    return _controller.gone(lease)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"lease_gone": lease_gone}
