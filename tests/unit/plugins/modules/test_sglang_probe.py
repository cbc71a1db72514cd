"""The pre-restart probe: the module takes its transient unit's settings from the rendered unit, and the
probe script's checks (what the sandbox cannot show is answered through the backend interface)."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.modules import sglang_probe
from helpers import ROOT, load_script

GOLDEN_UNIT = (ROOT / "tests" / "golden" / "example" / "sglang-kimi.service").read_text()


def probe_script() -> ModuleType:
    module = load_script(ROOT / "roles" / "sglang_service" / "files" / "sglang_probe.py", "sglang_probe_script")
    module.RESULTS.clear()
    return module


def test_the_probe_runs_with_every_execution_setting_of_the_new_unit() -> None:
    properties, interpreter = sglang_probe.probe_properties(GOLDEN_UNIT, "/run/sglang-deploy/probe/x.env")
    assert interpreter == "/opt/sglang/0.5.23/venv/bin/python"
    unit_service = [line for line in GOLDEN_UNIT.split("[Service]")[1].split("[Install]")[0].splitlines()
                    if line and not line.startswith((" ", "#"))]
    keys = {line.split("=", 1)[0] for line in unit_service}
    # Every [Service] setting is passed on except the lifecycle ones; the environment file is the probe's copy.
    assert {p.split("=", 1)[0] for p in properties} - {"Requires", "After", "Wants"} == keys - sglang_probe.LIFECYCLE
    for expected in ("User=sglang", "DevicePolicy=closed", "DeviceAllow=char-nvidia rw", "ProtectHome=yes",
                     "CapabilityBoundingSet=", "LimitMEMLOCK=infinity", "NoNewPrivileges=yes", "ProtectSystem=strict",
                     "EnvironmentFile=/run/sglang-deploy/probe/x.env", "Requires=nvidia-device-nodes.service"):
        assert expected in properties, expected
    assert not [p for p in properties if p.startswith(("ExecStart", "Restart", "KillMode", "TimeoutStopSec", "Type="))]


def test_unit_sections_join_continuations_and_skip_comments() -> None:
    sections = sglang_probe.unit_sections("[Unit]\n# c\nAfter=a b\n[Service]\nExecStart=/x \\\n    --y 1 \\\n    --z\n")
    assert sections == {"Unit": [("After", "a b")], "Service": [("ExecStart", "/x  --y 1  --z")]}


def test_results_are_read_from_the_json_lines_only() -> None:
    out = "\n".join([json.dumps({"check": "cuda", "ok": False, "detail": "x"}), "noise",
                     json.dumps({"done": True, "ok": False})])
    checks, done = sglang_probe.read_results(out)
    assert checks == [{"check": "cuda", "ok": False, "detail": "x"}] and done == {"done": True, "ok": False}


def test_device_errors_are_grouped_by_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    script = probe_script()

    def fake_open(path: str, flags: int) -> int:
        code = {"/dev/nvidia-uvm": errno.ENOENT, "/dev/nvidia1": errno.ENXIO}.get(path, errno.EPERM)
        raise OSError(code, os.strerror(code), path)

    monkeypatch.setattr(script.os, "open", fake_open)
    nodes = script.device_nodes(2)
    assert nodes == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidia1"]
    assert script.open_errors(nodes, accept=(errno.ENXIO,)) == [
        "denied by the unit's device policy (DevicePolicy=closed, DeviceAllow=): /dev/nvidiactl, "
        "/dev/nvidia-uvm-tools, /dev/nvidia0",
        "missing (nvidia-device-nodes.service creates them at boot): /dev/nvidia-uvm"]


def test_model_check_reads_config_and_first_shard(tmp_path: Path) -> None:
    script = probe_script()
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"]}))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}).encode()
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"xx")
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"xx")
    ok, detail = script.read_model("model", str(tmp_path))
    assert ok and "model-00001-of-00002.safetensors (1 tensors)" in detail
    ok, detail = script.read_model("draft", str(tmp_path / "missing"))
    assert not ok and detail.startswith(f"{tmp_path}/missing/config.json: No such file or directory")


def test_flashinfer_prebuilt_kernels_must_match_flashinfers_version(monkeypatch: pytest.MonkeyPatch) -> None:
    script = probe_script()
    versions = {"flashinfer-python": "0.7.2", "flashinfer-cubin": "0.7.2", "flashinfer-jit-cache": "0.6.18+cu130"}

    def version(name: str) -> str:
        if name not in versions:
            raise script.importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(script.importlib.metadata, "version", version)
    assert not script.check_flashinfer({"flashinfer_prebuilt": ["flashinfer-cubin", "flashinfer-jit-cache"]})
    assert "flashinfer-jit-cache 0.6.18+cu130 does not match flashinfer 0.7.2" in script.RESULTS[-1]["detail"]
    versions["flashinfer-jit-cache"] = "0.7.2+cu130"
    assert script.check_flashinfer({"flashinfer_prebuilt": ["flashinfer-cubin", "flashinfer-jit-cache"]})


def sandbox_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CUDA 13.0 packages of the sandbox's apt repository (dummy nvcc, headers, link name) as CUDA_HOME, a
    ninja, and an nvidia-smi of two compute capability 12.0 GPUs on PATH."""
    build_repo = load_script(ROOT / "extensions" / "molecule" / "resources" / "apt" / "build_repo.py", "build_repo")
    home = tmp_path / "cuda-13.0"
    for package in build_repo.cuda_packages():
        for rel, (content, mode) in package.files.items():
            path = home / rel.removeprefix("usr/local/cuda-13.0/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            path.chmod(mode)
    fake_smi(tmp_path, monkeypatch, "12.0")
    (tmp_path / "bin" / "ninja").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "ninja").chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the probe keeps its builds under ~/.cache
    (tmp_path / "work").mkdir()
    return home


