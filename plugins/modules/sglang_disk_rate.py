#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Measure the disk's sequential read rate under the model's weights once per host, and keep it there."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_disk_rate
short_description: The disk's sequential read rate under a model's weights, measured once per host
author: sglang-deploy contributors (@sglang-deploy)
description:
  - Reads the record O(record) and returns it when it holds a rate measured for O(model_path). Otherwise (none
    yet, another model directory, or O(remeasure)) it reads at most O(max_bytes) of the model's largest
    C(.safetensors) file sequentially, bypassing the page cache, and writes what it measured to O(record).
  - The read uses C(O_DIRECT) in 16 MiB blocks. A file system that refuses C(O_DIRECT) (tmpfs, some overlays) is
    read after C(posix_fadvise(POSIX_FADV_DONTNEED)) instead, which drops the file's clean cached pages first; the
    record's RV(record.method) says which. Nothing is written to the model directory.
  - The record is bookkeeping about the host, not its configuration, so the module never reports a change. It is
    not written when the directory of O(record) does not exist yet (a first install); the next run measures again.
    The rate is what the next weight load is compared with (filter P(sglang.deploy.load_advice#filter)).
version_added: "2.0.0"
options:
  model_path:
    description: The model directory whose largest safetensors file is read.
    type: path
    required: true
  record:
    description:
      - The JSON file that keeps the measurement (the roles keep it in
        C(/var/lib/sglang-deploy/records/<instance>.disk.json), where only root writes).
      - It is written under a private temporary name and renamed over O(record), so a link planted there is
        replaced, not followed; a record that is a link, or that another user than root owns, is not read.
    type: path
    required: true
  max_bytes:
    description: The most the measurement reads, in bytes; whole 16 MiB blocks, at least one and at most 1 GiB.
    type: int
    default: 1073741824
  remeasure:
    description: Measure again even when the record holds a rate for O(model_path).
    type: bool
    default: false
  keep:
    description:
      - A measurement made earlier (RV(record) of a run in check mode), written to O(record) as it is, without
        measuring. Role C(sglang_config) measures while it assesses the host, when nothing may change yet, and keeps
        the measurement once no host is refused.
    type: dict
extends_documentation_fragment: [sglang.deploy.attributes]
attributes:
  check_mode:
    support: full
    details: The measurement only reads, so it runs in check mode too; the record is not written there.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Measure the disk under the weights once, and keep the measurement
  sglang.deploy.sglang_disk_rate:
    model_path: /models/Kimi-K2.5
    record: /var/lib/sglang-deploy/records/kimi.disk.json
  register: disk

- name: Measure again (a new disk)
  sglang.deploy.sglang_disk_rate:
    model_path: /models/Kimi-K2.5
    record: /var/lib/sglang-deploy/records/kimi.disk.json
    remeasure: true
"""

RETURN = r"""
record:
  description: The measurement, recorded now or read back; null when there is nothing to read (no safetensors).
  type: dict
  returned: always
  sample:
    model_path: /models/Kimi-K2.5
    path: /models/Kimi-K2.5/model-00001-of-00064.safetensors
    bytes: 1073741824
    seconds: 0.195
    gb_per_s: 5.506368
    method: O_DIRECT
    measured_at: "2026-12-05T13:40:00Z"
  contains:
    model_path:
      description: The model directory it was measured for.
      type: str
      returned: always
      sample: /models/Kimi-K2.5
    path:
      description: The file read.
      type: str
      returned: always
      sample: /models/Kimi-K2.5/model-00001-of-00064.safetensors
    bytes:
      description: Bytes read.
      type: int
      returned: always
      sample: 1073741824
    seconds:
      description: Seconds the read took.
      type: float
      returned: always
      sample: 0.195
    gb_per_s:
      description: Bytes / 10^9 / seconds; null when nothing was read.
      type: float
      returned: always
      sample: 5.506368
    method:
      description: How the page cache was bypassed, C(O_DIRECT) or C(posix_fadvise DONTNEED).
      type: str
      returned: always
      sample: O_DIRECT
    measured_at:
      description: When it was measured (UTC).
      type: str
      returned: always
      sample: "2026-12-05T13:40:00Z"
measured:
  description: Whether this run measured (rather than read the record back).
  type: bool
  returned: always
  sample: false
why:
  description: Why it measured, or why it could not; empty when the record was read back.
  type: str
  returned: always
  sample: no measurement recorded on this host yet
"""

import datetime
import os
import typing as t

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils import _load_speed
from ansible_collections.sglang.deploy.plugins.module_utils._json_file import read_object, replace_atomically


def keep(params: dict[str, t.Any], check_mode: bool) -> dict[str, t.Any]:
    """Write a measurement made earlier (``keep``), when it is one and the record's directory exists."""
    record = dict(params["keep"])
    if not record.get("gb_per_s") or record.get("model_path") != params["model_path"]:
        return {"changed": False, "record": record, "measured": False,
                "why": f"not kept: no rate measured for {params['model_path']} in it"}
    home = os.path.dirname(params["record"]) or "."
    if not os.path.isdir(home):
        return {"changed": False, "record": record, "measured": False, "why": f"not kept: {home} does not exist yet"}
    if not check_mode:
        replace_atomically(params["record"], record, mode=0o644)
    return {"changed": False, "record": record, "measured": False, "why": "kept"}


def run(params: dict[str, t.Any], check_mode: bool) -> dict[str, t.Any]:
    """The record, read back or measured now (and written, outside check mode)."""
    if params.get("keep"):
        return keep(params, check_mode)
    recorded = read_object(params["record"])
    why = _load_speed.stale(recorded, params["model_path"], params["remeasure"])
    if not why:
        return {"changed": False, "record": recorded, "measured": False, "why": ""}
    shard = _load_speed.largest_shard(params["model_path"])
    if shard is None:
        return {"changed": False, "record": None, "measured": False,
                "why": f"{why}; nothing to measure: no .safetensors file in {params['model_path']}"}
    measured = _load_speed.measure(shard, params["max_bytes"])
    record = dict(measured, model_path=params["model_path"],
                  measured_at=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    home = os.path.dirname(params["record"]) or "."
    if not os.path.isdir(home):  # a first install: the role that makes the directory has not run yet
        why += f"; not kept: {home} does not exist yet"
    elif not check_mode:
        replace_atomically(params["record"], record, mode=0o644)  # no secret in it: readable by all
    return {"changed": False, "record": record, "measured": True, "why": why}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "model_path": {"type": "path", "required": True},
            "record": {"type": "path", "required": True},
            "max_bytes": {"type": "int", "default": _load_speed.MAX_BYTES},
            "remeasure": {"type": "bool", "default": False},
            "keep": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    try:
        result = run(module.params, module.check_mode)
    except OSError as exc:
        module.fail_json(msg=f"could not measure the disk under {module.params['model_path']}: {exc}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
