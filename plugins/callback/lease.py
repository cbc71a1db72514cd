# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Give the rollout lease back at the end of a run that took it and did not reach its own release."""

from __future__ import annotations

DOCUMENTATION = r"""
name: lease
type: aggregate
short_description: Give the fleet's rollout lease back when a run ends without its release
version_added: "2.0.0"
description:
  - C(deploy.yml) takes the fleet's rollout lease (module M(sglang.deploy.rollout_lease)) before its first change
    and gives it back in its last play. A run that fails where Ansible stops the playbook (a probe that refuses,
    a rollout that stops at a failed or unreachable server) never reaches that play.
  - This callback notes the lease a run takes and gives back. When the run ends still holding one, it gives it back
    itself, with an ad-hoc C(ansible) call of the same module against the lease host, the run's inventories and
    extra variables, and says so. A run killed outright (SIGKILL, a lost machine) leaves the lease behind; its
    next run from the same controller sees it stale, and takes it over when told to.
requirements:
  - enabled in ansible.cfg (callbacks_enabled = sglang.deploy.lease)
author:
  - sglang-deploy contributors (@sglang-deploy)
"""

import json
import subprocess
import sys
from typing import Any

from ansible import context
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sglang.deploy.lease"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._held: dict[str, Any] | None = None  # {host, path, holder}

    def v2_runner_on_ok(self, result: Any) -> None:
        if not str(result.task.action).endswith("rollout_lease"):
            return
        args = (result.result.get("invocation") or {}).get("module_args") or {}
        state, holder = args.get("state"), args.get("holder") or {}
        if state == "held" and result.result.get("lease") and not result.result.get("_ansible_check_mode"):
            self._held = {"host": result.result.get("host") or result.host.get_name(),
                          "path": args.get("path"), "holder": {"id": holder.get("id")}}
        elif state == "released" and self._held and holder.get("id") == self._held["holder"]["id"]:
            self._held = None

    def v2_playbook_on_stats(self, stats: Any) -> None:
        if not self._held:
            return
        held, self._held = self._held, None
        argv = [sys.executable, "-m", "ansible.cli.adhoc", held["host"], "-m", "sglang.deploy.rollout_lease",
                "-a", json.dumps({"state": "released", "path": held["path"], "holder": held["holder"]})]
        for source in context.CLIARGS.get("inventory") or ():
            argv += ["-i", source]
        for extra in context.CLIARGS.get("extra_vars") or ():
            argv += ["-e", extra]
        run = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
        if run.returncode == 0:
            self._display.display(f"ROLLOUT LEASE given back on {held['host']}: this run ended before its own "
                                  "release (it failed or stopped); no other run's lease was touched.", color="yellow")
        else:
            self._display.display(f"ROLLOUT LEASE NOT given back on {held['host']} ({(run.stdout + run.stderr)[-500:]}"
                                  f"); the next deploy finds it held by this run, stale once this run is gone, and "
                                  f"takes it over with -e sglang_rollout_lease_takeover={held['holder']['id']}.",
                                  color="red")
