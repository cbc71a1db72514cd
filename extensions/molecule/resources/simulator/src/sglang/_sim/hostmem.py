"""The hierarchical-cache host pool of one TP rank, and SGLang's "Not enough host memory" check.

The numbers come from the project's capacity planner (``plugins/module_utils/sglang_capacity.py``,
copied into the wheel as ``sglang._sim.sglang_capacity`` by ``build_wheel.py``), so the simulator
refuses exactly what the planner refuses. This module only adds what one simulated rank does with
them: raise SGLang's own exception.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import sglang_capacity as capacity  # the copy build_wheel.py puts next to this file

GIB = capacity.GIB
RESERVE_BYTES = capacity.HOST_RESERVE_BYTES  # SGLang keeps 10 GiB of host memory for everything else


def not_enough_host_memory(requested_bytes: int, available_bytes: int) -> str:
    """SGLang's own message (pool_host/base.py HostKVCache)."""
    return (f"Not enough host memory available. Requesting {requested_bytes / 1e9:.2f} GB but only have "
            f"{available_bytes / 1e9:.2f} GB free. Please reduce the size of the hierarchical cache.")


@dataclass(frozen=True)
class HostPoolInputs:
    version: str                  # SGLang version (rules change at 0.5.15, 0.5.19 and 0.5.21)
    bytes_per_token: int          # host KV bytes per token of one rank
    device_tokens: int            # device KV pool of one rank, in tokens
    hicache_ratio: float | None
    hicache_size_gb: int          # --hicache-size, GB (1e9) per rank; 0 = use the ratio
    host_memory_mode: str         # cache | buffer_only
    host_memory_fraction: float   # --hicache-host-memory-fraction (0.5.21+)
    page_size: int
    ranks_on_host: int            # TP ranks of this server on this host
    available_bytes: int          # host memory available (MemAvailable, cgroup-limited)


@dataclass(frozen=True)
class HostPool:
    tokens: int
    bytes: int
    available_bytes: int          # what this rank was allowed to use


def host_pool(inputs: HostPoolInputs) -> HostPool:
    """Size one rank's host pool; raise what SGLang raises when it does not fit."""
    version = inputs.version
    cell = max(int(inputs.bytes_per_token), 1)
    budget = capacity.rank_host_budget(version, inputs.available_bytes, inputs.ranks_on_host)
    default = capacity.default_hicache_ratio(version, inputs.host_memory_mode)
    ratio = inputs.hicache_ratio if inputs.hicache_ratio is not None else default
    if capacity.auto_sizing(version, inputs.hicache_ratio, inputs.hicache_size_gb, inputs.host_memory_fraction):
        ratio = capacity.auto_hicache_ratio(int(budget * inputs.host_memory_fraction),
                                            inputs.device_tokens * cell, default)
        if ratio <= 0:
            raise ValueError("No host memory is left for HiCache after the 10 GiB reserve; "
                             "set --hicache-ratio or --hicache-size explicitly.")
    tokens = capacity.host_pool_tokens(inputs.device_tokens, cell, ratio, inputs.hicache_size_gb, inputs.page_size)
    if not capacity.at_least(version, "0.5.15") and tokens <= inputs.device_tokens:
        raise AssertionError(capacity.HOST_LARGER_THAN_DEVICE)
    requested = tokens * cell
    if requested > budget:
        raise ValueError(not_enough_host_memory(requested, budget))
    return HostPool(tokens=tokens, bytes=requested, available_bytes=budget)


def mem_available_bytes(override_gb: float | None, meminfo: str = "/proc/meminfo") -> int:
    """MemAvailable (or the SGLANG_SIM_MEM_AVAILABLE_GB override), in bytes."""
    if override_gb is not None:
        return int(override_gb * 1e9)
    with open(meminfo, encoding="ascii") as handle:
        for text in handle:
            if text.startswith("MemAvailable:"):
                return int(text.split()[1]) * 1024
    raise OSError(f"no MemAvailable in {meminfo}")


def cgroup_limited(available: int, root: str = "/sys/fs/cgroup") -> int:
    """min(available, memory.max/high - memory.current) of our cgroup v2 (SGLang 0.5.21+)."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as handle:
            path = next((ln.split("::", 1)[1].strip() for ln in handle if ln.startswith("0::")),
                        "/")
    except OSError:
        return available
    base = root + path.rstrip("/")
    try:
        with open(base + "/memory.current", encoding="ascii") as handle:
            current = int(handle.read().strip())
    except (OSError, ValueError):
        return available
    for name in ("memory.max", "memory.high"):
        try:
            with open(f"{base}/{name}", encoding="ascii") as handle:
                text = handle.read().strip()
        except OSError:
            continue
        if text.isdigit():
            available = min(available, max(int(text) - current, 0))
    return available