def test_the_toolchain_check_compiles_with_the_sandbox_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dummy nvcc of the sandbox's apt repository, with the real gcc and Python.h of this interpreter."""
    home, work = sandbox_cuda(tmp_path, monkeypatch), str(tmp_path / "work")
    script = probe_script()
    assert script.check_toolchain({"cuda_version": "13.0"}, work), script.RESULTS
    assert script.RESULTS[-1]["detail"].startswith("nvcc 13.0.88, cc ")
    assert not script.check_toolchain({"cuda_version": "12.8"}, work)
    assert "nvcc is CUDA 13.0, the stack needs 12.8" in script.RESULTS[-1]["detail"]
    curand = (home / "include" / "curand_kernel.h").read_text()
    (home / "include" / "curand_kernel.h").unlink()
    assert not script.check_toolchain({"cuda_version": "13.0"}, work)
    assert "curand_kernel.h missing in" in script.RESULTS[-1]["detail"]
    assert "(package libcurand-dev of CUDA 13.0)" in script.RESULTS[-1]["detail"]
    (home / "include" / "curand_kernel.h").write_text(curand)
    (home / "include" / "cuda_runtime.h").unlink()
    assert not script.check_toolchain({"cuda_version": "13.0"}, work)
    assert "nvcc cannot compile a CUDA kernel" in script.RESULTS[-1]["detail"]


