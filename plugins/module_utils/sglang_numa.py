# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's NUMA nodes as SGLang's NUMA binding meets them: the node of each GPU and what each node has available.

Formats (tests/fixtures/numa/ holds real outputs with their sources):

- ``nvidia-smi topo -m``: a matrix with a header row (``GPU0 ... CPU Affinity  NUMA Affinity  GPU NUMA ID``, its
  columns tab-separated, or by two or more blanks) and one row per GPU; the ``NUMA Affinity`` cell is the GPU's
  node (``N/A`` when there is none). SGLang 0.5.23 asks NVML for the same (nvmlDeviceGetMemoryAffinity,
  srt/utils/numa_utils.py ``_query_numa_node_for_gpu``).
- ``/sys/devices/system/node/node<N>/meminfo``: ``Node <N> <Field>: <value> kB`` lines (drivers/base/node.c).
  What a node has available is counted as the kernel counts MemAvailable host-wide (mm/show_mem.c,
  ``si_mem_available``): free pages, the file LRU and the reclaimable kernel memory, without the watermarks and
  reserves, which the node files do not show.
- ``memory.numa_stat`` of the unit's cgroup: cgroup v2 (Linux 5.10+, commit 5f9a4f4a7096, cgroup-v2.rst) prints
  ``<type> N0=<bytes> N1=<bytes>`` lines, ``anon`` and ``shmem`` among them; cgroup v1 prints
  ``hierarchical_anon=<pages> N0=<pages> ...``. What the running server holds there is freed by its restart.
"""

from __future__ import annotations

import re

_GPU = re.compile(r"^GPU(\d+)$")
PAGE_SIZE = 4096
# The node meminfo fields MemAvailable is made of (mm/show_mem.c si_mem_available: NR_FREE_PAGES, the active and
# inactive file LRU, NR_SLAB_RECLAIMABLE_B + NR_KERNEL_MISC_RECLAIMABLE = KReclaimable).
NODE_AVAILABLE_FIELDS = ("MemFree", "Active(file)", "Inactive(file)", "KReclaimable")


def _columns(line: str) -> list[str]:
    return [cell.strip() for cell in (line.split("\t") if "\t" in line else re.split(r"\s{2,}", line))
            if cell.strip()]


def parse_topo_numa(text: str) -> list[int | None]:
    """`nvidia-smi topo -m` -> the NUMA node of each GPU, GPU 0 first (None where it has none); [] when the output
    has no NUMA Affinity column."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = _columns(lines[0])
    if "NUMA Affinity" not in header:
        return []
    column = header.index("NUMA Affinity")
    nodes: dict[int, int | None] = {}
    for line in lines[1:]:
        cells = line.split()
        match = _GPU.match(cells[0]) if cells else None
        if not match or len(cells) <= column + 1:
            continue
        first = re.match(r"\d+", cells[column + 1])
        nodes[int(match.group(1))] = int(first.group(0)) if first else None
    return [nodes.get(index) for index in range(max(nodes) + 1)] if nodes else []


def node_available(meminfo: str) -> int:
    """A node's meminfo -> the bytes available on it (the fields of NODE_AVAILABLE_FIELDS)."""
    fields: dict[str, int] = {}
    for line in meminfo.splitlines():
        match = re.match(r"^Node\s+\d+\s+([A-Za-z()_]+):\s+(\d+)(\s+kB)?\s*$", line)
        if match:
            fields[match.group(1)] = int(match.group(2)) * (1024 if match.group(3) else 1)
    return sum(fields.get(name, 0) for name in NODE_AVAILABLE_FIELDS)


def numa_stat_held(text: str) -> dict[str, int]:
    """A cgroup's memory.numa_stat -> per node, the bytes of anonymous and shared memory it holds (cgroup v2), or
    its anonymous pages (cgroup v1, hierarchical)."""
    held: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        key, scale, wanted = parts[0], 1, ("anon", "shmem")
        if "=" in key:  # cgroup v1: hierarchical_anon=<total> N0=<pages> ... (its anon= is this cgroup's alone)
            key, scale, wanted = key.split("=", 1)[0], PAGE_SIZE, ("hierarchical_anon",)
        if key not in wanted:
            continue
        for cell in parts[1:]:
            match = re.fullmatch(r"N(\d+)=(\d+)", cell)
            if match:
                held[match.group(1)] = held.get(match.group(1), 0) + int(match.group(2)) * scale
    return held
