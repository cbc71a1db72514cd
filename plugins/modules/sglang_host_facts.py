#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read what the preflight needs from a GPU host, in one round trip, changing nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_host_facts
short_description: Read GPUs, free memory, the model and the port of an SGLang host
author: sglang-deploy contributors (@sglang-deploy)
description:
  - Runs C(nvidia-smi) for the GPUs (count, name, memory, compute capability) and the compute
    processes on them, reads C(MemAvailable) from C(/proc/meminfo) and adds back the memory of the
    unit's own processes (they free it when the unit restarts, so the new server can use it), reads
    the model's and the draft's C(config.json) and the sizes of their safetensors, and checks that no
    other process listens on the server port.
  - Problems a deploy must not go past are returned in RV(facts.errors), each naming the variable to
    fix. The module itself never fails for them, so the preflight can report every problem of every host.
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
  bind:
    description:
      - The address the server binds (C(sglang_host)); C(/server_info) is asked there, or on 127.0.0.1 for a
        wildcard or loopback address.
    type: str
    version_added: "2.0.0"
  api_key:
    description: The key C(/server_info) needs when the server has one (C(sglang_api_key)); never logged.
    type: str
    version_added: "2.0.0"
  ca_path:
    description:
      - With TLS on the server (C(sglang_tls_cert)), the CA file its certificate is verified against
        (C(sglang_config.tls.ca_file)); C(/server_info) is then asked over C(https). While that file is not on the
        host yet (TLS is being turned on), the server is not asked.
    type: path
    version_added: "2.0.0"
  observed_file:
    description: What the server's last start measured, as the readiness waiter recorded it (sglang_ready's
      O(sglang.deploy.sglang_ready#module:observed_file)); read when it exists, is no link and root (or the
      reader) owns it.
    type: path
  disk_file:
    description: The disk's sequential read rate under the model, as module M(sglang.deploy.sglang_disk_rate)
      recorded it; read when it exists, is no link and root (or the reader) owns it.
    type: path
    version_added: "2.0.0"
  stamps:
    description:
      - Install roles whose stamps to read too (what module M(sglang.deploy.converge_stamp) reads with
        O(sglang.deploy.converge_stamp#module:state=read)), returned as the fact C(sglang_deploy_stamps) for the
        roles of this run. One read of the host for the preflight and the install roles' decisions.
    type: list
    elements: str
    default: []
  deployed_files:
    description:
      - The server's deployed files (unit, environment, secrets). When given, the result also holds
        RV(deployed) - what M(sglang.deploy.sglang_service_state) returns for them - so that deploy.yml reads
        each host once for its plan and its restart decision.
    type: list
    elements: path
  presharded_dir:
    description:
      - With C(sglang_presharded), the directory of the presharded dumps. The result then also holds the
        fingerprints of the model's and the draft's safetensors (RV(facts.weights_fingerprint)) and what is under
        the directory (RV(facts.presharded)).
    type: path
    version_added: "2.0.0"
  stamps_dir:
    description: Where the stamps are kept.
    type: path
    default: /var/lib/sglang-deploy/stamps
requirements:
  - systemd
  - C(ss) (iproute2) for the port check
extends_documentation_fragment: [sglang.deploy.attributes, sglang.deploy.attributes.read_only, sglang.deploy.nvidia_smi]
"""

EXAMPLES = r"""
- name: Read the host
  sglang.deploy.sglang_host_facts:
    unit: sglang-kimi.service
    model_path: /models/Kimi-K2.5
    draft_model_path: /models/Kimi-K2.5-EAGLE3
    port: 30000
  register: host_facts

- name: Read the host, and the server's deployed files and unit state with it (one read per host)
  sglang.deploy.sglang_host_facts:
    unit: sglang-kimi.service
    model_path: /models/Kimi-K2.5
    port: 30000
    deployed_files: [/etc/systemd/system/sglang-kimi.service, /etc/sglang/kimi.env]
  register: host_facts
"""

RETURN = r"""
facts:
  description: What the host has, and the problems found on it.
  type: dict
  returned: always
  contains:
    gpu_count:
      description: GPUs C(nvidia-smi) reports; absent when it did not answer (see RV(facts.notes)).
      type: int
      sample: 8
    gpu_names:
      description: The distinct GPU names.
      type: list
      elements: str
      sample: ["NVIDIA RTX PRO 6000 Blackwell Server Edition"]
    gpu_memory_mib:
      description: Memory of the smallest GPU, in MiB.
      type: int
      sample: 97887
    compute_capability:
      description: Compute capability of the first GPU.
      type: str
      sample: "12.0"
    compute_modes:
      description: Compute mode of each GPU, in index order.
      type: list
      elements: str
      sample: ["Default", "Default"]
    iommu:
      description: How the IOMMU treats the GPUs (off, passthrough, translated, mixed or unknown), from their groups.
      type: str
      sample: "off"
    p2p_read:
      description: "C(nvidia-smi topo -p2p r) as C({<gpu>-<gpu>: status}) for every ordered pair; empty when unread."
      type: dict
      sample: {"0-1": "OK", "1-0": "OK"}
    compute_apps:
      description: Processes on the GPUs outside the unit.
      type: list
      elements: dict
      contains:
        pid:
          description: Process ID.
          type: int
          sample: 4242
        name:
          description: Process name.
          type: str
          sample: python3
        used_memory_mib:
          description: GPU memory it holds, in MiB, as C(nvidia-smi) prints it.
          type: str
          sample: "1000"
    unit_memory_bytes:
      description:
        - Memory the unit's processes hold that the kernel cannot reclaim, freed when the server restarts -
          C(anon) + C(shmem) of the unit's cgroup C(memory.stat) (cgroup v1 - C(total_rss) + C(total_shmem)),
          which is where HiCache's pinned host pool lives. Page cache is left out - C(MemAvailable) already
          counts it. C(MemoryCurrent) when C(memory.stat) cannot be read; 0 when the unit does not run.
      type: int
      sample: 17179869184
    host_mem_available_bytes:
      description: C(MemAvailable) plus RV(facts.unit_memory_bytes).
      type: int
      sample: 449000000000
    numa_memory:
      description:
        - The host's NUMA nodes as SGLang's binding meets them - what each node has available (its C(MemFree), file
          LRU and C(KReclaimable), as C(MemAvailable) counts them host-wide, plus the unit's anonymous and shared
          memory there from C(memory.numa_stat)) and the node of each GPU (C(nvidia-smi topo -m)). Null with one
          node.
      type: dict
      returned: always
      sample: {"nodes": {"0": 220000000000, "1": 221000000000}, "gpus": [0, 0, 0, 0, 1, 1, 1, 1]}
      contains:
        nodes:
          description: Bytes available on each node, by node number.
          type: dict
          sample: {"0": 220000000000, "1": 221000000000}
        gpus:
          description: The node of each GPU, GPU 0 first; null for a GPU without one; empty when unread.
          type: list
          elements: int
          sample: [0, 0, 0, 0, 1, 1, 1, 1]
    model_config:
      description: The model's C(config.json); null when unreadable (see RV(facts.errors)).
      type: dict
      sample: {"architectures": ["KimiK25ForConditionalGeneration"]}
    weight_bytes_total:
      description: Size of the model's safetensors files.
      type: int
      sample: 547000000000
    draft_config:
      description: The draft model's C(config.json).
      type: dict
      returned: when O(draft_model_path) is set
      sample: {"architectures": ["LlamaForCausalLMEagle3"]}
    draft_weight_bytes_total:
      description: Size of the draft model's safetensors files.
      type: int
      returned: when O(draft_model_path) is set
      sample: 3000000000
    weights_fingerprint:
      description: Digest of the model's safetensors files (name, size, mtime), the dump key's part for them.
      type: str
      returned: when O(presharded_dir) is set
      version_added: "2.0.0"
    draft_weights_fingerprint:
      description: The same for the draft's.
      type: str
      returned: when O(presharded_dir) and O(draft_model_path) are set
      version_added: "2.0.0"
    presharded:
      description: What is under O(presharded_dir) - each dump (by key) with whether it is complete, its bytes and
        mtime - and the free bytes of its filesystem.
      type: dict
      returned: when O(presharded_dir) is set
      version_added: "2.0.0"
      sample: {"exists": true, "free_bytes": 1200000000000, "dumps": {"0123456789abcdef": {"ready": true,
               "bytes": 560000000000, "mtime": 1764930000}}}
    errors:
      description: Problems a deploy must not go past, each naming the variable to fix.
      type: list
      elements: str
      sample: ["sglang_port: 30000 is already bound on this host by another process (...); allowed: a free port"]
    notes:
      description: What could not be read, such as the GPUs of a host whose driver is not installed yet.
      type: list
      elements: str
      sample: []
    startup_observed:
      description:
        - The record of O(observed_file) - the start's time, invocation, identity (the settings that decide the
          memory before the KV pool) and measured figures; absent without the file.
      type: dict
      returned: when O(observed_file) exists and holds a JSON object
      sample: {"recorded_at": "2026-12-01T10:12:40Z", "identity": {"tp_size": 8},
               "startup": {"pre_load_free_bytes": 100738457928, "weights_bytes": 79489243955, "kv_tokens": 154998}}
    disk_rate:
      description:
        - The record of O(disk_file) - the file read, bytes, seconds, C(gb_per_s), method, C(measured_at) and
          C(model_path); absent without the file.
      type: dict
      returned: when O(disk_file) exists and holds a JSON object
      version_added: "2.0.0"
      sample: {"model_path": "/models/Kimi-K2.5", "gb_per_s": 5.506368, "method": "O_DIRECT"}
deployed:
  description: What M(sglang.deploy.sglang_service_state) returns for O(deployed_files) and O(unit).
  type: dict
  returned: when O(deployed_files) is given
  contains:
    files:
      description: Each of O(deployed_files) and its SHA-1 checksum, null when the file does not exist.
      type: dict
      sample: {"/etc/systemd/system/sglang-kimi.service": "0beec7b5ea3f0fdbc95d0dd47f3c5bc275da8a33",
               "/etc/sglang/kimi.env": null}
    unit:
      description:
        - The unit's C(LoadState), C(ActiveState), C(MainPID), C(ExecMainStartTimestampMonotonic) and
          C(NeedDaemonReload), as C(systemctl show) gives them.
      type: dict
      sample: {"LoadState": "loaded", "ActiveState": "active", "MainPID": "48213",
               "ExecMainStartTimestampMonotonic": "2134567890", "NeedDaemonReload": "no"}
    running:
      description:
        - What the running server was started from (see RV(sglang.deploy.sglang_service_state#module:running)), null
          when no main process runs - its PID, argv, start, C(need_daemon_reload) and C(changed_after_start).
        - With O(port), also C(listening) - whether the unit's server accepts connections on its port, which SGLang
          opens only once loaded (a server an earlier run restarted may still be loading).
        - When it listens, also C(live) - the live settings it holds (SGLang 0.5.23 C(GET /server_info), the
          C(internal_states) every data-parallel rank agrees on), null when it did not answer.
      type: dict
      sample: {"pid": 48213, "argv": ["/opt/sglang/0.5.23/venv/bin/python", "-m", "sglang.launch_server"],
               "started": 1796425664.022, "need_daemon_reload": false, "changed_after_start": [],
               "live": {"speculative_accept_threshold_single": 1.0, "speculative_accept_threshold_acc": 1.0}}
    unit_file:
      description:
        - The unit file on the host (the first of O(deployed_files)) as the live-change decision compares it - what
          its ExecStart= runs (C(exec), null when systemd fills part of it in) and the SHA-1 of the rest (C(rest));
          null when it does not exist.
      type: dict
      sample: {"exec": ["/opt/sglang/0.5.23/venv/bin/python", "-m", "sglang.launch_server"],
               "rest": "0beec7b5ea3f0fdbc95d0dd47f3c5bc275da8a33"}
    reboot:
      description: Whether a reboot is pending (C(/run/reboot-required)), and the packages that asked for it.
      type: dict
      sample: {"required": false, "packages": []}
ansible_facts:
  description: The stamps of O(stamps), as M(sglang.deploy.converge_stamp) returns them.
  type: dict
  returned: when O(stamps) is not empty
  contains:
    sglang_deploy_stamps:
      description: For each of O(stamps), whether it was found, its digest and the drift since it was recorded.
      type: dict
      returned: always
      sample: {"nvidia_driver": {"found": true, "digest": "5b0e3c...", "drift": []}}
"""

import json
import os
import re
from collections.abc import Sequence
from typing import Any
from urllib.error import HTTPError, URLError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import open_url
from ansible_collections.sglang.deploy.plugins.module_utils import _live, _service_state, _stamp
from ansible_collections.sglang.deploy.plugins.module_utils import _nvidia_smi as smi
from ansible_collections.sglang.deploy.plugins.module_utils._json_file import read_object
from ansible_collections.sglang.deploy.plugins.module_utils._load import safetensors_bytes
from ansible_collections.sglang.deploy.plugins.module_utils._systemd import SystemctlError
from ansible_collections.sglang.deploy.plugins.module_utils._systemd import show as systemctl_show
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_gpu_topology import iommu_mode, parse_p2p
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_numa import (
    node_available,
    numa_stat_held,
    parse_topo_numa,
)
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_presharded import read_fingerprint, read_state

# The facts use the first six; the driver's stamp records this very query (roles/nvidia_driver/vars/main.yml,
# __nvidia_driver_manifest.commands), so one nvidia-smi call serves both (Answers). On a host whose GPUs are not
# kept initialised (persistence mode off), every call initialises each GPU again: "order of 1-3 second" per GPU
# by NVIDIA's Driver Persistence guide (docs.nvidia.com/deploy/driver-persistence, Overview).
GPU_FIELDS = ("index", "name", "memory.total", "compute_cap", "compute_mode", "pci.bus_id", "persistence_mode", "uuid",
              "driver_version")
APP_FIELDS = ("pid", "process_name", "used_memory")
CGROUP_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified")


def gpu_facts(rows: list[dict[str, str]]) -> dict[str, Any]:
    """The GPU facts of nvidia-smi's rows (GPU_FIELDS), at least one."""
    memory = [value for value in (smi.mib(row["memory.total"]) for row in rows) if value is not None]
    return {"gpu_count": len(rows), "gpu_names": sorted({row["name"] for row in rows}),
            "gpu_memory_mib": min(memory) if memory else None, "compute_capability": rows[0]["compute_cap"],
            "compute_modes": [row["compute_mode"] for row in rows],
            "iommu": iommu_mode([row["pci.bus_id"] for row in rows])}


class Answers:
    """The nvidia-smi answers of one read, each command run once (bounded as smi.run bounds it). The stamps'
    commands take an answer the facts already got (stamp_runner)."""

    def __init__(self, module: AnsibleModule, nvidia_smi: str) -> None:
        self.module, self.nvidia_smi = module, nvidia_smi
        self.answers: dict[tuple[str, ...], smi.Answer] = {}

    def ask(self, args: list[str]) -> smi.Answer:
        key = tuple(args)
        if key not in self.answers:
            self.answers[key] = smi.run(self.module, self.nvidia_smi, args)
        return self.answers[key]

    def stamp_runner(self) -> _stamp.Run:
        """The stamps' runner: a command this read already ran as ``nvidia-smi ARGS`` gives that answer (exit
        127 when nvidia-smi is not installed, as _stamp.module_runner says), any other runs."""
        run = _stamp.module_runner(self.module)

        def shared(argv: Sequence[str]) -> tuple[int, str]:
            answer = self.answers.get(tuple(argv[1:])) if argv and argv[0] == self.nvidia_smi else None
            if answer is None:
                return run(argv)
            return (127 if answer.rc is None else answer.rc), answer.out
        return shared


def gpus(module: AnsibleModule, nvidia_smi: str, answers: Answers | None = None) -> tuple[dict[str, Any], list[str]]:
    """GPU facts, and notes. A host without a working driver yet (a first deploy installs it in its
    driver phase) gives no facts and a note: the plan then uses the inventory's values, and the
    driver role checks the GPUs once the driver runs."""
    answers = answers or Answers(module, nvidia_smi)
    try:
        answer, rows = smi.query(module, nvidia_smi, GPU_FIELDS, ask=answers.ask)
    except ValueError as exc:
        answer, rows = smi.Answer(1, "", str(exc)), []
    if not answer.ok:
        return {}, [f"nvidia-smi did not answer ({answer.error[:200] or 'failed'}); the plan uses the inventory's "
                    "GPU values (sglang_gpu_*), and the driver phase checks the GPUs"]
    if not rows:
        return {"gpu_count": 0}, ["nvidia-smi reports no GPU"]
    facts = gpu_facts(rows)
    topo = answers.ask(["topo", "-p2p", "r"])
    facts["p2p_read"] = parse_p2p(topo.out) if topo.ok else {}
    return facts, [] if topo.ok else [f"nvidia-smi topo -p2p r did not answer ({topo.error[:200]}); the P2P "
                                      "settings are not checked against the host"]


def unit_properties(module: AnsibleModule, unit: str) -> tuple[dict[str, str], str]:
    """The unit's ControlGroup, MemoryCurrent and its state (LoadState, ActiveState), and why systemctl could
    not tell (empty properties then)."""
    try:
        return systemctl_show(module, unit, ("ControlGroup", "MemoryCurrent", *_service_state.UNIT_PROPERTIES)), ""
    except SystemctlError as exc:
        return {}, str(exc)


def deployed(module: AnsibleModule, paths: list[str], unit: dict[str, str], unit_error: str,
             listening: bool | None = None) -> dict[str, Any]:
    """What sglang_service_state returns for these files and the unit, with whether the server listens on its
    port yet (SGLang opens it only once loaded), what the unit file (the first path) runs, and the live settings
    the listening server holds (/server_info); fails the module as sglang_service_state does."""
    if unit_error:
        module.fail_json(msg=f"sglang_host_facts: {unit_error}")
    unit_state = {name: unit.get(name, "") for name in _service_state.UNIT_PROPERTIES}
    try:
        state = _service_state.deployed_state(paths, unit_state, listening=listening)
    except OSError as exc:
        module.fail_json(msg=f"sglang_host_facts: {exc.filename}: {exc.strerror}")
    if state["running"] is not None:
        state["running"]["live"] = live_settings(module) if listening else None
    return state


def live_settings(module: AnsibleModule) -> dict[str, float] | None:
    """The live settings the server holds (GET /server_info, its internal_states), None when it does not answer."""
    p = module.params
    headers = {"Authorization": f"Bearer {p['api_key']}"} if p["api_key"] else {}
    ca_path = p.get("ca_path") or None
    if ca_path and not os.path.isfile(ca_path):
        return None
    url = _live.server_url(p["bind"], p["port"], ca_path is not None) + "/server_info"
    try:
        with open_url(url, headers=headers, timeout=30, validate_certs=ca_path is not None,
                      ca_path=ca_path) as response:
            info = json.loads(response.read())
    except (OSError, ValueError, HTTPError, URLError, UrlsConnectionError):
        return None
    return _live.server_values(info)


def unit_pids(group: str) -> set[int]:
    """The processes of a control group (cgroup v2, or v1's systemd and unified hierarchies)."""
    pids: set[int] = set()
    for root in CGROUP_ROOTS:
        path = f"{root}{group}/cgroup.procs"
        if group and os.path.exists(path):
            with open(path, encoding="ascii") as handle:
                pids |= {int(line) for line in handle if line.strip()}
    return pids


def unit_memory(value: str) -> int:
    """MemoryCurrent in bytes; systemd prints [not set] (or 2^64-1) when it does not count."""
    return int(value) if value.isdigit() and int(value) < 2**63 - 1 else 0


# memory.stat fields that are not reclaimable: cgroup v2, then v1 (hierarchical totals).
UNRECLAIMABLE = (("/sys/fs/cgroup", ("anon", "shmem")), ("/sys/fs/cgroup/memory", ("total_rss", "total_shmem")))


def unreclaimable_memory(group: str, roots: tuple[tuple[str, tuple[str, ...]], ...] = UNRECLAIMABLE) -> int | None:
    """Anonymous and shared memory of a control group, from its memory.stat; None when there is none to read."""
    for root, keys in roots:
        try:
            with open(f"{root}{group}/memory.stat", encoding="ascii") as handle:
                stat = dict(line.split(None, 1) for line in handle if " " in line)
        except OSError:
            continue
        if all(key in stat for key in keys):
            return sum(int(stat[key]) for key in keys)
    return None


NODE_ROOT = "/sys/devices/system/node"
# memory.numa_stat of a control group, where its memory.stat is: cgroup v2, then v1's memory hierarchy.
NUMA_STAT_ROOTS = tuple(root for root, _keys in UNRECLAIMABLE)


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read()
    except OSError:
        return None


def numa_facts(group: str, answers: Answers, gpu_count: int, node_root: str = NODE_ROOT,
               numa_stat_roots: Sequence[str] = NUMA_STAT_ROOTS) -> tuple[dict[str, Any] | None, list[str]]:
    """The nodes' available memory (with what the unit holds on each added back) and the node of each GPU; None
    with fewer than two nodes. Notes say what could not be read."""
    try:
        names = sorted(name for name in os.listdir(node_root) if re.fullmatch(r"node\d+", name))
    except OSError:
        names = []
    if len(names) < 2:
        return None, []
    held: dict[str, int] = {}
    for root in numa_stat_roots if group else ():
        text = read_text(f"{root}{group}/memory.numa_stat")
        if text:
            held = numa_stat_held(text)
            break
    nodes = {}
    for name in names:
        node = name[4:]
        meminfo = read_text(os.path.join(node_root, name, "meminfo")) or ""
        nodes[node] = node_available(meminfo) + held.get(node, 0)
    gpus: list[int | None] = []
    notes = []
    if gpu_count:
        topo = answers.ask(["topo", "-m"])
        gpus = parse_topo_numa(topo.out) if topo.ok else []
        if not gpus:
            notes.append(f"nvidia-smi topo -m gave no NUMA affinity ({(topo.error or topo.out)[:200]}); the plan "
                         "cannot check each NUMA node's memory")
    return {"nodes": nodes, "gpus": gpus}, notes


def foreign_compute_apps(module: AnsibleModule, nvidia_smi: str, own: set[int]) -> list[dict[str, Any]]:
    _answer, rows = smi.query(module, nvidia_smi, APP_FIELDS, what="compute-apps", strict=False)
    return [{"pid": int(row["pid"]), "name": row["process_name"], "used_memory_mib": row["used_memory"]}
            for row in rows if row["pid"].isdigit() and int(row["pid"]) not in own]


def mem_available() -> int:
    with open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def model(path: str, var: str) -> tuple[dict[str, Any] | None, int, list[str]]:
    if not os.path.isdir(path):
        return None, 0, [f"{var}: {path} is not a directory on this host; allowed: the model directory"]
    config_path = os.path.join(path, "config.json")
    try:
        with open(config_path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        return None, 0, [f"{var}: {config_path} cannot be read as JSON ({exc})"]
    return config, safetensors_bytes(path), []


def listeners(module: AnsibleModule, port: int) -> str:
    """``ss``'s lines for TCP listeners on the port; empty when there is none or ss cannot tell."""
    ss = module.get_bin_path("ss")
    if not ss:
        return ""
    rc, out, _stderr = module.run_command([ss, "-Htlnp", "sport", "=", f":{port}"])
    return out.strip() if rc == 0 else ""


def port_holder(listening: str, own: set[int]) -> str | None:
    """Who listens on the port (``ss`` lines), when it is not the unit itself. Without the owner's PID
    (ss shows it only with the right to inspect every process), a listener counts as the unit's while
    the unit has processes, and as foreign when it has none."""
    if not listening:
        return None
    pids = {int(pid) for pid in re.findall(r"pid=(\d+)", listening)}
    if (pids and pids <= own) or (not pids and own):
        return None
    return " ".join(listening.splitlines()[0].split())


def model_facts(facts: dict[str, Any], params: dict[str, Any]) -> list[str]:
    """Read the model and the draft into facts; the problems found."""
    facts["model_config"], facts["weight_bytes_total"], errors = model(params["model_path"], "sglang_model_path")
    if params["draft_model_path"]:
        facts["draft_config"], facts["draft_weight_bytes_total"], problems = model(
            params["draft_model_path"], "sglang_speculative_draft_model_path")
        errors += problems
    if params.get("presharded_dir"):
        facts["weights_fingerprint"] = read_fingerprint(params["model_path"])
        if params["draft_model_path"]:
            facts["draft_weights_fingerprint"] = read_fingerprint(params["draft_model_path"])
        facts["presharded"] = read_state(params["presharded_dir"])
    return errors


def conflicts(unit: str, port: int | None, apps: list[dict[str, Any]], holder: str | None) -> list[str]:
    """Refusals for GPU processes and a port listener outside the unit."""
    errors = [f"a process outside {unit} holds a GPU: PID {app['pid']} ({app['name']}, {app['used_memory_mib']} MiB);"
              " a new server would run out of GPU memory. Stop it yourself (sglang-deploy ends only processes it "
              "started)" for app in apps]
    if holder:
        errors.append(f"sglang_port: {port} is already bound on this host by another process ({holder}); "
                      "allowed: a free port")
    return errors


def host_facts(module: AnsibleModule, unit: dict[str, str], answers: Answers) -> dict[str, Any]:
    p = module.params
    facts, notes = gpus(module, p["nvidia_smi_path"], answers)
    own = unit_pids(unit.get("ControlGroup", ""))
    facts["compute_apps"] = foreign_compute_apps(module, p["nvidia_smi_path"], own) if facts.get("gpu_count") else []
    held = unreclaimable_memory(unit["ControlGroup"]) if unit.get("ControlGroup") else None
    facts["unit_memory_bytes"] = held if held is not None else unit_memory(unit.get("MemoryCurrent", ""))
    facts["host_mem_available_bytes"] = mem_available() + facts["unit_memory_bytes"]
    facts["numa_memory"], numa_notes = numa_facts(unit.get("ControlGroup", ""), answers, facts.get("gpu_count") or 0)
    notes += numa_notes
    errors = model_facts(facts, p)
    listening = listeners(module, p["port"]) if p["port"] else ""
    holder = port_holder(listening, own) if p["port"] else None
    # The unit's own server listens: SGLang opens its port only once loaded (None: no port asked, nothing known).
    facts["server_listening"] = (bool(listening) and holder is None and bool(own)) if p["port"] else None
    facts["errors"] = errors + conflicts(p["unit"], p["port"], facts["compute_apps"], holder)
    facts["notes"] = notes
    observed = read_object(p["observed_file"]) if p["observed_file"] else None
    if observed is not None:
        facts["startup_observed"] = observed
    disk = read_object(p["disk_file"]) if p["disk_file"] else None
    if disk is not None:
        facts["disk_rate"] = disk
    return facts


ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "unit": {"type": "str", "required": True},
    "model_path": {"type": "path", "required": True},
    "draft_model_path": {"type": "path"},
    "port": {"type": "int"},
    "bind": {"type": "str"},
    "api_key": {"type": "str", "no_log": True},
    "ca_path": {"type": "path"},
    "observed_file": {"type": "path"},
    "disk_file": {"type": "path"},
    "stamps": {"type": "list", "elements": "str", "default": []},
    "stamps_dir": {"type": "path", "default": _stamp.DEFAULT_DIR},
    "presharded_dir": {"type": "path"},
    "deployed_files": {"type": "list", "elements": "path"},
    "nvidia_smi_path": {"type": "str", "default": "nvidia-smi"},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    unit, unit_error = unit_properties(module, p["unit"])
    answers = Answers(module, p["nvidia_smi_path"])
    result: dict[str, Any] = {"changed": False, "facts": host_facts(module, unit, answers)}
    listening = result["facts"].pop("server_listening", None)  # the restart decision's, not the plan's
    if p["deployed_files"] is not None:
        result["deployed"] = deployed(module, p["deployed_files"], unit, unit_error, listening)
    if p["stamps"]:
        try:
            stamps = _stamp.read_many(p["stamps"], p["stamps_dir"], answers.stamp_runner())
        except ValueError as exc:
            module.fail_json(msg=f"sglang_host_facts: stamps: {exc}")
        result["ansible_facts"] = {"sglang_deploy_stamps": stamps}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
