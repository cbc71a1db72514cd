# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Show SGLang load progress while Ansible polls a readiness wait; say where a rollout stopped on a host that
became unreachable."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_progress
type: aggregate
short_description: Print SGLang load progress during readiness waits, and where a rollout stopped
version_added: "1.0.0"
description:
  - While a task polls the M(sglang.deploy.sglang_ready) module in an C(until) loop, prints one line per host
    whenever the load phase or shard percentage changes, and at least every O(heartbeat) seconds,
    so a 15-minute model load is never a silent wait; when the wait ends with the server ready, one last line
    with how it ended and how long it took (also for a load that ended before the first poll). Other tasks are
    left to the stdout callback.
  - "In a rolling play (one whose variables set C(sglang_rollout_play), as C(deploy.yml)'s and
    C(playbooks/reboot.yml)'s do), a host that becomes unreachable stops the rollout without the play's own
    rescue (Ansible runs no rescue for an unreachable host); at the end of the run this callback says where
    it stopped, whether the host had left the routers, and what to do."
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
        self._rollout = ""  # the running play's sglang_rollout_play, empty outside a rolling play
        self._out: set[str] = set()  # hosts this rolling play took out of the routers and has not put back
        self._stopped: list[str] = []

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._rollout = str(play.get_vars().get("sglang_rollout_play") or "")
        self._out = set()

    def v2_runner_on_ok(self, result: Any) -> None:
        if str(result.task.action).endswith("sglang_ready"):
            self._ready(result)
            return
        if not self._rollout or not str(result.task.action).endswith("sglang_router_workers"):
            return
        # routers.yml loops over the routers: the states are in its items' invocations.
        answers = [result.result, *(result.result.get("results") or [])]
        states = {(answer.get("invocation") or {}).get("module_args", {}).get("state")
                  for answer in answers if isinstance(answer, dict)}
        host = result.host.get_name()
        if "absent" in states:
            self._out.add(host)
        elif "present" in states:
            self._out.discard(host)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        if not self._rollout:
            return
        host = result.host.get_name()
        routers = ("It had left the routers and stays out of them: a rerun puts it back once it serves again."
                   if host in self._out else "It had not left the routers.")
        self._stopped.append(
            f"{self._rollout.upper()} STOPPED at {host}: it became unreachable during its turn "
            f"({result.task.get_name()}: {str(result.result.get('msg', '')).strip()[:300]}). {routers} Hosts "
            f"after it were not touched. Once it answers again, run the playbook again.")

    def v2_playbook_on_stats(self, stats: Any) -> None:
        for line in self._stopped:
            self._display.display(line, color="red", stderr=False)

    def _ready(self, result: Any) -> None:
        """The waiter's last word: a load that ended between two polls (or before the first) still shows
        how it ended and how long it took; the next wait on the host starts its lines afresh."""
        answer = result.result
        host = result.host.get_name()
        if answer.get("finished") and answer.get("ready"):
            self._display.display(f"  [{host}] {progress_line(answer)}")
            self._last.pop(host, None)

    def v2_runner_retry(self, result: Any) -> None:
        status = result.result.get("sglang_progress")
        if not isinstance(status, dict) or not status:
            return
        host = result.host.get_name()
        line = progress_line(status)
        key = status.get("describe", "")
        previous = self._last.get(host)
        now = time.monotonic()
        if previous and previous[0] == key and now - previous[1] < int(self.get_option("heartbeat")):
            return
        self._last[host] = (key, now)
        self._display.display(f"  [{host}] {line}")


def progress_line(status: dict[str, Any]) -> str:
    """One line of the waiter's status: unit, phase (with its shard percentage), seconds, health."""
    return "{unit}: {describe}, {elapsed:.0f} s, health {health}".format(
        unit=status.get("unit", "sglang"), describe=status.get("describe", status.get("phase", "?")),
        elapsed=float(status.get("elapsed_s") or 0), health=status.get("health", "?"))
