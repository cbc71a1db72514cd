#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deployed files' checksums, the unit's state and a pending reboot, in one read of the host."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_service_state
short_description: Read a server's deployed files and its unit's state in one call
author: sglang-deploy contributors (@sglang-deploy)
description:
  - "For each of O(files), its SHA-1 checksum (the algorithm of M(ansible.builtin.stat)'s default, which
    the controller compares with what the templates render now), or null when it is missing; and the
    unit's O(properties) as C(systemctl show) gives them."
  - "One module call where the role used one M(ansible.builtin.stat) per file and a C(systemctl show)
    command: on the no-op path of a deploy this is read for every server, so each call saved is saved
    once per host."
  - A file that exists but cannot be read is an error (the comparison would be wrong), not a missing file.
version_added: "2.0.0"
options:
  unit:
    description: The systemd unit.
    type: str
    required: true
  files:
    description: Absolute paths of the files to checksum.
    type: list
    elements: path
    default: []
  properties:
    description:
      - The unit's properties to read. RV(running) needs C(ActiveState) and C(MainPID), and
        C(ExecMainStartTimestampMonotonic) and C(NeedDaemonReload) for its evidence.
    type: list
    elements: str
    default: [LoadState, ActiveState, MainPID, ExecMainStartTimestampMonotonic, NeedDaemonReload]
  reboot_required_file:
    description: The flag a kernel or driver update leaves for a pending reboot (Debian's and Ubuntu's).
    type: path
    default: /run/reboot-required
extends_documentation_fragment: [sglang.deploy.attributes, sglang.deploy.attributes.read_only]
"""

EXAMPLES = r"""
- name: Read the deployed files and the unit's state
  sglang.deploy.sglang_service_state:
    unit: sglang-kimi.service
    files: [/etc/systemd/system/sglang-kimi.service, /etc/sglang/kimi.env]
  register: deployed
"""

RETURN = r"""
files:
  description: Each of O(files) and its SHA-1 checksum, null when the file does not exist.
  type: dict
  returned: always
  sample: {"/etc/systemd/system/sglang-kimi.service": "0b6f0d5e1c2a9f3d4e5b6a7c8d9e0f1a2b3c4d5e",
           "/etc/sglang/kimi.env": null}
unit:
  description: The unit's O(properties), as C(systemctl show) prints them.
  type: dict
  returned: always
  sample: {"LoadState": "loaded", "ActiveState": "active"}
  contains:
    LoadState:
      description: C(loaded), or C(not-found) before the unit is installed (when read).
      type: str
      returned: when in O(properties)
      sample: loaded
    ActiveState:
      description: C(active), C(activating), C(inactive), C(failed), ... (when read).
      type: str
      returned: when in O(properties)
      sample: active
running:
  description:
    - What the running server was started from, null when the unit has no running main process. The restart
      decision and status.yml compare it with the files on disk, since a deploy that died between writing them
      and restarting the server leaves the old process serving under the new files.
  type: dict
  returned: always
  contains:
    pid:
      description: The main process (systemd's C(MainPID)).
      type: int
      sample: 48213
    argv:
      description: Its argv as the kernel keeps it (C(/proc/<pid>/cmdline)), null when it cannot be read.
      type: list
      elements: str
      sample: [/opt/sglang/0.5.23/venv/bin/python, -m, sglang.launch_server, --hicache-ratio, "2.0"]
    started:
      description: When it started, in seconds of the host's wall clock (from C(ExecMainStartTimestampMonotonic)).
      type: float
      sample: 1796425664.022
    need_daemon_reload:
      description: systemd has loaded another version of the unit file than the one on disk.
      type: bool
      sample: false
    changed_after_start:
      description: The O(files) modified after it started (their mtime is later than RV(running.started)).
      type: list
      elements: str
      sample: [/etc/sglang/kimi.env]
    listening:
      description:
        - Whether the server accepts connections on its port; null here (M(sglang.deploy.sglang_host_facts), which
          knows the port, fills it in).
      type: bool
      sample: null
  sample: {"pid": 48213, "argv": ["/opt/sglang/0.5.23/venv/bin/python", "-m", "sglang.launch_server"],
           "started": 1796425664.022, "need_daemon_reload": false, "changed_after_start": []}
reboot:
  description: Whether a reboot is pending, and the packages that asked for it.
  type: dict
  returned: always
  contains:
    required:
      description: O(reboot_required_file) exists.
      type: bool
      sample: true
    packages:
      description: The packages listed in the flag's C(.pkgs) file (the kernel's postinst hooks write it), sorted.
      type: list
      elements: str
      sample: [linux-image-6.1.0-41-amd64]
unit_file:
  description:
    - The unit file (the first of O(files)) as the live-change decision compares it
      (P(sglang.deploy.restart_decision#filter)) - what its ExecStart= runs (C(exec), null when systemd fills part
      of it in) and the SHA-1 of the rest (C(rest)); null when it does not exist.
  type: dict
  returned: always
  version_added: "2.0.0"
  sample: {"exec": ["/opt/sglang/0.5.23/venv/bin/python", "-m", "sglang.launch_server"],
           "rest": "0beec7b5ea3f0fdbc95d0dd47f3c5bc275da8a33"}
"""

import typing as t

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils import _service_state, _systemd


def read(module: AnsibleModule) -> dict[str, t.Any]:
    p = module.params
    try:
        unit = _systemd.show(module, p["unit"], p["properties"])
    except _systemd.SystemctlError as exc:
        module.fail_json(msg=f"sglang_service_state: {exc}")
    try:
        state = _service_state.deployed_state(p["files"], unit, p["reboot_required_file"])
    except OSError as exc:
        module.fail_json(msg=f"sglang_service_state: {exc.filename}: {exc.strerror}")
    return {"changed": False, **state}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "required": True},
            "files": {"type": "list", "elements": "path", "default": []},
            "properties": {"type": "list", "elements": "str", "default": list(_service_state.UNIT_PROPERTIES)},
            "reboot_required_file": {"type": "path", "default": _service_state.REBOOT_REQUIRED_FILE},
        },
        supports_check_mode=True,
    )
    module.exit_json(**read(module))


if __name__ == "__main__":
    main()
