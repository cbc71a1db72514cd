#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Record what a role left on a host, and tell a later run whether the host still looks like that."""

from __future__ import annotations

DOCUMENTATION = r"""
module: converge_stamp
short_description: Stamps that let a role skip a host that is still as the role left it
author: sglang-deploy contributors (@sglang-deploy)
description:
  - "With O(state=record), after a role converged a host: writes the stamp O(dir)/O(name).json, root-only,
    holding O(digest) (the digest of the role's inputs, computed on the controller with the filter
    C(sglang.deploy.stamp_digest)) and O(manifest) with how each entry of it looks right now."
  - "With O(state=read): for each of O(names), whether a stamp exists, its digest, and every manifest
    entry that no longer looks as recorded (the drift). A role whose digest is unchanged and whose
    drift is empty has nothing to do on the host."
  - "Manifest entries and how they are compared: C(paths) by type, mode, owner and a regular file's
    SHA-256; C(listings) by the sorted names in a directory; C(trees) by every file's relative path,
    size and modification time; C(packages) by the Debian version and status (a hold included);
    C(units) by systemd's UnitFileState and ActiveState; C(users) and C(groups) by their ids (and a
    user's home and shell); C(commands) by the exit status and output of a read-only command."
  - Reading changes nothing. Recording writes only the stamp, which is bookkeeping about the host and
    not part of its configuration, so it never reports a change.
version_added: "2.0.0"
options:
  state:
    description: Read stamps, or record one.
    type: str
    choices: [read, record]
    default: read
  names:
    description: The stamps to read (O(state=read)); each is a role name.
    type: list
    elements: str
    default: []
  name:
    description: The stamp to record (O(state=record)).
    type: str
  digest:
    description: The digest of the role's inputs (O(state=record)).
    type: str
  manifest:
    description:
      - What the role manages (O(state=record)); keys are C(paths), C(listings), C(trees), C(packages),
        C(units), C(users), C(groups) (lists of strings) and C(commands) (a list of argv lists).
      - Commands must only read; they run again at every O(state=read).
    type: dict
    default: {}
  dir:
    description: Where the stamps are kept.
    type: path
    default: /var/lib/sglang-deploy/stamps
extends_documentation_fragment: [sglang.deploy.attributes]
attributes:
  check_mode:
    support: full
    details: Reading runs in check mode; recording writes nothing there.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Read the stamps of the install roles
  sglang.deploy.converge_stamp:
    names: [nvidia_driver, sglang_stack, sglang_weights]

- name: Record what the driver role manages, after it converged
  sglang.deploy.converge_stamp:
    state: record
    name: nvidia_driver
    digest: "{{ __nvidia_driver_stamp.digest }}"
    manifest:
      paths: [/etc/apt/preferences.d/nvidia-driver.pref, /proc/sys/kernel/osrelease]
      packages: [nvidia-open]
      units: [nvidia-persistenced.service]
      commands: [[nvidia-smi, "--query-gpu=driver_version", "--format=csv,noheader"]]
"""

RETURN = r"""
stamps:
  description: For each of O(names), what the stamp says and what moved since (O(state=read)).
  type: dict
  returned: when O(state=read)
  sample:
    nvidia_driver:
      found: true
      digest: 5b0e3c...
      recorded_at: "2026-12-01T10:12:03Z"
      drift: ["package nvidia-open: 580.95.05-1 hi -> absent"]
  contains:
    found:
      description: Whether a readable stamp exists.
      type: bool
      returned: always
      sample: true
    digest:
      description: The inputs' digest recorded with the stamp; null without one.
      type: str
      returned: always
      sample: 5b0e3c...
    recorded_at:
      description: When the stamp was recorded (UTC).
      type: str
      returned: when found
      sample: "2026-12-01T10:12:03Z"
    drift:
      description: One line per manifest entry that looks different now (or why there is no stamp).
      type: list
      elements: str
      returned: always
      sample: ["path /etc/modprobe.d/blacklist-nouveau.conf: file 0644 0:0 sha256:1f... -> absent"]
ansible_facts:
  description: The same as RV(stamps), as the fact C(sglang_deploy_stamps) for the roles of this run.
  type: dict
  returned: when O(state=read)
  contains:
    sglang_deploy_stamps:
      description: RV(stamps).
      type: dict
      returned: always
      sample: {}
path:
  description: The stamp file written (O(state=record); not in check mode).
  type: str
  returned: when O(state=record)
  sample: /var/lib/sglang-deploy/stamps/nvidia_driver.json
"""

import datetime
import os
import typing as t

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils import _stamp
from ansible_collections.sglang.deploy.plugins.module_utils._json_file import replace_atomically


def record(module: AnsibleModule) -> dict[str, t.Any]:
    p = module.params
    if not p["name"] or not p["digest"]:
        module.fail_json(msg="converge_stamp: state=record needs name and digest")
    try:
        path = _stamp.stamp_path(p["dir"], p["name"])
        manifest = _stamp.normalized(p["manifest"])
    except ValueError as exc:
        module.fail_json(msg=f"converge_stamp: {exc}")
    stamp = {"version": _stamp.VERSION, "name": p["name"], "digest": p["digest"], "manifest": manifest,
             "observed": _stamp.observe(manifest, _stamp.module_runner(module)),
             "recorded_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if not module.check_mode:
        os.makedirs(p["dir"], mode=0o700, exist_ok=True)
        replace_atomically(path, stamp, mode=0o600)
    return {"changed": False, "path": path}


def read(module: AnsibleModule) -> dict[str, t.Any]:
    p = module.params
    try:
        stamps = _stamp.read_many(p["names"], p["dir"], _stamp.module_runner(module))
    except ValueError as exc:
        module.fail_json(msg=f"converge_stamp: {exc}")
    return {"changed": False, "stamps": stamps, "ansible_facts": {"sglang_deploy_stamps": stamps}}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["read", "record"], "default": "read"},
            "names": {"type": "list", "elements": "str", "default": []},
            "name": {"type": "str"},
            "digest": {"type": "str"},
            "manifest": {"type": "dict", "default": {}},
            "dir": {"type": "path", "default": _stamp.DEFAULT_DIR},
        },
        supports_check_mode=True,
    )
    module.exit_json(**(record(module) if module.params["state"] == "record" else read(module)))


if __name__ == "__main__":
    main()
