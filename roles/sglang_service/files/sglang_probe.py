"""What an SGLang server needs in its first minute, checked in the new configuration's exact sandbox.

Runs as the server would: the same user, sandboxing and device properties, environment file and
virtualenv interpreter, inside a transient unit that the sglang_probe module starts with
systemd-run and feeds this file on standard input:

    <venv>/bin/python - '<json settings>'

It prints one JSON object per check on stdout ({"check", "ok", "detail"}) and exits 0 when every
check passed, 1 otherwise. Standard library only, plus the GPU stack of the virtualenv: the CUDA part
goes through the ``sglang_deploy.probe`` entry point when a package declares one (the SGLang
simulator does, in the sandbox), else through torch, as the server does.
"""

from __future__ import annotations

import errno
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from typing import Any

# Device nodes the CUDA runtime opens (NVIDIA's container toolkit injects these for a compute
# container: pkg/nvcdi/common-nvml.go, internal/platform-support/dgpu/nvml.go).
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
RESULTS: list[dict[str, Any]] = []

C_HELPER = r"""
#include <Python.h>
static struct PyModuleDef probe_module = {PyModuleDef_HEAD_INIT, "sglang_probe_c", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_sglang_probe_c(void) { return PyModule_Create(&probe_module); }
"""
CUDA_KERNEL = "__global__ void sglang_probe_kernel(int *x) { x[0] = 1; }\n"


def report(check: str, ok: bool, detail: str) -> bool:
    result = {"check": check, "ok": bool(ok), "detail": detail}
    RESULTS.append(result)
    print(json.dumps(result), flush=True)
    return bool(ok)


def run(argv: list[str], timeout: float = 120, cwd: str | None = None) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    except PermissionError as error:
        return 126, f"{argv[0]}: {error.strerror}"
    except subprocess.TimeoutExpired:
        return 124, f"{' '.join(argv)} did not finish within {timeout:.0f} s"
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def last_lines(text: str, count: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-count:])


# ---- the process itself ---------------------------------------------------------------------------

def check_identity(settings: dict[str, Any]) -> bool:
    user = pwd.getpwuid(os.getuid()).pw_name
    detail = f"{sys.executable} (Python {sys.version.split()[0]}) runs as {user}, HOME={os.environ.get('HOME')}"
    wanted = settings.get("user")
    if wanted and user != wanted:
        return report("interpreter", False, f"{detail}; the unit should run it as {wanted}")
    return report("interpreter", True, detail)


def writable_dir(path: str) -> str | None:
    """None when a file can be created and removed in path (created if missing), else why not."""
    try:
        os.makedirs(path, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=".sglang-probe-", dir=path)
        os.close(handle)
        os.unlink(name)
    except OSError as error:
        return f"{path}: {error.strerror or error}"
    return None


def check_writable(settings: dict[str, Any]) -> bool:
    home = os.path.expanduser("~")
    paths = [os.path.join(home, ".cache"), os.path.join(home, ".triton"), tempfile.gettempdir(), "/dev/shm"]
    paths += [str(p) for p in settings.get("writable") or []]
    problems = [why for why in (writable_dir(path) for path in paths) if why]
    if problems:
        return report("writable", False, "cannot write " + "; ".join(problems) +
                      " (JIT caches live under HOME, NCCL needs /dev/shm; ReadWritePaths= / the service's home)")
    note = ""
    if os.statvfs(tempfile.gettempdir()).f_flag & os.ST_NOEXEC:
        note = (f"; note: {tempfile.gettempdir()} is mounted noexec, so torch.compile (--enable-torch-compile) could "
                "not load the kernels it builds there: set TORCHINDUCTOR_CACHE_DIR under HOME if you use it")
    return report("writable", True, "JIT caches, temporary files and /dev/shm: " + ", ".join(paths) + note)


# ---- the model ------------------------------------------------------------------------------------

