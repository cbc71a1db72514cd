"""The simulator wheel: valid, deterministic, selected by pip for `sglang==<version>`, self-contained."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from sim_helpers import BUILD_SCRIPT, FIXTURE_CATALOG, REAL_CATALOG_DIR, VERSION, build_wheel


def test_two_builds_are_byte_identical(tmp_path: Path, wheel: Path) -> None:
    again = build_wheel(tmp_path / "again")
    assert again.name == f"sglang-{VERSION}+sim-py3-none-any.whl"
    assert again.read_bytes() == wheel.read_bytes()


def test_wheel_metadata_and_record(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert names == sorted(names)
        dist_info = f"sglang-{VERSION}+sim.dist-info"
        metadata = archive.read(f"{dist_info}/METADATA").decode()
        assert "Name: sglang\n" in metadata
        assert f"Version: {VERSION}+sim\n" in metadata
        assert "Requires-Dist" not in metadata
        wheel_file = archive.read(f"{dist_info}/WHEEL").decode()
        assert "Root-Is-Purelib: true" in wheel_file
        assert "Tag: py3-none-any" in wheel_file
        record = archive.read(f"{dist_info}/RECORD").decode().splitlines()
        entries = {line.split(",")[0]: line.split(",")[1:] for line in record}
        assert set(entries) == set(names)
        assert entries[f"{dist_info}/RECORD"] == ["", ""]
        for name in names:
            if name.endswith("RECORD"):
                continue
            data = archive.read(name)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert entries[name] == [f"sha256={digest}", str(len(data))], name
        for info in archive.infolist():
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
        for needed in ("sglang/__init__.py", "sglang/version.py", "sglang/launch_server.py",
                       "sglang/_sim/sglang_catalog.py", f"sglang/_sim/catalogs/sglang-{VERSION}.json"):
            assert needed in names


def test_pip_picks_the_local_version_and_imports(sim_python: Path) -> None:
    code = "import importlib.metadata as m, sglang, sglang.version; " \
           "print(sglang.__version__, sglang.version.__version__, m.version('sglang'))"
    out = subprocess.run([str(sim_python), "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert out == [f"{VERSION}+sim"] * 3


def test_installed_simulator_carries_its_catalog(sim_python: Path) -> None:
    code = "import sglang._sim.cli as c; cat = c.load_catalog(); print(c.CATALOG_DIR, cat['version'])"
    out = subprocess.run([str(sim_python), "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert "site-packages" in out[0]
    assert out[1] == VERSION


def test_catalog_of_another_version_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), "--version", "0.5.19", "--out", str(tmp_path), "--catalog",
         str(FIXTURE_CATALOG)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 1
    assert "is the catalog of sglang 0.5.23, not 0.5.19" in done.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(not (REAL_CATALOG_DIR / f"sglang-{VERSION}.json").exists(), reason="no generated catalog yet")
def test_default_catalog_is_the_repository_one(tmp_path: Path) -> None:
    built = build_wheel(tmp_path, catalog=None)
    with zipfile.ZipFile(built) as archive:
        packed = archive.read(f"sglang/_sim/catalogs/sglang-{VERSION}.json")
    assert packed == (REAL_CATALOG_DIR / f"sglang-{VERSION}.json").read_bytes()


def test_the_jit_cache_stand_in_requires_its_kernel_packages_as_flashinfers_shim_does(tmp_path: Path) -> None:
    """FlashInfer 0.7.2's flashinfer-jit-cache requires one kernel package per GPU architecture at its own version
    (tests/fixtures/flashinfer): scripts/setup.sh builds the stand-in that way, with --companion-requires."""
    subprocess.run([sys.executable, str(BUILD_SCRIPT), "--version", VERSION, "--out", str(tmp_path),
                    "--companion", "flashinfer-jit-cache==0.7.2+cu130",
                    "--companion", "flashinfer-jit-cache-sm120f==0.7.2+cu130",
                    "--companion-requires", "flashinfer-jit-cache=flashinfer-jit-cache-sm100a==0.7.2+cu130",
                    "--companion-requires", "flashinfer-jit-cache=flashinfer-jit-cache-sm120f==0.7.2+cu130"],
                   check=True, capture_output=True)
    with zipfile.ZipFile(tmp_path / "flashinfer_jit_cache-0.7.2+cu130-py3-none-any.whl") as shim:
        metadata = shim.read("flashinfer_jit_cache-0.7.2+cu130.dist-info/METADATA").decode()
    assert [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")] == [
        "Requires-Dist: flashinfer-jit-cache-sm100a==0.7.2+cu130",
        "Requires-Dist: flashinfer-jit-cache-sm120f==0.7.2+cu130"]
    assert metadata.index("Requires-Dist:") < metadata.index("\n\n")  # headers, before the description
    with zipfile.ZipFile(tmp_path / "flashinfer_jit_cache_sm120f-0.7.2+cu130-py3-none-any.whl") as kernels:
        own = kernels.read("flashinfer_jit_cache_sm120f-0.7.2+cu130.dist-info/METADATA").decode()
    assert "Requires-Dist" not in own
