# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU peer-to-peer and IOMMU facts of a host, from `nvidia-smi topo -p2p r` and sysfs.

Formats (tests/fixtures/real-host/ holds real outputs with their sources):

- ``nvidia-smi topo -p2p r`` prints a matrix, a header row of ``GPU<n>`` and one row per GPU, tab or
  space separated, ``X`` on the diagonal and a status per pair, then a legend: ``OK`` (Status Ok),
  ``CNS`` (Chipset not supported), ``GNS`` (GPU not supported), ``TNS`` (Topology not supported),
  ``NS`` (Not supported), ``DR`` (Disabled by regkey), ``U`` (Unknown).
- ``/sys/bus/pci/devices/<domain:bus:dev.fn>/iommu_group/type`` (Linux 5.11+,
  Documentation/ABI/testing/sysfs-kernel-iommu_groups): ``DMA`` or ``DMA-FQ`` when the IOMMU
  translates the device's DMA, ``identity`` when it does not (iommu=pt); no ``iommu_group`` link
  when no IOMMU is active.

PCIe peer-to-peer between RTX PRO 6000 cards behind a translating IOMMU or ACS-enabled switches is
the known NCCL hang on this hardware (NVIDIA/nccl issues 1999 and 2079), which the deploy's probe
reproduces with its all-reduce.
"""

from __future__ import annotations

import os
import re

LEGEND = {"OK": "Status Ok", "CNS": "Chipset not supported", "GNS": "GPU not supported",
          "TNS": "Topology not supported", "NS": "Not supported", "DR": "Disabled by regkey", "U": "Unknown"}
_GPU = re.compile(r"^GPU(\d+)$")


def parse_p2p(text: str) -> dict[str, str]:
    """`nvidia-smi topo -p2p r` -> {"0-1": "OK", "0-2": "CNS", ...} for every ordered pair."""
    header: list[int] = []
    pairs: dict[str, str] = {}
    for line in text.splitlines():
        cells = line.replace("\x1b[4m", "").replace("\x1b[0m", "").split()
        if not cells or cells[0] == "Legend:":
            if header and pairs:
                break
            continue
        if all(_GPU.match(cell) for cell in cells):
            header = [int(_GPU.match(cell).group(1)) for cell in cells]  # type: ignore[union-attr]
            continue
        row = _GPU.match(cells[0])
        if header and row and len(cells) == len(header) + 1:
            for column, status in zip(header, cells[1:], strict=True):
                if int(row.group(1)) != column:
                    pairs[f"{row.group(1)}-{column}"] = status
    return pairs


def p2p_problems(pairs: dict[str, str], gpus: int | None = None) -> list[str]:
    """The pairs among the first `gpus` GPUs whose status is not OK, as "GPU0-GPU4 CNS (Chipset ...)"."""
    problems = []
    for pair, status in sorted(pairs.items(), key=lambda item: [int(n) for n in item[0].split("-")]):
        first, second = (int(n) for n in pair.split("-"))
        if first < second and status != "OK" and (gpus is None or second < gpus):
            problems.append(f"GPU{first}-GPU{second} {status} ({LEGEND.get(status, 'unknown status')})")
    return problems


def sysfs_bus_id(bus_id: str) -> str:
    """nvidia-smi's 00000000:01:00.0 -> sysfs's 0000:01:00.0."""
    domain, _sep, rest = bus_id.strip().lower().partition(":")
    return f"{domain[-4:]}:{rest}"


def iommu_mode(bus_ids: list[str], sysfs: str = "/sys/bus/pci/devices") -> str:
    """off (no IOMMU group), passthrough (identity), translated (DMA, DMA-FQ), mixed or unknown."""
    modes = set()
    for bus_id in bus_ids:
        group = os.path.join(sysfs, sysfs_bus_id(bus_id), "iommu_group")
        if not os.path.exists(group):
            modes.add("off")
            continue
        try:
            with open(os.path.join(group, "type"), encoding="ascii") as handle:
                kind = handle.read().strip()
        except OSError:
            modes.add("unknown")
            continue
        modes.add("passthrough" if kind == "identity" else "translated" if kind.startswith("DMA") else "unknown")
    if not modes:
        return "unknown"
    return modes.pop() if len(modes) == 1 else "mixed"
