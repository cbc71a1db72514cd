"""The rendered unit against what a real 8-GPU host with driver 580 shows (tests/fixtures/real-host/).

The sandbox's containers run the CI machine's kernel, whose /proc/devices has no NVIDIA groups, so
it allows its fake GPU nodes by path. Here the example inventory's unit is evaluated the way
systemd 252 evaluates DeviceAllow= (src/core/bpf-devices.c): a char-<pattern> allows the whole major
of every /proc/devices name it fnmatch()es, a /dev path allows that node's major:minor, and
DevicePolicy=closed adds the pseudo devices.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_gpu_topology as topology
from helpers import ROOT, render

REAL = ROOT / "tests" / "fixtures" / "real-host"
# bpf-devices.c (v252) allows these whatever the list says, under DevicePolicy=closed.
CLOSED_POLICY_NODES = {"/dev/null": (1, 3), "/dev/zero": (1, 5), "/dev/full": (1, 7), "/dev/random": (1, 8),
                       "/dev/urandom": (1, 9), "/dev/tty": (5, 0), "/dev/ptmx": (5, 2)}


def char_devices(name: str) -> dict[str, set[int]]:
    """The Character devices section of a /proc/devices fixture: name -> majors."""
    groups: dict[str, set[int]] = {}
    section = False
    for line in (REAL / name).read_text().splitlines():
        if line.strip() == "Character devices:":
            section = True
        elif not line.strip() or line.strip() == "Block devices:":
            section = False
        elif section:
            major, device = line.split(None, 1)
            groups.setdefault(device.strip(), set()).add(int(major))
    return groups


# The dynamic majors a node takes from its driver's /proc/devices line (nvidia-modprobe reads them there).
DYNAMIC = {"/dev/nvidia-uvm": "nvidia-uvm", "/dev/nvidia-uvm-tools": "nvidia-uvm", "/dev/nvidia-caps/": "nvidia-caps"}


def dev_nodes(proc_devices: str = "proc-devices-580.txt") -> dict[str, tuple[int, int]]:
    """The nodes of dev-nodes-580-8gpu.txt, with the dynamic majors of the given /proc/devices."""
    groups = char_devices(proc_devices)
    nodes = {}
    for line in (REAL / "dev-nodes-580-8gpu.txt").read_text().splitlines():
        if line.startswith("/dev/"):
            path, _kind, numbers = line.split()
            major, minor = (int(n) for n in numbers.split(":"))
            group = next((name for prefix, name in DYNAMIC.items() if path.startswith(prefix)), None)
            nodes[path] = (min(groups[group]) if group else major, minor)
    return nodes


def device_allow(unit: str) -> list[str]:
    return [line.split("=", 1)[1].split()[0] for line in unit.splitlines() if line.startswith("DeviceAllow=")]


def allowed(unit: str, proc_devices: str) -> tuple[set[int], set[tuple[int, int]], list[str]]:
    """(allowed majors, allowed major:minor pairs, entries that match nothing), as systemd builds them."""
    groups, nodes = char_devices(proc_devices), dev_nodes(proc_devices)
    majors: set[int] = set()
    pairs = set(CLOSED_POLICY_NODES.values())
    unmatched = []
    for entry in device_allow(unit):
        if entry.startswith("char-"):
            matched = [m for name, found in groups.items() if fnmatch.fnmatchcase(name, entry[5:]) for m in found]
            majors |= set(matched)
            if not matched:
                unmatched.append(entry)
        elif entry in nodes:
            pairs.add(nodes[entry])
        else:
            unmatched.append(entry)
    return majors, pairs, unmatched


def is_allowed(node: str, majors: set[int], pairs: set[tuple[int, int]],
               proc_devices: str = "proc-devices-580.txt") -> bool:
    number = dev_nodes(proc_devices)[node]
    return number[0] in majors or number in pairs


def cuda_nodes() -> list[str]:
    return [line for line in (REAL / "cuda-runtime-opens.txt").read_text().splitlines() if line.startswith("/dev/")]


@pytest.fixture(scope="module")
def rendered_units(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The example unit as driver 580 and as a 535 host would get it, and a two-node server's."""
    units = {}
    for name, extra in (("580", []), ("535", ["-e", "nvidia_driver_branch=535"])):
        out = tmp_path_factory.mktemp(name)
        proc = render(out, *extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        units[name] = (out / "gpu-node-1" / "sglang-kimi.service").read_text()
    hosts = tmp_path_factory.mktemp("inventory") / "multinode.yml"
    hosts.write_text("all:\n  children:\n    sglang_workers:\n      hosts:\n"
                     "        gpu-node-2: {ansible_host: 10.0.0.12}\n"
                     "    sglang_multinode_kimi:\n      hosts:\n        gpu-node-1:\n        gpu-node-2:\n")
    out = tmp_path_factory.mktemp("multinode")
    models = ROOT / "extensions/molecule/resources/models"  # the example names them relative to its own directory
    proc = render(out, "-i", str(hosts), "-e", f"sglang_model_config_file={models}/kimi-k2.5/config.json",
                  "-e", f"sglang_draft_config_file={models}/kimi-k2.5-eagle3/config.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    units["multinode"] = (out / "gpu-node-1" / "sglang-kimi.service").read_text()
    return units


def test_every_device_group_of_the_unit_exists_in_driver_580s_proc_devices(rendered_units: dict[str, str]) -> None:
    majors, _pairs, unmatched = allowed(rendered_units["580"], "proc-devices-580.txt")
    assert unmatched == [], f"DeviceAllow entries that match nothing on a driver-580 host: {unmatched}"
    assert {195, 509, 234} <= majors  # nvidia(+ctl), nvidia-uvm, nvidia-caps


def test_every_node_cuda_opens_on_a_580_host_is_allowed(rendered_units: dict[str, str]) -> None:
    majors, pairs, _unmatched = allowed(rendered_units["580"], "proc-devices-580.txt")
    denied = [node for node in cuda_nodes() if not is_allowed(node, majors, pairs)]
    assert denied == []


def test_the_old_name_nvidia_frontend_alone_would_deny_every_gpu_on_580() -> None:
    """What the review found: the group name of drivers before 545 matches nothing on 580."""
    majors, pairs, unmatched = allowed("DeviceAllow=char-nvidia-frontend rw\nDeviceAllow=char-nvidia-uvm rw\n",
                                       "proc-devices-580.txt")
    assert unmatched == ["char-nvidia-frontend"]
    assert not is_allowed("/dev/nvidia0", majors, pairs) and not is_allowed("/dev/nvidiactl", majors, pairs)


def test_the_real_550_plus_excerpt_names_major_195_nvidia_and_nvidiactl() -> None:
    lines = (REAL / "proc-devices-cuda-guide-excerpt.txt").read_text().split("\n")
    assert "195 nvidia" in lines and "195 nvidiactl" in lines and not any("frontend" in line for line in lines)


def test_a_535_host_gets_its_own_name_for_major_195(rendered_units: dict[str, str]) -> None:
    assert "DeviceAllow=char-nvidia-frontend rw" in rendered_units["535"]
    assert "DeviceAllow=char-nvidia rw" not in rendered_units["535"]
    majors, pairs, unmatched = allowed(rendered_units["535"], "proc-devices-535-ib.txt")
    assert unmatched == []
    assert all(is_allowed(node, majors, pairs, "proc-devices-535-ib.txt") for node in cuda_nodes())


def test_a_multinode_server_may_open_the_infiniband_verbs_devices(rendered_units: dict[str, str]) -> None:
    assert "DeviceAllow=char-infiniband_verbs rw" not in rendered_units["580"]
    majors, pairs, unmatched = allowed(rendered_units["multinode"], "proc-devices-580.txt")
    assert unmatched == [] and {231, 240} <= majors  # the fixed major and the dynamic one
    assert is_allowed("/dev/infiniband/uverbs0", majors, pairs)


def test_the_unit_requires_the_device_node_unit_and_sets_the_jit_toolchain(rendered_units: dict[str, str]) -> None:
    unit = rendered_units["580"]
    assert re.search(r"^After=.*\bnvidia-device-nodes\.service\b", unit, re.M)
    assert re.search(r"^Requires=nvidia-device-nodes\.service$", unit, re.M)
    assert "DevicePolicy=closed" in unit and "NoNewPrivileges=yes" in unit and "ProtectKernelModules=yes" in unit


# ---- the host checks against real nvidia-smi output ----------------------------------------------

def test_p2p_matrix_of_a_real_8_gpu_pcie_host() -> None:
    pairs = topology.parse_p2p((REAL / "nvidia-smi-topo-p2p-r-8gpu-pcie.txt").read_text())
    assert len(pairs) == 56 and set(pairs.values()) == {"OK"}
    assert topology.p2p_problems(pairs) == []


def test_p2p_matrix_of_a_host_whose_chipset_refuses_p2p() -> None:
    pairs = topology.parse_p2p((REAL / "nvidia-smi-topo-p2p-r-2gpu-cns.txt").read_text())
    assert pairs == {"0-1": "CNS", "1-0": "CNS"}
    assert topology.p2p_problems(pairs) == ["GPU0-GPU1 CNS (Chipset not supported)"]


def test_the_fake_nvidia_smi_prints_the_real_tools_layout() -> None:
    fake = subprocess.run([str(ROOT / "extensions/molecule/resources/nvidia-smi/nvidia-smi"), "topo", "-p2p", "r"],
                          capture_output=True, text=True, check=True).stdout
    real = (REAL / "nvidia-smi-topo-p2p-r-8gpu-pcie.txt").read_text()
    assert [line.split() for line in fake.splitlines()] == [line.split() for line in real.strip().splitlines()]


def test_iommu_mode_from_the_gpus_groups(tmp_path: Path) -> None:
    bus_ids = [line.split(", ")[2] for line in (REAL / "nvidia-smi-query-8gpu-pcie.csv").read_text().splitlines()[1:]]
    assert topology.sysfs_bus_id(bus_ids[6]) == "0000:e3:00.0"
    assert topology.iommu_mode(bus_ids, str(tmp_path)) == "off"  # no iommu_group link: no IOMMU
    for kind, expected in (("identity", "passthrough"), ("DMA-FQ", "translated"), ("DMA", "translated")):
        for bus_id in bus_ids:
            group = tmp_path / kind / topology.sysfs_bus_id(bus_id) / "iommu_group"
            group.mkdir(parents=True, exist_ok=True)
            (group / "type").write_text(kind + "\n")
        assert topology.iommu_mode(bus_ids, str(tmp_path / kind)) == expected


def test_nvcc_release_line_of_cuda_13_0() -> None:
    text = (REAL / "nvcc-version-13.0.88.txt").read_text()
    assert re.search(r"release (\d+\.\d+), V([\d.]+)", text).groups() == ("13.0", "13.0.88")  # type: ignore[union-attr]