def test_the_jit_check_builds_loads_and_calls_a_tvm_ffi_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the sandbox's nvcc (host code through the real c++), the real tvm-ffi of this virtualenv (requirements.txt)
    and its real load_module; what each missing piece looks like."""
    home, work = sandbox_cuda(tmp_path, monkeypatch), str(tmp_path / "work")
    script = probe_script()
    monkeypatch.setattr(script, "sglang_builds_with_tvm_ffi", lambda: True)  # as 0.5.23, whatever sglang is here
    assert script.check_toolchain({"cuda_version": "13.0"}, work)
    assert script.check_sglang_jit({}, work), script.RESULTS
    assert "sm_120f for compute capability 12.0, -lcudart)" in script.RESULTS[-1]["detail"]
    # The next probe of the same toolchain loads and calls that build instead of compiling again.
    assert script.check_sglang_jit({}, work)
    assert "sm_120f for compute capability 12.0 (its build of the same inputs)" in script.RESULTS[-1]["detail"]
    assert script.check_sglang_jit({"device": "cpu"}, work) is None
    (home / "lib64" / "libcudart.so").unlink()
    assert not script.check_sglang_jit({}, work)
    assert "the link against tvm-ffi and cudart failed" in script.RESULTS[-1]["detail"]
    assert "cannot find -lcudart" in script.RESULTS[-1]["detail"]
    paths = script.tvm_ffi_paths()
    with monkeypatch.context() as patch:
        patch.setattr(script, "tvm_ffi_paths", lambda: {**paths, "includes": [str(tmp_path / "no-such-dir")]})
        assert not script.check_sglang_jit({}, work)
    assert "nvcc -std=c++20 -gencode=arch=compute_120f,code=sm_120f failed" in script.RESULTS[-1]["detail"]
    assert "dlpack/dlpack.h: No such file or directory" in script.RESULTS[-1]["detail"]
    monkeypatch.setitem(sys.modules, "tvm_ffi.libinfo", None)
    assert not script.check_sglang_jit({}, work)
    assert "tvm-ffi, which SGLang's JIT kernels build against, is not usable" in script.RESULTS[-1]["detail"]
    script.TOOLCHAIN.clear()
    assert not script.check_sglang_jit({}, work)
    assert script.RESULTS[-1]["detail"] == "not built: the toolchain check failed"


def test_an_sglang_without_tvm_ffi_needs_no_jit_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = probe_script()
    monkeypatch.setattr(script.importlib.metadata, "requires", lambda name: ["torch==2.9.1", "sgl-kernel==0.3.21"])
    monkeypatch.setattr(script.importlib.metadata, "version", lambda name: "0.5.9")
    assert script.check_sglang_jit({}, str(tmp_path)) is True
    assert script.RESULTS[-1]["detail"] == "not needed: sglang 0.5.9 does not build JIT kernels against tvm-ffi"
    monkeypatch.setattr(script.importlib.metadata, "requires", lambda name: ["apache-tvm-ffi==0.1.11"])
    assert script.sglang_builds_with_tvm_ffi()


# ---- SGLang's JIT build: the probe's commands against SGLang 0.5.23's own code and nvcc 13.0.88's answers ---------

TOOLCHAIN_FIXTURES = ROOT / "tests" / "fixtures" / "cuda-toolchain"


def sglang_suffix(major: int, minor: int, nvcc: tuple[int, int]) -> str:
    """SGLang 0.5.23's _cuda_arch_suffix (copied verbatim, Apache-2.0) with its nvcc release."""
    namespace: dict[str, Any] = {"_jit_cuda_version": lambda: nvcc}
    source = (TOOLCHAIN_FIXTURES / "sglang-0.5.23-jit-_cuda_arch_suffix.py.txt").read_text()
    exec(compile(source, "_cuda_arch_suffix", "exec"), namespace)  # a fixture's own code
    return str(namespace["_cuda_arch_suffix"](major, minor))


@pytest.mark.parametrize("nvcc", ["12.8", "12.9", "13.0"])
def test_the_probe_targets_a_gpu_as_sglangs_jit_does(nvcc: str) -> None:
    script = probe_script()
    release = (int(nvcc.split(".", maxsplit=1)[0]), int(nvcc.split(".")[1]))
    for major, minor in ((7, 5), (8, 0), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1)):
        target, arch = script.sglang_jit_target(f"{major}.{minor}", nvcc)
        assert target == f"{major}{minor}{sglang_suffix(major, minor, release)}", (major, minor)
        assert arch == major * 100 + minor * 10
    assert script.sglang_jit_target("12.0", "13.0") == ("120f", 1200)  # the reference host


