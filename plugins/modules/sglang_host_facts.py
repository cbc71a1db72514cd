#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read what the preflight needs from a GPU host, in one round trip, changing nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_host_facts
short_description: Read GPUs, free memory, the model and the port of an SGLang host
description:
  - Runs C(nvidia-smi) for the GPUs (count, name, memory, compute capability) and the compute
    processes on them, reads C(MemAvailable) from C(/proc/meminfo) and adds back the memory of the
    unit's own processes (they free it when the unit restarts, so the new server can use it), reads
    the model's and the draft's C(config.json) and the sizes of their safetensors, and checks that no
    other process listens on the server port.
  - Problems a deploy must not go past are returned in RV(errors), each naming the variable to fix.
    The module itself never fails for them, so the preflight can report every problem of every host.
version_added: "1.0.0"
options:
  unit:
    description: The server's systemd unit (its processes are not counted as foreign).
    type: str
    required: true
  model_path:
    description: Model directory on the host.
    type: path
    required: true
  draft_model_path:
    description: Draft model directory on the host, if any.
    type: path
  port:
    description: Port the server binds.
    type: int
  nvidia_smi:
    description: The nvidia-smi command.
    type: str
    default: nvidia-smi
author: sglang-deploy contributors
"""

EXAMPLES = r"""
- name: Read the host
  sglang_host_facts:
    unit: sglang-kimi.service
    model_path: /models/Kimi-K2.5
    draft_model_path: /models/Kimi-K2.5-EAGLE3
    port: 30000
  register: host_facts
