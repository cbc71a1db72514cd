"""HiCache host pool: the version rules of the "Not enough host memory" check, in unit and in a server."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest
from sim_helpers import LaunchFn, free_port, post_json, request, server_args

GIB = 1024**3
CELL = (512 + 64) * 61 * 2  # Kimi-K2.5 MLA bytes per token, bf16


@pytest.fixture(scope="module")
def hostmem(sim_package: ModuleType) -> ModuleType:
    return importlib.import_module("sglang._sim.hostmem")


def inputs(hostmem: ModuleType, **changes: object) -> object:
    base = {
        "version": "0.5.23", "bytes_per_token": CELL, "device_tokens": 173395, "hicache_ratio": 2.0,
        "hicache_size_gb": 0, "host_memory_mode": "cache", "host_memory_fraction": 0.8, "page_size": 1,
        "ranks_on_host": 8, "available_bytes": 400 * 10**9,
    }
    base.update(changes)
    return hostmem.HostPoolInputs(**base)


def test_ratio_pool_is_device_tokens_times_ratio_page_aligned(hostmem: ModuleType) -> None:
    pool = hostmem.host_pool(inputs(hostmem))
    assert pool.tokens == 346791
    assert pool.bytes == 346791 * CELL
    assert hostmem.host_pool(inputs(hostmem, page_size=64)).tokens == (346790 // 64 + 1) * 64


def test_size_is_gb_per_rank(hostmem: ModuleType) -> None:
    pool = hostmem.host_pool(inputs(hostmem, hicache_size_gb=20, hicache_ratio=None))
    assert pool.tokens == int(20e9 // CELL) + 1


def test_up_to_0_5_18_each_rank_checks_alone(hostmem: ModuleType) -> None:
    per_rank = inputs(hostmem, version="0.5.18", hicache_size_gb=100, available_bytes=200 * 10**9)
    assert hostmem.host_pool(per_rank).available_bytes == 200 * 10**9 - 10 * GIB
    split = inputs(hostmem, version="0.5.19", hicache_size_gb=100, available_bytes=200 * 10**9)
    expected = (200 * 10**9 - 10 * GIB) // 8
    with pytest.raises(ValueError, match=re.escape(
        f"Not enough host memory available. Requesting 100.00 GB but only have {expected / 1e9:.2f} GB free. "
        "Please reduce the size of the hierarchical cache."
    )):
        hostmem.host_pool(split)


def test_default_ratio_and_auto_size(hostmem: ModuleType) -> None:
    assert hostmem.host_pool(inputs(hostmem, version="0.5.18", hicache_ratio=None)).tokens == 346791
    # --hicache-host-memory-mode (and its 1.2 default ratio for buffer_only) exists from 0.5.19.
    buffer_only = inputs(hostmem, version="0.5.19", hicache_ratio=None, host_memory_mode="buffer_only")
    assert hostmem.host_pool(buffer_only).tokens == int(173395 * 1.2) + 1
    # 0.5.21+ auto-sizing only ever lowers the default ratio (hicache_auto_size.py): plenty of RAM -> 2.0 ...
    assert hostmem.host_pool(inputs(hostmem, version="0.5.23", hicache_ratio=None)).tokens == 346791
    # ... a tight host -> min(2.0, rank budget x fraction x 0.95 / device pool bytes).
    budget = (100 * 10**9 - 10 * GIB) // 8
    ratio = budget * 0.8 * 0.95 / (173395 * CELL)
    auto = hostmem.host_pool(inputs(hostmem, version="0.5.23", hicache_ratio=None, available_bytes=100 * 10**9))
    assert auto.tokens == int(173395 * ratio) + 1
    assert auto.bytes <= budget
    with pytest.raises(ValueError, match="Not enough host memory available"):  # 0.5.20 has no auto-sizing
        hostmem.host_pool(inputs(hostmem, version="0.5.20", hicache_ratio=None, available_bytes=100 * 10**9))


def test_old_versions_assert_host_larger_than_device(hostmem: ModuleType) -> None:
    with pytest.raises(AssertionError, match="larger than the device memory"):
        hostmem.host_pool(inputs(hostmem, version="0.5.14", hicache_ratio=0.5))
    assert hostmem.host_pool(inputs(hostmem, version="0.5.23", hicache_ratio=0.5)).tokens == 86698


def test_server_refuses_a_pool_larger_than_host_memory(launch: LaunchFn, model_dir: Path) -> None:
    port = free_port()
    server = launch(server_args(model_dir, port, "--enable-hierarchical-cache", "--hicache-ratio", "2"),
                    SGLANG_SIM_MEM_AVAILABLE_GB="50")
    assert server.wait_exit() == 1
    log = server.stderr
    free = (50 * 10**9 - 10 * GIB) // 8
    line = (f"ValueError: Not enough host memory available. Requesting 21.70 GB but only have {free / 1e9:.2f} GB "
            "free. Please reduce the size of the hierarchical cache.")
    assert log.count(line) == 8  # every rank of this host raises
    assert "sglang/srt/mem_cache/memory_pool_host.py" in log
    assert log.index("Capture target decode CUDA graph end") < log.index(line)
    assert "Uvicorn running" not in log


def test_server_allocates_and_reports_the_host_pool(launch: LaunchFn, model_dir: Path) -> None:
    port = free_port()
    server = launch(server_args(model_dir, port, "--enable-hierarchical-cache", "--hicache-ratio", "2",
                                "--enable-metrics"), SGLANG_SIM_MEM_AVAILABLE_GB="1000")
    server.wait_ready()
    line = "Allocating kv hierarchical KV host pool: 308743 tokens, 21.70 GB host memory."
    assert server.stderr.count(line) == 8
    status, body, _headers = request(port, "GET", "/metrics")
    assert status == 200
    assert re.search(r"^sglang:hicache_host_total_tokens\{[^}]*\} 308743\.0$", body.decode(), re.M)
    # Write-through: what the server processed is backed up to the host pool (the alert rules' pool use).
    assert post_json(port, "/generate", {"text": "Hello there", "sampling_params": {"max_new_tokens": 5}})[0] == 200
    text = request(port, "GET", "/metrics")[1].decode()

    def gauge(name: str) -> float:
        found = re.search(rf"^sglang:{name}\{{[^}}]*\}} (\S+)$", text, re.M)
        assert found, name
        return float(found.group(1))
    assert gauge("hicache_host_used_tokens") == gauge("prompt_tokens_total") + gauge("generation_tokens_total") > 5
