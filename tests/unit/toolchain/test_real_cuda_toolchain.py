"""The probe's toolchain and SGLang-JIT checks against NVIDIA's real CUDA 13.0 compiler, which needs no GPU.

nvcc 13.0.88 with its crt and NVVM, the 13.0.96 runtime and curand 10.4.0.35 come from their PyPI wheels, unpacked
by scripts/cuda-toolchain.sh (scripts/setup.sh runs it) into a cache outside the clone; tvm-ffi 0.1.11 is the real
one of this virtualenv (requirements.txt). What the sandbox's dummy nvcc stands in for is shown here by the real
compiler: the probe's flags, the sm_120f target of the reference host, the tvm-ffi headers, the link against
libcudart, and the module loading and answering.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from helpers import ROOT, load_script

CUDA = Path(os.environ.get("SGLANG_DEPLOY_CUDA_TOOLCHAIN", "/var/cache/sglang-deploy/cuda-13.0.88"))
FIXTURES = ROOT / "tests" / "fixtures" / "cuda-toolchain"


@pytest.fixture(scope="module")
def cuda_home() -> Path:
    if not (CUDA / "bin" / "nvcc").is_file():
        pytest.fail(f"{CUDA}/bin/nvcc is missing: run `bash scripts/cuda-toolchain.sh` (make setup does)")
    # What torch does when SGLang imports it, before any JIT module loads: the CUDA runtime, loaded globally.
    ctypes.CDLL(str(CUDA / "lib64" / "libcudart.so.13"), mode=ctypes.RTLD_GLOBAL)
    return CUDA


@pytest.fixture
def probe(cuda_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nprintf '12.0\\n12.0\\n'\n")  # the reference host's GPUs
    (bin_dir / "ninja").write_text("#!/bin/sh\n")
    for tool in ("nvidia-smi", "ninja"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_HOME", str(cuda_home))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the probe keeps its builds under ~/.cache
    (tmp_path / "work").mkdir()
    module = load_script(ROOT / "roles" / "sglang_service" / "files" / "sglang_probe.py", "sglang_probe_real_cuda")
    module.RESULTS.clear()
    module.TOOLCHAIN.clear()
    # SGLang 0.5.23 requires apache-tvm-ffi; this process may see another sglang (the simulator) or none.
    monkeypatch.setattr(module, "sglang_builds_with_tvm_ffi", lambda: True)
    return module


def test_the_probe_passes_with_the_real_toolchain(probe: ModuleType, tmp_path: Path) -> None:
    work = str(tmp_path / "work")
    assert probe.check_toolchain({"cuda_version": "13.0"}, work), probe.RESULTS
    assert probe.RESULTS[-1]["detail"].startswith("nvcc 13.0.88, ")
    assert probe.check_sglang_jit({}, work), probe.RESULTS
    assert "tvm-ffi 0.1.11" in probe.RESULTS[-1]["detail"]
    assert "sm_120f for compute capability 12.0" in probe.RESULTS[-1]["detail"]
    assert probe.sglang_jit_target("12.0", probe.TOOLCHAIN["release"]) == ("120f", 1200)


def test_the_real_link_needs_the_runtimes_link_name(
        probe: ModuleType, tmp_path: Path, cuda_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without cuda-cudart-dev's libcudart.so, the build fails as SGLang's would, in the probe."""
    home = tmp_path / "cuda"
    (home / "lib64").mkdir(parents=True)
    for part in ("bin", "include", "nvvm"):
        (home / part).symlink_to(cuda_home / part)
    (home / "lib64" / "libcudart.so.13").symlink_to(cuda_home / "lib64" / "libcudart.so.13")
    monkeypatch.setenv("CUDA_HOME", str(home))
    work = str(tmp_path / "work")
    assert probe.check_toolchain({"cuda_version": "13.0"}, work), probe.RESULTS
    assert not probe.check_sglang_jit({}, work)
    assert "cannot find -lcudart" in probe.RESULTS[-1]["detail"]


@pytest.mark.parametrize("target", ["00", "90f", "75", "120a", "120f"])
def test_nvcc_13_0_88_answers_as_the_fixture_says(cuda_home: Path, tmp_path: Path, target: str) -> None:
    """The fixture the sandbox's nvcc is tested against, re-read from the real compiler (a sample of its targets:
    SGLang's target without a GPU, compute_00; one refused; the reference host's)."""
    real = json.loads((FIXTURES / "nvcc-13.0.88-gencode.json").read_text())["targets"][target]
    source = tmp_path / "t.cu"
    source.write_text("__global__ void k(int *x) { x[0] = 1; }\n")
    proc = subprocess.run([str(cuda_home / "bin" / "nvcc"), "-Xcompiler", "-fPIC",
                           f"-gencode=arch=compute_{target},code=sm_{target}", "-std=c++20", "-c", str(source), "-o",
                           str(tmp_path / "t.o")], capture_output=True, text=True, check=False)
    assert (proc.returncode == 0) == real["accepted"], proc.stderr
    assert proc.stderr.strip() == real.get("stderr", "")
