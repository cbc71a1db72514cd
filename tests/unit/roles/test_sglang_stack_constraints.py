"""sglang_stack: the per-version constraints files and the check that decides whether to install."""

from __future__ import annotations

import glob
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
from helpers import CATALOGS, ROOT, load_script

CONSTRAINTS = ROOT / "roles/sglang_stack/files/constraints"
CHECK = ROOT / "roles/sglang_stack/files/sglang_stack_check.py"
WHEEL_DIR = ROOT / ".cache" / "wheels"
CATALOG_VERSIONS = sorted(p.stem.removeprefix("sglang-") for p in CATALOGS.glob("sglang-*.json"))
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+)$")


def load_check() -> ModuleType:
    return load_script(CHECK, "sglang_stack_check_under_test")


ADDED = "# --- Added by sglang-deploy"
# The CUDA release of each version's pinned torch (roles/sglang/vars/main.yml, from the torch wheels).
TORCH_CUDA = {"0.5.9": "cu128", "0.5.12": "cu130", "0.5.14": "cu130", "0.5.19": "cu130", "0.5.23": "cu130"}


def pins(version: str, added: bool | None = None) -> dict[str, str]:
    """The constraints file's pins: all of them, or only the wheel's (added=False) or only the
    lines sglang-deploy adds after its marker (added=True)."""
    text = (CONSTRAINTS / f"sglang-{version}.txt").read_text()
    wheel, _marker, extra = text.partition(ADDED)
    lines = (wheel if added is False else extra if added else text).splitlines()
    return {m.group(1): m.group(2) for line in lines if (m := PIN.match(line))}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("version", CATALOG_VERSIONS)
def test_every_catalog_version_has_constraints(version: str) -> None:
    text = (CONSTRAINTS / f"sglang-{version}.txt").read_text()
    assert re.search(r"^# Requires-Python: >=3\.\d+$", text, re.MULTILINE)
    for line in text.splitlines():
        assert line.startswith("#") or PIN.match(line), line  # pip/uv reject extras in constraints
    names = set(pins(version))
    assert {"torch", "torchaudio", "torchvision"} <= names
    assert "flashinfer-python" in names and names & {"sglang-kernel", "sgl-kernel"}


@pytest.mark.parametrize("version", CATALOG_VERSIONS)
def test_flashinfer_prebuilt_kernels_are_pinned_at_flashinfers_version(version: str) -> None:
    """FlashInfer uses flashinfer-cubin / flashinfer-jit-cache only at exactly its own version
    (flashinfer/jit/env.py, 0.7.2); the jit-cache's local label is the CUDA of the pinned torch."""
    flashinfer = pins(version)["flashinfer-python"]
    assert pins(version)["flashinfer-cubin"] == flashinfer
    assert pins(version)["flashinfer-jit-cache"] == f"{flashinfer}+{TORCH_CUDA[version]}"
    assert set(pins(version, added=True)) <= {"flashinfer-cubin", "flashinfer-jit-cache", "prometheus-client"}


@pytest.mark.parametrize("version", CATALOG_VERSIONS)
def test_prometheus_client_is_held_below_the_release_that_renames_sglangs_samples(version: str) -> None:
    """prometheus-client 0.23.0-0.26.0 write `sglang_token_usage 0.5` under `# TYPE sglang:token_usage gauge` in
    OpenMetrics (prometheus/client_python#1177), which Prometheus asks for: the engine scenario's real server showed
    it, and every rule went blind. Each version's constraints hold it at 0.22.1, the newest release without it."""
    release = tuple(int(part) for part in pins(version, added=True)["prometheus-client"].split("."))
    assert release < (0, 23, 0)
    assert "prometheus/client_python#1177" in (CONSTRAINTS / f"sglang-{version}.txt").read_text()


def test_the_cuda_of_each_version_is_the_one_the_contract_role_names() -> None:
    import yaml
    table = yaml.safe_load((ROOT / "roles/sglang/vars/main.yml").read_text())["__sglang_cuda_versions"]
    assert {v: "cu" + c.replace(".", "") for v, c in table.items()} == TORCH_CUDA


def test_0_5_23_pins_the_cuda_13_stack() -> None:
    assert {k: v for k, v in pins("0.5.23").items() if k in ("torch", "flashinfer-python", "sglang-kernel")} == {
        "torch": "2.14.1", "flashinfer-python": "0.7.2", "sglang-kernel": "0.4.10"}


