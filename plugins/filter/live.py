# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of a running server: the address a host reaches its own server at, and what the server holds of the
live settings, read back after a live change. Each filter is documented in its sidecar file, <filter>.yml."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import _live
from ansible_collections.sglang.deploy.plugins.module_utils._live import server_values


def server_url(bind: Any, port: Any, tls: Any = False) -> str:
    """`sglang_host | server_url(sglang_port, sglang_config.tls.enabled)`: http(s)://<address>:<port> this host
    reaches its own server at (module_utils _live.server_url, which module sglang_host_facts asks /server_info at
    too; _live.scheme decides http or https)."""
    return _live.server_url(bind, port, tls)


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
        return {"live_readback": live_readback, "server_url": server_url}