def first_shard(path: str) -> str | None:
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as handle:
            files = sorted(set((json.load(handle).get("weight_map") or {}).values()))
        return os.path.join(path, files[0]) if files else None
    shards = sorted(name for name in os.listdir(path) if name.endswith(".safetensors"))
    return os.path.join(path, shards[0]) if shards else None


def read_model(label: str, path: str) -> tuple[bool, str]:
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
        shard = first_shard(path)
        if shard is None:
            return False, f"{label} {path}: no *.safetensors file"
        with open(shard, "rb") as handle:
            header_len = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(header_len))
    except OSError as error:
        where = error.filename or path
        return False, (f"{where}: {error.strerror} (the service user {pwd.getpwuid(os.getuid()).pw_name} "
                       "must be able to traverse every parent directory and read the files; a model under /root "
                       "or a 0750 home is readable by root only)")
    except ValueError as error:
        return False, f"{label} {path}: unreadable ({error})"
    architecture = (config.get("architectures") or ["?"])[0]
    return True, f"{label} {path}: config.json ({architecture}) and {os.path.basename(shard)} ({len(header)} tensors)"


def check_model(settings: dict[str, Any]) -> bool:
    results = [read_model("model", settings["model_path"])]
    if settings.get("draft_path"):
        results.append(read_model("draft", settings["draft_path"]))
    return report("model", all(ok for ok, _detail in results), "; ".join(detail for _ok, detail in results))


# ---- the JIT toolchain ----------------------------------------------------------------------------

def compiler(env: str, names: tuple[str, ...]) -> str | None:
    configured = os.environ.get(env)
    if configured:
        return shutil.which(configured)
    return next((found for found in map(shutil.which, names) if found), None)