@pytest.mark.network
@pytest.mark.parametrize("version", CATALOG_VERSIONS)
def test_constraints_match_the_real_wheels_metadata(version: str) -> None:
    """Every pin but torchvision is the wheel's own Requires-Dist pin (cached in .cache/wheels)."""
    wheels = glob.glob(str(WHEEL_DIR / f"sglang-{version}-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(WHEEL_DIR),
                        f"sglang=={version}"], check=True, timeout=900)
        wheels = glob.glob(str(WHEEL_DIR / f"sglang-{version}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as wheel:
        name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = wheel.read(name).decode()
    required = {}
    for line in metadata.splitlines():
        match = re.match(r"^Requires-Dist: ([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==(\S+)$", line)
        if match:
            required[canonical(match.group(1))] = match.group(3)
    requires_python = re.search(r"^Requires-Python: (.*)$", metadata, re.MULTILINE)
    assert requires_python and f"# Requires-Python: {requires_python.group(1)}" in (
        CONSTRAINTS / f"sglang-{version}.txt").read_text()
    for package, pinned in pins(version, added=False).items():
        if package != "torchvision":
            assert required.get(canonical(package)) == pinned, package


def test_check_accepts_the_pinned_set_and_local_labels(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    check = load_check()
    constraints = tmp_path / "c.txt"
    constraints.write_text("# comment\ntorch==2.14.1\nflashinfer-python==0.7.2\nsglang-kernel==0.4.10\n")
    monkeypatch.setattr(check, "installed", lambda: {"sglang": "0.5.23+sim", "torch": "2.14.1+cu130"})
    assert check.check("0.5.23", str(constraints)) == {"sglang": "0.5.23+sim", "ok": True, "mismatches": []}


def test_check_reports_what_differs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    check = load_check()
    constraints = tmp_path / "c.txt"
    constraints.write_text("torch==2.14.1\nflashinfer_python==0.7.2\n")
    have = {"sglang": "0.5.19", "torch": "2.13.0", "flashinfer-python": "0.7.2"}
    monkeypatch.setattr(check, "installed", lambda: have)
    result = check.check("0.5.23", str(constraints))
    assert result["ok"] is False
    assert result["mismatches"] == ["sglang 0.5.19 (pinned 0.5.23)", "torch 2.13.0 (pinned 2.14.1)"]
    monkeypatch.setattr(check, "installed", dict)
    assert check.check("0.5.23", str(constraints))["mismatches"] == ["sglang is not installed (pinned 0.5.23)"]


def test_check_runs_as_a_script_in_a_virtualenv(tmp_path: Path) -> None:
    constraints = tmp_path / "c.txt"
    constraints.write_text("pytest==0.0.1\n")
    proc = subprocess.run([sys.executable, str(CHECK), "0.5.23", str(constraints)], capture_output=True, text=True,
                          check=True)
    assert '"ok": false' in proc.stdout and "pytest" in proc.stdout


def test_required_prebuilt_kernels_must_be_installed_at_exactly_their_pin(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    check = load_check()
    constraints = tmp_path / "c.txt"
    constraints.write_text("flashinfer-python==0.7.2\nflashinfer-cubin==0.7.2\nflashinfer-jit-cache==0.7.2+cu130\n")
    required = ["flashinfer-cubin", "flashinfer-jit-cache"]
    have = {"sglang": "0.5.23", "flashinfer-python": "0.7.2", "flashinfer-cubin": "0.7.2",
            "flashinfer-jit-cache": "0.7.2+cu130"}
    monkeypatch.setattr(check, "installed", lambda: have)
    assert check.check("0.5.23", str(constraints), required)["ok"]
    have["flashinfer-jit-cache"] = "0.7.2+cu129"  # another CUDA's build: FlashInfer would ignore it
    del have["flashinfer-cubin"]
    assert check.check("0.5.23", str(constraints), required)["mismatches"] == [
        "flashinfer-cubin is not installed (pinned 0.7.2)",
        "flashinfer-jit-cache 0.7.2+cu129 (pinned 0.7.2+cu130, required exactly)"]
    assert check.check("0.5.23", str(constraints))["ok"]  # without the requirement: not installed is fine
