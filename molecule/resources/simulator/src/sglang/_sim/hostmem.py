"""The hierarchical-cache host pool of one TP rank, and SGLang's "Not enough host memory" check.

``host_pool`` is deliberately one small function over plain inputs: the project's capacity
planner is meant to replace its body, so the simulator refuses exactly what the planner refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024 ** 3
RESERVE_BYTES = 10 * GIB  # SGLang keeps 10 GiB of host memory for everything else


@dataclass(frozen=True)
class HostPoolInputs:
    version: str                  # SGLang version (rules change at 0.5.19 and 0.5.21)
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


def _version(text: str) -> tuple:
    parts = []
    for piece in text.split("+", 1)[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit()) or "0"
        parts.append(int(digits))
    return tuple(parts)


def host_pool(inputs: HostPoolInputs) -> HostPool:
    """Size one rank's host pool; raise ValueError (SGLang's text) when it does not fit."""
    version = _version(inputs.version)
    cell = max(int(inputs.bytes_per_token), 1)
    free = inputs.available_bytes - RESERVE_BYTES
    if version >= (0, 5, 19):
        free = free // max(inputs.ranks_on_host, 1)
    if inputs.hicache_size_gb > 0:
        tokens = int(inputs.hicache_size_gb * 1e9 // cell)
    elif inputs.hicache_ratio is None and version >= (0, 5, 21):
        tokens = int(max(free, 0) * inputs.host_memory_fraction // cell)
    else:
        default = 1.2 if inputs.host_memory_mode == "buffer_only" else 2.0
        ratio = inputs.hicache_ratio if inputs.hicache_ratio is not None else default
        tokens = int(inputs.device_tokens * ratio)
    page = max(int(inputs.page_size), 1)
    tokens = (tokens // page + 1) * page
    if version <= (0, 5, 14) and tokens <= inputs.device_tokens:
        raise AssertionError(
            "The host memory should be larger than the device memory with the current protocol")
    requested = tokens * cell
    if requested > free:
        raise ValueError(
            f"Not enough host memory available. Requesting {requested / 1e9:.2f} GB but only have "
            f"{free / 1e9:.2f} GB free. Please reduce the size of the hierarchical cache."
        )
    return HostPool(tokens=tokens, bytes=requested, available_bytes=free)


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
