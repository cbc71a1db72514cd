"""Against the catalogs generated from the real wheels (roles/sglang_config/files/catalogs/)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest
from sim_helpers import REAL_CATALOG_DIR, LaunchFn, build_wheel, free_port, get_status, logged_server_args, server_args

PRODUCTION_FLAGS = [
    "--trust-remote-code", "--mem-fraction-static", "0.83", "--kv-cache-dtype", "fp8_e4m3",
    "--attention-backend", "triton", "--enable-hierarchical-cache", "--hicache-ratio", "2.0",
    "--hicache-mem-layout", "page_first", "--hicache-write-policy", "write_through", "--enable-metrics",
    "--max-running-requests", "48", "--context-length", "256k", "--served-model-name", "kimi-k2.5",
]


def extracted(version: str, tmp_path: Path) -> Path:
    """The simulator wheel of `version`, unpacked onto a PYTHONPATH directory."""
    catalog = REAL_CATALOG_DIR / f"sglang-{version}.json"
    if not catalog.exists():
        pytest.skip(f"no generated catalog for sglang {version}")
    wheel = build_wheel(tmp_path / "wheel", catalog=catalog, version=version)
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


def test_production_flags_start_on_0_5_23(launch: LaunchFn, model_dir: Path, tmp_path: Path) -> None:
    site = extracted("0.5.23", tmp_path)
    port = free_port()
    server = launch(server_args(model_dir, port, *PRODUCTION_FLAGS), PYTHONPATH=str(site))
    server.wait_ready()
    assert logged_server_args(server.stderr)["context_length"] == 256000
    assert "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 308743, KV size: 10.10 GB" in server.stderr
    assert get_status(port, "/ready") == 200


def test_removed_flag_is_ambiguous_on_0_5_23(launch: LaunchFn, model_dir: Path, tmp_path: Path) -> None:
    site = extracted("0.5.23", tmp_path)
    server = launch(server_args(model_dir, free_port(), "--cuda-graph-max-bs", "64"), PYTHONPATH=str(site))
    assert server.wait_exit() == 2
    assert "error: ambiguous option: --cuda-graph-max-bs could match" in server.stderr


def test_0_5_14_checks_host_memory_per_rank_and_has_no_ready_route(
    launch: LaunchFn, model_dir: Path, tmp_path: Path
) -> None:
    site = extracted("0.5.14", tmp_path)
    port = free_port()
    # 8 ranks x 21.70 GB = 174 GB > 120 GB, yet each rank alone fits (<= 0.5.18 rule).
    server = launch(server_args(model_dir, port, "--enable-hierarchical-cache", "--hicache-ratio", "2"),
                    PYTHONPATH=str(site), SGLANG_SIM_MEM_AVAILABLE_GB="120")
    server.wait_ready()
    assert server.stderr.count("Allocating kv hierarchical KV host pool: 308743 tokens") == 8
    assert get_status(port, "/ready") == 404
    # 0.5.9-0.5.14 log f"{server_args=}", the dataclass repr, not the resolved dict of 0.5.19 and later.
    assert re.search(r"^\[[^\]]*\] server_args=ServerArgs\(model_path='[^']+', ", server.stderr, re.M)
