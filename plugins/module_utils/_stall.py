# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stall bounds of a server's load: which phases have one, and how a bound is checked.

Read by the readiness waiter (module sglang_ready) on the host and by the variable check
(sglang_inputs, for sglang_service_stall_timeouts) on the controller. Standard library only.
"""

from __future__ import annotations

from typing import Any

# The phases of a load that have a stall bound, in load order (the waiter maps SGLang's log lines to them).
STALL_KEYS = ("starting", "distributed_init", "loading_weights", "kv_cache", "cuda_graphs", "host_kv_pool", "warmup")
ALLOWED = f"{', '.join(STALL_KEYS)}, each a whole number of seconds >= 1"


def stall_bounds(raw: dict[str, Any]) -> tuple[dict[str, int], list[str]]:
    """{phase: seconds} with known phases and whole seconds >= 1, and a problem for each other entry
    (what is allowed is ALLOWED)."""
    bounds, problems = {}, []
    for key, value in (raw or {}).items():
        if key not in STALL_KEYS:
            problems.append(f"{key!r} is not a load phase")
            continue
        try:
            seconds = int(str(value))
        except ValueError:
            seconds = 0
        if seconds < 1:
            problems.append(f"{key}: {value!r} is not a whole number of seconds >= 1")
            continue
        bounds[key] = seconds
    return bounds, problems