def test_the_probe_builds_with_the_flags_of_sglangs_build_ninja() -> None:
    script = probe_script()
    rules = json.loads((TOOLCHAIN_FIXTURES / "sglang-0.5.23-jit-build.json").read_text())
    tvm = {"includes": ["/v/tvm_ffi/include"], "lib_dir": "/v/tvm_ffi/lib", "lib_name": "tvm_ffi"}
    compile_cmd, link_cmd, module = script.jit_commands("/cuda/bin/nvcc", "c++", "/cuda", "120f", 1200, tvm, "/w")
    values = {"target": "120f", "arch": "1200", "tvm_ffi_include": "/v/tvm_ffi/include",
              "dlpack_include": "/v/tvm_ffi/include", "tvm_ffi_lib_dir": "/v/tvm_ffi/lib",
              "tvm_ffi_lib_name": "tvm_ffi", "cuda_home": "/cuda"}
    cudaflags = list(dict.fromkeys(flag.format(**values) for flag in rules["cudaflags"]))  # one -I for both dirs
    assert compile_cmd == ["/cuda/bin/nvcc", "-MD", "-MF", "/w/sglang_probe_jit.o.d", *cudaflags, "-c",
                           "/w/sglang_probe_jit.cu", "-o", "/w/sglang_probe_jit.o"]
    assert link_cmd == ["c++", "/w/sglang_probe_jit.o", *(flag.format(**values) for flag in rules["ldflags"]), "-o",
                        module]


def test_the_sandbox_nvcc_knows_the_targets_nvcc_13_0_88_knows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = sandbox_cuda(tmp_path, monkeypatch)
    answers = json.loads((TOOLCHAIN_FIXTURES / "nvcc-13.0.88-gencode.json").read_text())["targets"]
    source = tmp_path / "work" / "t.cu"
    source.write_text("__global__ void k(int *x) { x[0] = 1; }\n")
    import subprocess

    for target, real in answers.items():
        proc = subprocess.run([str(home / "bin" / "nvcc"), "-Xcompiler", "-fPIC",
                               f"-gencode=arch=compute_{target},code=sm_{target}", "-std=c++20", "-c", str(source),
                               "-o", str(tmp_path / "work" / "t.o")], capture_output=True, text=True, check=False)
        assert (proc.returncode == 0) == real["accepted"], (target, proc.stderr)
        assert proc.stderr.strip() == real.get("stderr", ""), target


class StubBackend:
    name = "stub"
    accept_errnos = (errno.ENXIO,)

    def __init__(self, ok: bool) -> None:
        self.ok = ok

    def gpus(self, count: int, alloc_mib: int) -> tuple[bool, str]:
        return self.ok, f"{count} GPUs, {alloc_mib} MiB"

    def triton(self, _work: str) -> tuple[bool, str]:
        return self.ok, "stub kernel"


def test_gpus_check_reports_the_node_denials_before_asking_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    script = probe_script()
    monkeypatch.setattr(script, "open_errors", lambda nodes, accept: [])
    assert script.check_gpus({"gpus": 8, "alloc_mib": 64}, StubBackend(True))
    assert script.RESULTS[-1]["detail"] == "stub: 8 GPUs, 64 MiB"
    assert script.check_gpus({"gpus": 8, "exclusive_process": True}, StubBackend(False))  # not asked: held
    monkeypatch.setattr(script, "open_errors", lambda nodes, accept: ["denied: /dev/nvidia0"])
    assert not script.check_gpus({"gpus": 8}, StubBackend(True))