def check_toolchain(settings: dict[str, Any], work: str) -> bool:
    """What Triton (a C helper against the base interpreter's Python.h, built with gcc), and SGLang's,
    FlashInfer's and tvm-ffi's JIT kernels (nvcc from $CUDA_HOME, c++, ninja from PATH) need."""
    problems, notes = [], []
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or ""
    nvcc = os.path.join(cuda_home, "bin", "nvcc") if cuda_home else ""
    if not cuda_home:
        problems.append("CUDA_HOME is not set (the environment file sets it from sglang_cuda_version)")
    elif not os.access(nvcc, os.X_OK):
        problems.append(f"{nvcc} is missing (CUDA_HOME={cuda_home}; package cuda-nvcc of that release)")
    else:
        code, out = run([nvcc, "--version"], timeout=60)
        release = re.search(r"release (\d+\.\d+), V([\d.]+)", out)
        if code or not release:
            problems.append(f"{nvcc} --version failed: {last_lines(out)}")
        elif settings.get("cuda_version") and release.group(1) != settings["cuda_version"]:
            problems.append(f"nvcc is CUDA {release.group(1)}, the stack needs {settings['cuda_version']}")
        else:
            notes.append(f"nvcc {release.group(2)}")
    cc, cxx, ninja = compiler("CC", ("gcc", "clang")), compiler("CXX", ("c++", "g++")), shutil.which("ninja")
    for name, found in (("a C compiler (gcc)", cc), ("a C++ compiler (c++)", cxx), ("ninja on PATH", ninja)):
        if not found:
            problems.append(f"{name} not found (PATH={os.environ.get('PATH')})")
    include = sysconfig.get_paths(scheme=sysconfig.get_default_scheme())["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        problems.append(f"{include}/Python.h is missing (the base interpreter's headers: python3-dev)")
    if not problems:
        problems += compile_checks(cc or "", nvcc, include, work)
    toolchain = [*notes, f"cc {cc}", f"c++ {cxx}", f"ninja {ninja}", f"Python.h in {include}"]
    detail = "; ".join(problems) if problems else ", ".join(toolchain)
    return report("toolchain", not problems, detail)


def compile_checks(cc: str, nvcc: str, include: str, work: str) -> list[str]:
    """Build a C extension the way Triton builds its cuda_utils helper and import it; compile a
    trivial CUDA kernel with nvcc (host compiler included)."""
    problems = []
    source, library = os.path.join(work, "probe_helper.c"), os.path.join(work, "sglang_probe_c.so")
    with open(source, "w", encoding="utf-8") as handle:
        handle.write(C_HELPER)
    code, out = run([cc, source, "-O0", "-shared", "-fPIC", f"-I{include}", "-o", library], timeout=120)
    if code:
        problems.append(f"{cc} cannot build a Python C extension (as Triton does at run time): {last_lines(out)}")
    else:
        try:
            loader = importlib.machinery.ExtensionFileLoader("sglang_probe_c", library)
            spec = importlib.util.spec_from_loader("sglang_probe_c", loader)
            assert spec is not None
            loader.exec_module(importlib.util.module_from_spec(spec))
        except (ImportError, OSError, AssertionError) as error:
            problems.append(f"the C extension built with {cc} does not import: {error}")
    kernel = os.path.join(work, "probe_kernel.cu")
    with open(kernel, "w", encoding="utf-8") as handle:
        handle.write(CUDA_KERNEL)
    code, out = run([nvcc, "-c", kernel, "-o", os.path.join(work, "probe_kernel.o")], timeout=300, cwd=work)
    if code:
        problems.append(f"nvcc cannot compile a CUDA kernel: {last_lines(out)}")
    return problems


def check_flashinfer(settings: dict[str, Any]) -> bool:
    wanted = settings.get("flashinfer_prebuilt") or []
    if not wanted:
        return report("flashinfer", True, "prebuilt kernels not required (sglang_stack_flashinfer_prebuilt: false)")
    try:
        flashinfer = importlib.metadata.version("flashinfer-python")
    except importlib.metadata.PackageNotFoundError:
        return report("flashinfer", False, "flashinfer-python is not installed in the virtualenv")
    found, problems = [], []
    for name in wanted:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{name} is not installed")
            continue
        found.append(f"{name} {version}")
        if version.split("+", 1)[0] != flashinfer:
            problems.append(f"{name} {version} does not match flashinfer {flashinfer}: FlashInfer ignores it")
    detail = "; ".join(problems) if problems else f"flashinfer {flashinfer} with " + ", ".join(found)
    return report("flashinfer", not problems, detail + ("" if not problems else
                  " (FlashInfer would compile or download kernels on first use)"))


# FlashInfer 0.7's jit-cache is a shim requiring one kernel package per GPU architecture (flashinfer/__main__.py:221).
# A FlashInfer architecture tag (flashinfer/jit/_cuda_architecture.py): major, minor, suffix.
ARCH_TAG = r"sm([0-9]{1,2})([0-9])([af]?)"
KERNEL_PACKAGE = re.compile(rf"^flashinfer-jit-cache-({ARCH_TAG})$")


def device_tag(capability: str, cuda: str) -> str | None:
    """FlashInfer 0.7.2's name for a GPU of this compute capability with this CUDA (compilation_context.py,
    _normalize_cuda_arch): sm120f for 12.0 with CUDA 12.9+, sm120a with 12.8; None where FlashInfer refuses."""
    major, minor = (int(part) for part in capability.strip().split(".", 1))
    release = tuple(int(part) for part in cuda.split(".")[:2])
    if major == 12:
        if minor == 0:
            suffix = "f" if release >= (12, 9) else "a" if release >= (12, 8) else None
        else:
            suffix = "a" if release >= (12, 9) else None
    else:
        suffix = "a" if major >= 9 else ""
    return None if suffix is None else f"sm{major}{minor}{suffix}"


def serves(kernels: str, device: str) -> bool:
    """Whether a kernel package built for one tag runs on a device of another (flashinfer 0.7.2
    jit/_cuda_architecture.py, cuda_binary_target_compatibility_score is not None): an `a` build only on its own
    compute capability, an `f` or plain one on its major at the same or a higher minor."""
    binary, target = (re.fullmatch(ARCH_TAG, tag) for tag in (kernels, device))
    if binary is None or target is None:
        return False
    (b_major, b_minor, b_suffix), (d_major, d_minor, d_suffix) = binary.groups(), target.groups()
    if (b_major, b_minor, b_suffix) == (d_major, d_minor, d_suffix):
        return True
    if b_suffix == "a":
        return (b_major, b_minor) == (d_major, d_minor)
    return b_major == d_major and int(b_minor) <= int(d_minor)


def installed_kernels(shim_version: str) -> list[str]:
    """The tags of the kernel packages installed at the shim's version (FlashInfer drops any other)."""
    found = []
    for dist in importlib.metadata.distributions():
        match = KERNEL_PACKAGE.match(re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower())
        if match and dist.version == shim_version:
            found.append(match.group(1))
    return found


def check_flashinfer_kernels(settings: dict[str, Any]) -> bool | None:
    """The jit-cache's kernel package for the GPUs of this host is installed at the shim's version: without it
    FlashInfer compiles its kernels at the first request, after the load, and its sampling needs curand's headers
    (flashinfer 0.7.2 data/include/flashinfer/sampling.cuh)."""
    if not settings.get("flashinfer_prebuilt") or str(settings.get("device") or "cuda") == "cpu":
        return None
    try:
        shim = importlib.metadata.version("flashinfer-jit-cache")
    except importlib.metadata.PackageNotFoundError:
        return None  # check_flashinfer reports it
    wanted = [requirement for requirement in importlib.metadata.requires("flashinfer-jit-cache") or []
              if KERNEL_PACKAGE.match(re.split(r"[=<>!~ ;\[]", requirement, maxsplit=1)[0].lower())]
    if not wanted:
        return report("flashinfer-kernels", True, f"flashinfer-jit-cache {shim} holds its kernels itself")
    code, out = run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], timeout=60)
    capabilities = sorted({line.strip() for line in out.splitlines() if line.strip()}) if code == 0 else []
    if not capabilities:
        return report("flashinfer-kernels", False, f"nvidia-smi gave no compute capability: {last_lines(out)}")
    cuda = str(settings.get("cuda_version") or "")
    kernels = installed_kernels(shim)
    problems, served = [], []
    for capability in capabilities:
        tag = device_tag(capability, cuda)
        usable = sorted(kernel for kernel in kernels if tag and serves(kernel, tag))
        if usable:
            served.append(f"flashinfer-jit-cache-{usable[-1]} {shim} serves compute capability {capability} ({tag} "
                          f"with CUDA {cuda})")
        else:
            problems.append(f"no kernel package of flashinfer-jit-cache {shim} serves compute capability {capability} "
                            f"({tag or 'unsupported'} with CUDA {cuda}); installed at its version: "
                            f"{sorted(kernels) or 'none'}")
    if problems:
        return report("flashinfer-kernels", False, "; ".join(problems) + ": FlashInfer would compile its kernels at "
                      "the first request, after the load (sglang_stack_flashinfer_kernels names the packages)")
    return report("flashinfer-kernels", True, "; ".join(served))