"""

RETURN = r"""
facts:
  description: >-
    gpu_count, gpu_memory_mib, compute_capability, gpu_names, compute_modes (per GPU), p2p_read
    (C(nvidia-smi topo -p2p r), {"0-1": "OK", ...}), iommu (off, passthrough, translated, mixed or
    unknown, from the GPUs' IOMMU groups), host_mem_available_bytes,
    unit_memory_bytes, model_config, draft_config, weight_bytes_total, draft_weight_bytes_total,
    compute_apps (processes on the GPUs outside the unit), errors (refusals, each naming the variable),
    notes (what could not be read, such as GPUs on a host whose driver is not installed yet).
  type: dict
  returned: always
"""

import json
import os
import re
import subprocess
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_gpu_topology import iommu_mode, parse_p2p


def run(argv: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, proc.stdout if proc.returncode == 0 else (proc.stderr or proc.stdout)


def gpus(nvidia_smi: str) -> tuple[dict[str, Any], list[str]]:
    """GPU facts, and notes. A host without a working driver yet (a first deploy installs it in its
    driver phase) gives no facts and a note: the plan then uses the inventory's values, and the
    driver role checks the GPUs once the driver runs."""
    code, out = run([nvidia_smi, "--query-gpu=index,name,memory.total,compute_cap,compute_mode,pci.bus_id",
                     "--format=csv,noheader,nounits"])
    if code != 0:
        return {}, [f"nvidia-smi did not answer ({out.strip()[:200] or 'failed'}); the plan uses the inventory's "
                    "GPU values (sglang_gpu_*), and the driver phase checks the GPUs"]
    rows = [[cell.strip() for cell in line.split(",")] for line in out.splitlines() if line.strip()]
    if not rows:
        return {"gpu_count": 0}, ["nvidia-smi reports no GPU"]
    facts: dict[str, Any] = {
        "gpu_count": len(rows), "gpu_names": sorted({r[1] for r in rows}),
        "gpu_memory_mib": min(int(float(r[2])) for r in rows), "compute_capability": rows[0][3],
        "compute_modes": [r[4] for r in rows], "iommu": iommu_mode([r[5] for r in rows])}
    code, out = run([nvidia_smi, "topo", "-p2p", "r"])
    facts["p2p_read"] = parse_p2p(out) if code == 0 else {}
    return facts, [] if code == 0 else [f"nvidia-smi topo -p2p r did not answer ({out.strip()[:200]}); the P2P "
                                        "settings are not checked against the host"]


def unit_pids(unit: str) -> set[int]:
    code, out = run(["systemctl", "show", unit, "--property=ControlGroup", "--value"])
    group = out.strip() if code == 0 else ""
    pids: set[int] = set()
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"):
        path = f"{root}{group}/cgroup.procs"
        if group and os.path.exists(path):
            with open(path, encoding="ascii") as handle:
                pids |= {int(line) for line in handle if line.strip()}
    return pids


def foreign_compute_apps(nvidia_smi: str, own: set[int]) -> list[dict[str, Any]]:
    code, out = run([nvidia_smi, "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits"])
    apps = []
    for line in out.splitlines() if code == 0 else []:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) >= 3 and cells[0].isdigit() and int(cells[0]) not in own:
            apps.append({"pid": int(cells[0]), "name": cells[1], "used_memory_mib": cells[2]})
    return apps


def mem_available() -> int:
    with open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def unit_memory(unit: str) -> int:
    code, out = run(["systemctl", "show", unit, "--property=MemoryCurrent", "--value"])
    text = out.strip()
    return int(text) if code == 0 and text.isdigit() and int(text) < 2**63 - 1 else 0


def model(path: str, var: str) -> tuple[dict[str, Any] | None, int, list[str]]:
    if not os.path.isdir(path):
        return None, 0, [f"{var}: {path} is not a directory on this host; allowed: the model directory"]
    config_path = os.path.join(path, "config.json")
    try:
        with open(config_path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        return None, 0, [f"{var}: {config_path} cannot be read as JSON ({exc})"]
    size = sum(entry.stat().st_size for entry in os.scandir(path)
               if entry.is_file() and entry.name.endswith(".safetensors"))
    return config, size, []


def port_holder(port: int | None, own: set[int]) -> str | None:
    """Who listens on the port, when it is not the unit itself. Without the owner's PID (ss shows
    it only with the right to inspect every process), a listener counts as the unit's while the
    unit has processes, and as foreign when it has none."""
    if not port:
        return None
    code, out = run(["ss", "-Htlnp", "sport", "=", f":{port}"])
    if code != 0 or not out.strip():
        return None
    pids = {int(pid) for pid in re.findall(r"pid=(\d+)", out)}
    if (pids and pids <= own) or (not pids and own):
        return None
    return " ".join(out.strip().splitlines()[0].split())


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "required": True},
            "model_path": {"type": "path", "required": True},
            "draft_model_path": {"type": "path"},
            "port": {"type": "int"},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
        },
        supports_check_mode=True,
    )
    p = module.params
    facts, notes = gpus(p["nvidia_smi"])
    errors: list[str] = []
    own = unit_pids(p["unit"])
    facts["compute_apps"] = foreign_compute_apps(p["nvidia_smi"], own) if facts.get("gpu_count") else []
    facts["unit_memory_bytes"] = unit_memory(p["unit"])
    facts["host_mem_available_bytes"] = mem_available() + facts["unit_memory_bytes"]
    facts["model_config"], facts["weight_bytes_total"], problems = model(p["model_path"], "sglang_model_path")
    errors += problems
    if p["draft_model_path"]:
        facts["draft_config"], facts["draft_weight_bytes_total"], problems = model(
            p["draft_model_path"], "sglang_speculative_draft_model_path")
        errors += problems
    for app in facts["compute_apps"]:
        errors.append(f"a process outside {p['unit']} holds a GPU: PID {app['pid']} ({app['name']}, "
                      f"{app['used_memory_mib']} MiB); a new server would run out of GPU memory. Stop it "
                      "yourself (sglang-deploy ends only processes it started)")
    holder = port_holder(p["port"], own)
    if holder:
        errors.append(f"sglang_port: {p['port']} is already bound on this host by another process ({holder}); "
                      "allowed: a free port")
    facts["errors"] = errors
    facts["notes"] = notes
    module.exit_json(changed=False, facts=facts)


if __name__ == "__main__":
    main()
