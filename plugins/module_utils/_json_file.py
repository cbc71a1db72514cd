# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""JSON state files the modules share on a host: read one as an object, replace one atomically.

The readiness waiter (sglang_ready) writes its status file and the record of what a start measured;
sglang_host_facts reads that record back. Standard library only.
"""

from __future__ import annotations

import json
import os
from typing import Any


def read_object(path: str) -> dict[str, Any] | None:
    """The file's JSON object; None when it is missing, unreadable, not JSON or not an object."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def replace_atomically(path: str, data: dict[str, Any], mode: int | None = None) -> None:
    """Write data to a temporary file beside path (with mode, if given) and rename it over path, so a
    reader sees the old file or the new one, never a partial one."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    partial = f"{path}.{os.getpid()}.tmp"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    if mode is not None:
        os.chmod(partial, mode)
    os.replace(partial, path)