# ---- the GPUs -------------------------------------------------------------------------------------

def device_nodes(gpus: int) -> list[str]:
    return list(CONTROL_NODES) + [f"/dev/nvidia{index}" for index in range(gpus)]


def open_errors(nodes: list[str], accept: tuple[int, ...] = ()) -> list[str]:
    """Why nodes cannot be opened read-write, one line per reason. EPERM comes from the cgroup device policy."""
    why = {errno.EPERM: "denied by the unit's device policy (DevicePolicy=closed, DeviceAllow=)",
           errno.ENOENT: "missing (nvidia-device-nodes.service creates them at boot)",
           errno.EACCES: "not accessible to the service user (mode 0666 expected)"}
    failed: dict[str, list[str]] = {}
    for node in nodes:
        try:
            os.close(os.open(node, os.O_RDWR))
        except OSError as error:
            if error.errno not in accept:
                failed.setdefault(why.get(error.errno, str(error.strerror)), []).append(node)
    return [f"{reason}: {', '.join(paths)}" for reason, paths in failed.items()]


class TorchBackend:
    """The CUDA runtime as the server meets it: torch from the virtualenv."""

    name = "torch"

    def __init__(self) -> None:
        import torch  # the virtualenv's

        self.torch = torch
        self.name = f"torch {torch.__version__} (CUDA {torch.version.cuda})"

    def gpus(self, count: int, alloc_mib: int) -> tuple[bool, str]:
        torch = self.torch
        try:
            available = torch.cuda.device_count()
            if available < count:
                return False, f"CUDA sees {available} GPU(s), the server needs {count}"
            lines = []
            for index in range(count):
                block = torch.empty(alloc_mib * 2**20 // 4, dtype=torch.float32, device=f"cuda:{index}")
                block.fill_(1.0)
                torch.cuda.synchronize(index)
                free, total = torch.cuda.mem_get_info(index)
                lines.append(f"cuda:{index} {free / 2**30:.1f}/{total / 2**30:.1f} GiB free")
                del block
            torch.cuda.empty_cache()
        except RuntimeError as error:
            return False, f"{error}".splitlines()[0]
        return True, f"allocated {alloc_mib} MiB and ran a kernel on {count} GPU(s): " + ", ".join(lines)

    def triton(self, work: str) -> tuple[bool, str]:
        os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(work, "triton"))
        code = (
            "import torch, triton, triton.language as tl\n"
            "@triton.jit\n"
            "def k(x, n: tl.constexpr):\n"
            "    tl.store(x + tl.arange(0, n), tl.arange(0, n))\n"
            "t = torch.zeros(16, device='cuda:0', dtype=torch.int32)\n"
            "k[(1,)](t, 16)\n"
            "assert t.sum().item() == 120, t\n"
            "print(triton.__version__)\n"
        )
        status, out = run([sys.executable, "-c", code], timeout=300, cwd=work)
        if status:
            return False, f"a trivial Triton kernel fails: {last_lines(out)}"
        return True, f"compiled and ran a Triton {out.splitlines()[-1]} kernel"

    def nccl(self, ranks: int, timeout: float, work: str) -> tuple[bool, str]:
        return nccl_all_reduce(ranks, timeout, work)


