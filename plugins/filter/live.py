# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of a live change: what a running server holds of the live settings, read back after the change. Each
filter is documented in its sidecar file, <filter>.yml."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils._live import server_values


def live_readback(info: Any, changes: Any) -> list[str]:
    """`server_info_json | live_readback(changes)`: each of `changes` (key -> value) the server does not hold, as
    "key: holds X, wanted Y"; empty when it holds them all."""
    held = server_values(info) or {}
    missing = []
    for key, value in sorted(dict(changes or {}).items()):
        if held.get(key) != float(value):
            missing.append(f"{key}: holds {held.get(key, 'nothing readable')}, wanted {value}")
    return missing


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"live_readback": live_readback}