def test_nccl_all_reduce_reports_a_hang_and_a_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The real path spawns one process per rank with the server's interpreter; here the worker program is
    replaced by one that sleeps (a hang) or fails, to check the bounds and the messages."""
    script = probe_script()
    monkeypatch.setattr(script, "NCCL_WORKER", "import sys, time; time.sleep(30)")
    ok, detail = script.nccl_all_reduce(2, 1.0, str(tmp_path))
    assert not ok and "did not finish within 1 s: a hang" in detail
    monkeypatch.setattr(script, "NCCL_WORKER", "import sys; print('NCCL error: unhandled system error'); sys.exit(1)")
    ok, detail = script.nccl_all_reduce(2, 10.0, str(tmp_path))
    assert not ok and "rank 0: NCCL error: unhandled system error" in detail
    monkeypatch.setattr(script, "NCCL_WORKER", "print('ok')")
    assert script.nccl_all_reduce(2, 10.0, str(tmp_path))[0]
    assert script.nccl_all_reduce(1, 10.0, str(tmp_path)) == (True, "one rank: no all-reduce needed")


def test_without_torch_or_a_declared_backend_cuda_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    script = probe_script()
    monkeypatch.setattr(script.importlib.metadata, "entry_points", lambda group: [])
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(ImportError):
        script.cuda_backend()


def test_a_declared_backend_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    script = probe_script()

    class Entry:
        name = "cuda"

        def load(self) -> Any:
            return lambda: StubBackend(True)

    monkeypatch.setattr(script.importlib.metadata, "entry_points", lambda group: [Entry()])
    assert script.cuda_backend().name == "stub"


class FakeTensor:
    """What check_cpu asks of torch: ones(n, n), @ and indexing."""

    def __init__(self, size: int, value: float = 1.0) -> None:
        self.size, self.value = size, value

    def __matmul__(self, other: FakeTensor) -> FakeTensor:
        return FakeTensor(self.size, self.value * other.value * self.size)

    def __getitem__(self, _index: int) -> FakeTensor:
        return self

    def __float__(self) -> float:
        return float(self.value)


def test_a_cpu_server_is_probed_on_the_cpu_and_asked_nothing_of_gpus(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    script = probe_script()
    fake = ModuleType("torch")
    fake.__version__ = "2.14.1"  # type: ignore[attr-defined]
    fake.ones = lambda rows, cols: FakeTensor(rows)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(script, "cuda_backend", lambda: pytest.fail("a CPU server's probe asked for CUDA"))
    monkeypatch.setattr(script, "check_nvml", lambda settings: pytest.fail("a CPU server's probe asked NVML"))
    script.check_device({"device": "cpu", "gpus": 0, "nccl": True}, str(tmp_path))
    assert [(r["check"], r["ok"]) for r in script.RESULTS] == [("cpu", True)]
    assert "torch 2.14.1 computed a matrix product on the CPU" in script.RESULTS[0]["detail"]


def test_a_cpu_server_without_torch_fails_the_probe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = probe_script()
    monkeypatch.setitem(sys.modules, "torch", None)
    script.check_device({"device": "cpu"}, str(tmp_path))
    assert [(r["check"], r["ok"]) for r in script.RESULTS] == [("cpu", False)]
    assert script.RESULTS[0]["detail"].startswith("torch cannot be loaded")


def test_a_gpu_server_is_still_asked_for_cuda_and_nvml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = probe_script()
    monkeypatch.setattr(script, "cuda_backend", lambda: StubBackend(True))
    monkeypatch.setattr(script, "open_errors", lambda nodes, accept: [])
    monkeypatch.setattr(script, "check_nvml", lambda settings: script.report("nvml", True, "stub"))
    monkeypatch.setattr(script, "check_sglang_jit", lambda settings, work: script.report("sglang-jit", True, "stub"))
    script.check_device({"gpus": 2, "nccl": False}, str(tmp_path))
    assert [r["check"] for r in script.RESULTS] == ["sglang-jit", "cuda", "triton", "nvml"]


# ---- FlashInfer's kernel packages: the probe's reading of a GPU against FlashInfer 0.7.2's own code --------------

FLASHINFER = ROOT / "tests" / "fixtures" / "flashinfer"
TAGS = ["sm75", "sm80", "sm86", "sm89", "sm90", "sm90a", "sm100a", "sm100f", "sm103a", "sm110a", "sm120", "sm120a",
        "sm120f", "sm121a", "sm121f"]


def flashinfer_module(name: str) -> ModuleType:
    """A file of FlashInfer 0.7.2 copied verbatim into the fixtures (Apache-2.0; see its README), as a module."""
    module = ModuleType("flashinfer_fixture_" + Path(name).stem.replace("-", "_").replace(".", "_"))
    sys.modules[module.__name__] = module  # its dataclass looks its module up
    exec(compile((FLASHINFER / name).read_text(), name, "exec"), module.__dict__)  # a fixture's own code
    return module


def flashinfer_tag(major: int, minor: int, cuda: str) -> str | None:
    import textwrap

    release = tuple(int(part) for part in cuda.split("."))
    source = textwrap.dedent((FLASHINFER / "flashinfer-0.7.2-compilation_context-_normalize_cuda_arch.py.txt")
                             .read_text()).replace("@staticmethod\n", "")
    source = source.replace("from flashinfer.jit.cpp_ext import is_cuda_version_at_least", "pass")
    namespace = flashinfer_code_from(source, {"is_cuda_version_at_least": lambda version: release >= tuple(
        int(part) for part in version.split("."))})
    try:
        got_major, got_minor = namespace["_normalize_cuda_arch"](major, minor)
    except RuntimeError:
        return None
    return f"sm{got_major}{got_minor}"


def flashinfer_code_from(source: str, namespace: dict[str, Any]) -> dict[str, Any]:
    exec(compile(source, "_normalize_cuda_arch", "exec"), namespace)  # a fixture's own code
    return namespace


@pytest.mark.parametrize("cuda", ["12.8", "12.9", "13.0"])
def test_the_probe_names_a_gpu_as_flashinfer_does(cuda: str) -> None:
    script = probe_script()
    for major, minor in ((7, 5), (8, 0), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1)):
        assert script.device_tag(f"{major}.{minor}", cuda) == flashinfer_tag(major, minor, cuda), (major, minor)
    assert script.device_tag("12.0", "13.0") == "sm120f"  # the reference host


def test_the_probe_matches_a_kernel_package_to_a_gpu_as_flashinfer_does() -> None:
    script = probe_script()
    score = flashinfer_module("flashinfer-0.7.2-jit-_cuda_architecture.py.txt").cuda_binary_target_compatibility_score
    for kernels in TAGS:
        for device in TAGS:
            assert script.serves(kernels, device) == (score(kernels, device) is not None), (kernels, device)


def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capability: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\nprintf '{capability}\\n{capability}\\n'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


class Dist:
    def __init__(self, name: str, version: str) -> None:
        self.metadata, self.version = {"Name": name}, version


@pytest.mark.parametrize(("capability", "installed", "ok"), [
    ("12.0", {"flashinfer-jit-cache-sm120f": "0.7.2+cu130"}, True),
    ("12.0", {"flashinfer_jit_cache_sm100a": "0.7.2+cu130"}, False),  # another GPU's
    ("12.0", {"flashinfer-jit-cache-sm120f": "0.7.1+cu130"}, False),  # not the shim's version: FlashInfer drops it
    ("12.0", {}, False),
    ("9.0", {"flashinfer-jit-cache-sm90a": "0.7.2+cu130"}, True),
], ids=["its-own", "another-gpus", "other-version", "none", "hopper"])
def test_the_probe_refuses_a_host_without_its_gpus_kernel_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capability: str, installed: dict[str, str], ok: bool) -> None:
    script = probe_script()
    fake_smi(tmp_path, monkeypatch, capability)
    dists = [Dist("flashinfer-jit-cache", "0.7.2+cu130")] + [Dist(name, version) for name, version in installed.items()]
    monkeypatch.setattr(script.importlib.metadata, "version", lambda name: "0.7.2+cu130")
    monkeypatch.setattr(script.importlib.metadata, "distributions", lambda: dists)
    monkeypatch.setattr(script.importlib.metadata, "requires", lambda name: [
        "flashinfer-jit-cache-sm90a==0.7.2+cu130", "flashinfer-jit-cache-sm100a==0.7.2+cu130",
        "flashinfer-jit-cache-sm120f==0.7.2+cu130"])
    settings = {"flashinfer_prebuilt": ["flashinfer-cubin", "flashinfer-jit-cache"], "cuda_version": "13.0"}
    assert script.check_flashinfer_kernels(settings) is ok, script.RESULTS
    detail = script.RESULTS[-1]["detail"]
    expected = "serves compute capability" if ok else "would compile its kernels at the first request"
    assert expected in detail, detail


def test_a_jit_cache_that_holds_its_kernels_or_a_cpu_server_needs_no_kernel_package(
        monkeypatch: pytest.MonkeyPatch) -> None:
    script = probe_script()
    monkeypatch.setattr(script.importlib.metadata, "version", lambda name: "0.6.18+cu130")
    monkeypatch.setattr(script.importlib.metadata, "requires", lambda name: None)
    settings = {"flashinfer_prebuilt": ["flashinfer-cubin", "flashinfer-jit-cache"], "cuda_version": "13.0"}
    assert script.check_flashinfer_kernels(settings) is True
    assert script.check_flashinfer_kernels({**settings, "device": "cpu"}) is None
    assert script.check_flashinfer_kernels({**settings, "flashinfer_prebuilt": []}) is None


# ---- NUMA binding: SGLang's helper, run with the real numactl (scripts/setup.sh installs it) ---------------------

def fake_nodes(tmp_path: Path, count: int) -> str:
    root = tmp_path / "nodes"
    for node in range(count):
        (root / f"node{node}").mkdir(parents=True)
    (root / "possible").write_text(f"0-{count - 1}\n")
    return str(root)


@pytest.fixture
def noexec_dir(tmp_path: Path) -> Any:
    """A tmpfs mounted noexec, as CIS baselines mount /tmp (the unit's PrivateTmp= inherits the flag)."""
    import subprocess

    path = tmp_path / "noexec"
    path.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec,size=1m", "tmpfs", str(path)],
                           capture_output=True, text=True, check=False)
    assert mount.returncode == 0, f"the test mounts a tmpfs (as root): {mount.stderr}"
    yield str(path)
    subprocess.run(["umount", str(path)], check=True)


