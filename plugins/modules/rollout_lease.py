#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Take, renew, release or read the fleet's rollout lease: one deploy that changes anything at a time."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rollout_lease
short_description: The fleet's rollout lease, so that one deploy at a time changes the fleet
author: sglang-deploy contributors (@sglang-deploy)
description:
  - The lease is a JSON file on one host of the fleet, the same for every controller (C(deploy.yml) keeps it on
    the first router, or the first server when there is no router). It is read and written under an exclusive
    lock, so of two deploys that start together one takes it and the other is refused before it changes anything.
  - "O(state=held) takes the lease for O(holder), or renews it when O(holder) already holds it (its expiry moves
    on by O(ttl)). When another run holds it, the module fails naming the holder (user, controller, PID, command,
    since when), unless the lease is stale - it expired, or the controller knows its holder is gone
    (O(gone)) - and O(takeover) names it: then it is taken over, and the result says from whom."
  - "With O(renew), the run must hold the lease already: a lease another run took over makes it fail, so that a
    rollout whose lease was taken over stops before its next batch."
  - O(state=released) gives the lease back when O(holder) holds it; it never removes another run's lease.
  - O(state=read) reports the lease and whether it is stale; it changes nothing.
version_added: "2.0.0"
options:
  state:
    description: Take or renew (C(held)), give back (C(released)) or read (C(read)) the lease.
    type: str
    choices: [held, released, read]
    default: read
  path:
    description: The lease file; its lock is the same path with C(.lock).
    type: path
    default: /var/lib/sglang-deploy/rollout-lease.json
  holder:
    description:
      - Who takes, renews or releases it (O(state=held) and O(state=released)); the lookup
        C(sglang.deploy.controller) gives it.
      - Keys C(id) (required), C(user), C(controller), C(boot_id), C(pid), C(pid_start), C(command) (redacted; the
        controller's workers, forks of it, keep its command line), C(started).
    type: dict
    default: {}
  ttl:
    description: Seconds the lease lasts from each take or renewal (O(state=held)).
    type: int
    default: 7200
  renew:
    description: The run holds the lease already and only renews it (O(state=held)).
    type: bool
    default: false
  takeover:
    description: The id of a stale lease this run may take over (O(state=held)); empty takes over none.
    type: str
    default: ""
  gone:
    description:
      - Leases the controller knows are stale, by id, with why (its own earlier run of which no process is left,
        filter P(sglang.deploy.lease_gone#filter)).
    type: dict
    default: {}
  running:
    description:
      - Why the lease is not stale although its holder's controller process is gone (workers of its run still
        run, filter P(sglang.deploy.lease_running#filter)), added to the refusal; empty says nothing.
    type: str
    default: ""
    version_added: "2.0.0"
  lock_timeout:
    description:
      - Seconds to wait for the lock of the lease file (a deploy holds it for milliseconds). Past it the module
        fails, naming the process that holds the lock (from C(/proc/locks)) and the lease's holder.
      - The lock file is 0600 and a missing directory is created 0700 (the default one is kept 0700), so no
        other local user can open it.
    type: int
    default: 60
    version_added: "2.0.0"
  host:
    description:
      - The inventory name of the host the lease is kept on, returned as RV(host) (a task delegated to it cannot
        tell); the C(sglang.deploy.lease) callback gives a lease back there when a run ends without its release.
    type: str
    default: ""
extends_documentation_fragment: [sglang.deploy.attributes]
attributes:
  check_mode:
    support: full
    details: In check mode O(state=held) and O(state=released) only report what they would do.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Take the rollout lease
  sglang.deploy.rollout_lease:
    state: held
    holder: "{{ lookup('sglang.deploy.controller') }}"
    ttl: 7200
  delegate_to: router-1
  run_once: true

- name: Give it back
  sglang.deploy.rollout_lease:
    state: released
    holder: "{{ lookup('sglang.deploy.controller') }}"
  delegate_to: router-1
  run_once: true
"""

RETURN = r"""
lease:
  description: The lease after the call (null when there is none).
  type: dict
  returned: always
  contains:
    id:
      description: Its holder's id.
      type: str
      sample: 3f6c0f8d9a1b2c4e
    user:
      description: The holder's user on its controller.
      type: str
      sample: alice
    controller:
      description: The holder's controller host.
      type: str
      sample: laptop-alice
    pid:
      description: The holder's C(ansible-playbook) process.
      type: int
      sample: 48213
    command:
      description: Its command line (the values of secret-looking variables left out).
      type: str
      sample: ansible-playbook deploy.yml -e hicache_ratio=3.0
    started:
      description: When the holder took the lease (seconds since the epoch).
      type: float
      sample: 1796425664.0
    renewed:
      description: When it last took or renewed it.
      type: float
      sample: 1796425964.0
    expires:
      description: When it expires unless renewed.
      type: float
      sample: 1796433164.0
  sample: {"id": "3f6c0f8d9a1b2c4e", "user": "alice", "controller": "laptop-alice", "pid": 48213,
           "command": "ansible-playbook deploy.yml -e hicache_ratio=3.0", "expires": 1796433164.0}
host:
  description: O(host), as given.
  type: str
  returned: always
  sample: router-1
stale:
  description: Why the lease is stale (O(state=read)), empty when it is live or there is none.
  type: str
  returned: when O(state=read)
  sample: it expired at 2026-12-05 03:00:00 UTC (its holder stopped renewing it)
took_over:
  description: The stale lease this call took over (O(state=held)), null when it took over none.
  type: dict
  returned: when O(state=held)
  sample: {"id": "0a1b2c3d4e5f6071", "user": "bob", "controller": "ci-runner", "pid": 1234, "stale": "..."}
"""

import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils import _lease
from ansible_collections.sglang.deploy.plugins.module_utils._json_file import read_object


def would(module: AnsibleModule) -> dict[str, Any]:
    """What O(state=held) or O(state=released) would do, for check mode: nothing is written."""
    p = module.params
    current = read_object(p["path"])
    ours = bool(current) and current.get("id") == p["holder"].get("id")
    if p["state"] == "released":
        return {"changed": ours, "lease": current}
    stale = _lease.staleness(current, time.time(), p["gone"])
    free = not current or ours or (stale and p["takeover"] == current.get("id"))
    return {"changed": not ours and bool(free), "lease": current, "took_over": None, "stale": stale}


def run(module: AnsibleModule) -> dict[str, Any]:
    p = module.params
    if p["state"] == "read":
        return _lease.read(p["path"], gone=p["gone"])
    if not p["holder"].get("id"):
        module.fail_json(msg="rollout_lease: holder has no id; allowed: what the lookup sglang.deploy.controller gives")
    if module.check_mode:
        return would(module)
    if p["state"] == "released":
        return _lease.release(p["path"], str(p["holder"]["id"]), p["lock_timeout"])
    if p["renew"]:
        current = read_object(p["path"])
        if not current or current.get("id") != p["holder"]["id"]:
            who = _lease.describe(current, time.time()) if current else "nobody (it was released or removed)"
            module.fail_json(msg=f"ROLLOUT LEASE LOST: this run held the rollout lease, which is now held by {who}. "
                                 "This rollout stops before its next batch; nothing more is changed.")
    try:
        return _lease.hold(p["path"], p["holder"], p["ttl"], p["takeover"], p["gone"],
                           lock_timeout=p["lock_timeout"])
    except _lease.LeaseRefused as exc:
        running = f" Not stale yet: {p['running']}." if p["running"] else ""
        module.fail_json(msg=f"{exc}{running}", lease=read_object(p["path"]), host=p["host"])


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["held", "released", "read"], "default": "read"},
            "path": {"type": "path", "default": _lease.DEFAULT_FILE},
            "holder": {"type": "dict", "default": {}},
            "ttl": {"type": "int", "default": 7200},
            "renew": {"type": "bool", "default": False},
            "takeover": {"type": "str", "default": ""},
            "gone": {"type": "dict", "default": {}},
            "running": {"type": "str", "default": ""},
            "lock_timeout": {"type": "int", "default": _lease.DEFAULT_LOCK_TIMEOUT},
            "host": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    if module.params["lock_timeout"] < 1:
        module.fail_json(msg="rollout_lease: lock_timeout (sglang_rollout_lease_lock_timeout) must be whole seconds "
                             f"of at least 1, not {module.params['lock_timeout']}")
    try:
        result = run(module)
    except (_lease.LeaseLocked, _lease.LeaseUnsafe) as exc:
        module.fail_json(msg=str(exc), host=module.params["host"])
    module.exit_json(host=module.params["host"], **result)


if __name__ == "__main__":
    main()
