# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Show SGLang load progress while Ansible polls a readiness wait."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_progress
type: aggregate
short_description: Print SGLang load progress during readiness waits
description:
  - While a task polls the M(sglang.deploy.sglang_ready) module in an C(until) loop, prints one line per host
    whenever the load phase or shard percentage changes, and at least every O(heartbeat) seconds,
    so a 15-minute model load is never a silent wait. Other tasks are left to the stdout callback.
requirements:
  - enabled in ansible.cfg (callbacks_enabled = sglang.deploy.sglang_progress)
options:
  heartbeat:
    description: Seconds after which an unchanged progress line is printed again.
    type: int
    default: 30
    ini:
      - section: callback_sglang_progress
        key: heartbeat
    env:
      - name: SGLANG_PROGRESS_HEARTBEAT
author:
  - sglang-deploy contributors (@sglang-deploy)
"""

import time
from typing import Any

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sglang.deploy.sglang_progress"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, tuple[str, float]] = {}

    def v2_runner_retry(self, result: Any) -> None:
        status = result._result.get("sglang_progress")
        if not isinstance(status, dict) or not status:
            return
        host = result._host.get_name()
        line = "{unit}: {describe}, {elapsed:.0f} s, health {health}".format(
            unit=status.get("unit", "sglang"), describe=status.get("describe", status.get("phase", "?")),
            elapsed=float(status.get("elapsed_s") or 0), health=status.get("health", "?"))
        key = status.get("describe", "")
        previous = self._last.get(host)
        now = time.monotonic()
        if previous and previous[0] == key and now - previous[1] < int(self.get_option("heartbeat")):
            return
        self._last[host] = (key, now)
        self._display.display(f"  [{host}] {line}")