NCCL_WORKER = r"""
import datetime, sys, torch, torch.distributed as dist
rank, world, address = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.cuda.set_device(rank)
dist.init_process_group("nccl", init_method=address, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=float(sys.argv[4])))
tensor = torch.ones(1 << 20, device=f"cuda:{rank}")
dist.all_reduce(tensor)
torch.cuda.synchronize()
assert tensor[0].item() == world, tensor[0].item()
dist.destroy_process_group()
print("ok")
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def nccl_all_reduce(ranks: int, timeout: float, work: str) -> tuple[bool, str]:
    """An all-reduce across the server's local ranks, one process per GPU, with the unit's NCCL_*
    settings: a PCIe P2P hang shows here in seconds instead of after a 10-minute load."""
    if ranks < 2:
        return True, "one rank: no all-reduce needed"
    address = f"tcp://127.0.0.1:{free_port()}"
    procs = [subprocess.Popen([sys.executable, "-c", NCCL_WORKER, str(rank), str(ranks), address, str(timeout)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work)
             for rank in range(ranks)]
    deadline = time.monotonic() + timeout
    outputs = []
    for proc in procs:
        try:
            out, _stderr = proc.communicate(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            return False, (f"the NCCL all-reduce across {ranks} ranks did not finish within {timeout:.0f} s: a hang "
                           "(on PCIe RTX PRO 6000, P2P through an IOMMU/ACS path hangs; see NCCL_P2P_DISABLE)")
        outputs.append((proc.returncode, out))
    failed = [f"rank {rank}: {last_lines(out, 3)}" for rank, (code, out) in enumerate(outputs) if code]
    if failed:
        return False, "the NCCL all-reduce failed: " + "; ".join(failed)
    seconds = timeout - max(deadline - time.monotonic(), 0)
    return True, f"all-reduce across {ranks} ranks in {seconds:.1f} s"


def cuda_backend() -> Any:
    """The simulator's stand-in when a package declares one, else torch."""
    for entry in importlib.metadata.entry_points(group="sglang_deploy.probe"):
        if entry.name == "cuda":
            return entry.load()()
    return TorchBackend()