def test_numa_auto_runs_sglangs_helper_from_tmp(tmp_path: Path) -> None:
    script = probe_script()
    assert script.check_numa({"numa_bind": "off"}) is None
    assert script.check_numa({"numa_bind": "auto", "device": "cpu"}) is None
    assert script.check_numa({"numa_bind": "auto"}, fake_nodes(tmp_path, 2))
    detail = script.RESULTS[-1]["detail"]
    assert detail.startswith("2 NUMA nodes: each rank runs bound to its GPU's node; SGLang's NUMA helper ran from /tmp")
    assert "(numactl --cpunodebind=0 " in detail
    assert not [name for name in os.listdir("/tmp") if name.startswith("sglang_temp_file_")]  # it cleans up


def test_numa_auto_is_refused_where_the_helper_cannot_run(tmp_path: Path, noexec_dir: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    script = probe_script()
    monkeypatch.setattr(script, "NUMA_HELPER_DIR", noexec_dir)
    assert not script.check_numa({"numa_bind": "auto"}, fake_nodes(tmp_path, 2))
    detail = script.RESULTS[-1]["detail"]
    assert f"SGLang's NUMA helper does not run from {noexec_dir} in the unit" in detail
    assert "Permission denied" in detail and "allowed: sglang_numa_bind: off" in detail
    # One node: SGLang binds nothing and never writes the helper, so the same sandbox passes, saying why.
    assert script.check_numa({"numa_bind": "auto"}, fake_nodes(tmp_path / "one", 1))
    assert script.RESULTS[-1]["detail"].startswith("1 NUMA node: SGLang binds nothing on this host; SGLang's NUMA "
                                                   "helper does not run")


def test_numa_auto_without_numactl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = probe_script()
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not script.check_numa({"numa_bind": "auto"}, fake_nodes(tmp_path, 2))
    assert script.RESULTS[-1]["detail"].startswith("numactl is not on the unit's PATH")