def check_gpus(settings: dict[str, Any], backend: Any) -> bool:
    gpus = int(settings.get("gpus") or 0)
    if settings.get("exclusive_process"):
        return report("cuda", True, f"not asked: the GPUs are in Exclusive_Process compute mode and the running server "
                      f"holds them; {backend.name} is asked after the restart")
    problems = open_errors(device_nodes(gpus), getattr(backend, "accept_errnos", ()))
    if problems:
        return report("cuda", False, "; ".join(problems))
    ok, detail = backend.gpus(gpus, int(settings.get("alloc_mib") or 64))
    return report("cuda", ok, f"{backend.name}: {detail}")


def check_nvml(settings: dict[str, Any]) -> bool:
    code, out = run(["nvidia-smi", "--query-gpu=index,name,memory.used,memory.total", "--format=csv,noheader"],
                    timeout=60)
    rows = [line for line in out.splitlines() if line.strip()] if code == 0 else []
    if code or len(rows) < int(settings.get("gpus") or 0):
        return report("nvml", False, f"nvidia-smi in the unit's sandbox: {last_lines(out) or f'exit {code}'}")
    return report("nvml", True, f"nvidia-smi answers: {len(rows)} GPU(s), {rows[0]}")


def check_cpu() -> bool:
    """A server started with --device cpu (SGLang's CPU engine) computes with torch on the CPU: no GPU, CUDA, Triton
    kernel or NCCL all-reduce is asked of it."""
    try:
        import torch  # the virtualenv's
    except ImportError as error:
        return report("cpu", False, f"torch cannot be loaded: {error}")
    try:
        product = torch.ones(64, 64) @ torch.ones(64, 64)
        ok = float(product[0][0]) == 64.0
    except RuntimeError as error:
        return report("cpu", False, f"torch {torch.__version__} cannot compute on the CPU: {error}".splitlines()[0])
    return report("cpu", ok, f"torch {torch.__version__} computed a matrix product on the CPU (--device cpu: no GPU, "
                  f"Triton kernel, NCCL or NVML is asked)")


def check_device(settings: dict[str, Any], work: str) -> None:
    """The device the server computes on: the GPUs through CUDA (Triton, NCCL), or the CPU with --device cpu."""
    if str(settings.get("device") or "cuda") == "cpu":
        check_cpu()
        return
    try:
        backend = cuda_backend()
    except ImportError as error:
        report("cuda", False, f"the CUDA runtime cannot be loaded: {error}")
        backend = None
    if backend is not None and check_gpus(settings, backend) and not settings.get("exclusive_process"):
        report("triton", *backend.triton(work))
        if settings.get("nccl"):
            report("nccl", *backend.nccl(int(settings.get("gpus") or 0), float(settings.get("nccl_timeout") or 60),
                                         work))
    check_nvml(settings)


def main(argv: list[str]) -> int:
    settings = json.loads(argv[1]) if len(argv) > 1 else {}
    started = time.monotonic()
    check_identity(settings)
    check_writable(settings)
    check_model(settings)
    # Built where the JIT caches load their libraries from: under HOME (~/.triton/cache, ~/.cache/flashinfer,
    # ~/.cache/sglang/jit), not /tmp, which hardened hosts mount noexec.
    cache = os.path.join(os.path.expanduser("~"), ".cache")
    os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sglang-deploy-probe-", dir=cache) as work:
        check_toolchain(settings, work)
        check_flashinfer(settings)
        check_flashinfer_kernels(settings)
        check_device(settings, work)
    ok = all(result["ok"] for result in RESULTS)
    print(json.dumps({"done": True, "ok": ok, "seconds": round(time.monotonic() - started, 1)}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
