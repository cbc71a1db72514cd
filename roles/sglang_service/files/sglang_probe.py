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
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import pwd
import random
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
# curand's headers: FlashInfer 0.7.2 compiles its sampling kernels when no kernel package serves the GPU, and they
# include these, from $CUDA_HOME/include only (flashinfer data/include/flashinfer/sampling.cuh, jit/cpp_ext.py).
CURAND_HEADERS = ("curand.h", "curand_kernel.h")
# What the toolchain check found: nvcc's path and release, the C++ compiler (SGLang's JIT links with it).
TOOLCHAIN: dict[str, str] = {}


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


def nvcc_problems(settings: dict[str, Any], cuda_home: str) -> tuple[list[str], list[str]]:
    """nvcc of $CUDA_HOME at the stack's CUDA release, and curand's headers beside it: (problems, notes)."""
    nvcc = os.path.join(cuda_home, "bin", "nvcc") if cuda_home else ""
    if not cuda_home:
        return ["CUDA_HOME is not set (the environment file sets it from sglang_cuda_version)"], []
    if not os.access(nvcc, os.X_OK):
        return [f"{nvcc} is missing (CUDA_HOME={cuda_home}; package cuda-nvcc of that release)"], []
    code, out = run([nvcc, "--version"], timeout=60)
    release = re.search(r"release (\d+\.\d+), V([\d.]+)", out)
    if code or not release:
        return [f"{nvcc} --version failed: {last_lines(out)}"], []
    if settings.get("cuda_version") and release.group(1) != settings["cuda_version"]:
        return [f"nvcc is CUDA {release.group(1)}, the stack needs {settings['cuda_version']}"], []
    TOOLCHAIN.update(nvcc=nvcc, release=release.group(1), version=release.group(2), cuda_home=cuda_home)
    missing = [name for name in CURAND_HEADERS if not os.path.isfile(os.path.join(cuda_home, "include", name))]
    if missing:
        return [f"{', '.join(missing)} missing in {cuda_home}/include (package libcurand-dev of CUDA "
                f"{release.group(1)}): FlashInfer's sampling kernels include them when it compiles them"], []
    return [], [f"nvcc {release.group(2)}"]


def check_toolchain(settings: dict[str, Any], work: str) -> bool:
    """What Triton (a C helper against the base interpreter's Python.h, built with gcc), and SGLang's,
    FlashInfer's and tvm-ffi's JIT kernels (nvcc from $CUDA_HOME, c++, ninja from PATH) need."""
    TOOLCHAIN.clear()
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or ""
    problems, notes = nvcc_problems(settings, cuda_home)
    nvcc = TOOLCHAIN.get("nvcc", "")
    cc, cxx, ninja = compiler("CC", ("gcc", "clang")), compiler("CXX", ("c++", "g++")), shutil.which("ninja")
    for name, found in (("a C compiler (gcc)", cc), ("a C++ compiler (c++)", cxx), ("ninja on PATH", ninja)):
        if not found:
            problems.append(f"{name} not found (PATH={os.environ.get('PATH')})")
    include = sysconfig.get_paths(scheme=sysconfig.get_default_scheme())["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        problems.append(f"{include}/Python.h is missing (the base interpreter's headers: python3-dev)")
    if not problems:
        problems += compile_checks(cc or "", nvcc, include, work)
    if problems:
        TOOLCHAIN.clear()
    else:
        TOOLCHAIN["cxx"] = cxx or ""
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


def gpu_capabilities() -> tuple[list[str], str]:
    """The distinct compute capabilities of the host's GPUs ("12.0"), as nvidia-smi reports them, and its output."""
    code, out = run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], timeout=60)
    return (sorted({line.strip() for line in out.splitlines() if line.strip()}) if code == 0 else []), out


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
    capabilities, out = gpu_capabilities()
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


# ---- SGLang's own JIT kernels ---------------------------------------------------------------------
# SGLang 0.5.23 builds its JIT kernels (on sm120, the Marlin MoE kernels of INT4 checkpoints, while the weights
# load) with nvcc against tvm-ffi, from a build.ninja of its own (sglang/kernels/jit/utils/compile/ninja.py):
#   $nvcc -MD -MF $out.d -Xcompiler -fPIC -gencode=arch=compute_<t>,code=sm_<t> <spec flags> -I<tvm-ffi> -c
#   $cxx $in -shared -L<tvm-ffi lib> -ltvm_ffi -L$CUDA_HOME/lib64 -lcudart -o $out
# with the spec flags -DSGL_CUDA_ARCH=<major*100+minor*10> -std=c++20 -O3 --expt-relaxed-constexpr
# (utils/arch.py get_default_target_flags; utils/compile/toolchain.py), then loads it with tvm_ffi.load_module.
JIT_SOURCE = r"""#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

#include <cstdint>

__global__ void sglang_probe_kernel(int64_t* out) { out[0] = SGL_CUDA_ARCH; }

// The architecture the module was built for. It calls the CUDA runtime, so the link needs -lcudart as
// SGLang's modules do.
int64_t sglang_probe_arch(int64_t) {
  int count = 0;
  (void)cudaGetDeviceCount(&count);
  return SGL_CUDA_ARCH;
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(sglang_probe_arch, sglang_probe_arch);
"""
# Where the probe keeps its builds, under the service user's home as SGLang keeps its own (~/.cache/sglang/jit).
JIT_CACHE = "~/.cache/sglang-deploy/probe-jit"


def sglang_jit_target(capability: str, nvcc_release: str) -> tuple[str, int]:
    """SGLang 0.5.23's JIT target for a GPU and the nvcc that builds for it (utils/arch.py, _cuda_arch_suffix):
    "a" on 9.x and 10.x and above, "f" on 12.0 with nvcc 12.9 or newer, none below 9.0. Returns the target
    ("120f") and SGL_CUDA_ARCH (1200)."""
    major, minor = (int(part) for part in capability.strip().split(".", 1))
    release = tuple(int(part) for part in nvcc_release.split(".")[:2])
    if major == 9:
        suffix = "a"
    elif major == 12:
        suffix = "f" if minor == 0 and release >= (12, 9) else "a"
    else:
        suffix = "a" if major >= 10 else ""
    return f"{major}{minor}{suffix}", major * 100 + minor * 10


def jit_commands(nvcc: str, cxx: str, cuda_home: str, target: str, arch: int, tvm: dict[str, Any],
                 work: str) -> tuple[list[str], list[str], str]:
    """The compile and link commands of SGLang's build.ninja for one .cu file, and the module they build."""
    source, obj, module = (os.path.join(work, name) for name in ("sglang_probe_jit.cu", "sglang_probe_jit.o",
                                                                 "sglang_probe_jit.so"))
    includes = [f"-I{path}" for path in tvm["includes"]]
    compile_cmd = [nvcc, "-MD", "-MF", f"{obj}.d", "-Xcompiler", "-fPIC",
                   f"-gencode=arch=compute_{target},code=sm_{target}", f"-DSGL_CUDA_ARCH={arch}", "-std=c++20",
                   "-O3", "--expt-relaxed-constexpr", *includes, "-c", source, "-o", obj]
    link_cmd = [cxx, obj, "-shared", f"-L{tvm['lib_dir']}", f"-l{tvm['lib_name']}",
                f"-L{os.path.join(cuda_home, 'lib64')}", "-lcudart", "-o", module]
    return compile_cmd, link_cmd, module


def tvm_ffi_paths() -> dict[str, Any]:
    """tvm-ffi's headers and library, found as SGLang finds them (toolchain.py, tvm_ffi_paths)."""
    from tvm_ffi.libinfo import find_dlpack_include_path, find_include_path, find_libtvm_ffi  # the virtualenv's

    library = find_libtvm_ffi()
    name = os.path.splitext(os.path.basename(library))[0]
    return {"includes": list(dict.fromkeys([find_include_path(), find_dlpack_include_path()])),
            "lib_dir": os.path.dirname(library), "lib_name": name[3:] if name.startswith("lib") else name,
            "version": importlib.metadata.version("apache-tvm-ffi")}


def file_identity(path: str) -> list[Any]:
    """A file as the build cache sees it: what it resolves to, its size and modification time (a missing file
    is an identity too, so a removed package changes the key)."""
    try:
        real = os.path.realpath(path)
        stat = os.stat(real)
    except OSError:
        return [path, None]
    return [real, stat.st_size, stat.st_mtime_ns]


def jit_key(target: str, arch: int, tvm: dict[str, Any]) -> str:
    """The build's key: its source and commands, and the identity of every file they read (nvcc, the C++
    compiler, cudart's link name and header, tvm-ffi's library and headers). Like SGLang's own JIT cache, a build
    is reused until one of them changes; a reused build is still loaded and called."""
    commands = jit_commands(TOOLCHAIN["nvcc"], TOOLCHAIN["cxx"], TOOLCHAIN["cuda_home"], target, arch, tvm, "@")
    home = TOOLCHAIN["cuda_home"]
    files = [TOOLCHAIN["nvcc"], shutil.which(TOOLCHAIN["cxx"]) or TOOLCHAIN["cxx"],
             os.path.join(home, "lib64", "libcudart.so"), os.path.join(home, "include", "cuda_runtime.h"),
             os.path.join(tvm["lib_dir"], f"lib{tvm['lib_name']}.so"),
             *(os.path.join(include, header) for include in tvm["includes"]
               for header in ("tvm/ffi/function.h", "dlpack/dlpack.h"))]
    text = json.dumps([JIT_SOURCE, commands, [file_identity(path) for path in files]])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_jit_module(capability: str, tvm: dict[str, Any], work: str) -> tuple[bool, str]:
    """Build (or reuse the build of the same inputs), load and call one module for a compute capability, as
    SGLang's JIT does."""
    target, arch = sglang_jit_target(capability, TOOLCHAIN["release"])
    cached = os.path.join(os.path.expanduser(JIT_CACHE), jit_key(target, arch, tvm), "sglang_probe_jit.so")
    reused = os.path.isfile(cached)
    if not reused:
        compile_cmd, link_cmd, module = jit_commands(TOOLCHAIN["nvcc"], TOOLCHAIN["cxx"], TOOLCHAIN["cuda_home"],
                                                     target, arch, tvm, work)
        with open(compile_cmd[compile_cmd.index("-c") + 1], "w", encoding="utf-8") as handle:
            handle.write(JIT_SOURCE)
        flags = f"-std=c++20 -gencode=arch=compute_{target},code=sm_{target}"
        for step, argv in (("nvcc " + flags, compile_cmd), ("the link against tvm-ffi and cudart", link_cmd)):
            code, out = run(argv, timeout=600, cwd=work)
            if code:
                return False, f"compute capability {capability}: {step} failed: {last_lines(out)}"
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        os.replace(module, cached)
    try:
        import tvm_ffi  # the virtualenv's

        answer = int(tvm_ffi.load_module(cached).sglang_probe_arch(0))
    except Exception as error:
        return False, f"compute capability {capability}: the module does not load: {str(error).splitlines()[0]}"
    if answer != arch:
        return False, f"compute capability {capability}: the module answered {answer}, built for {arch}"
    return True, f"sm_{target} for compute capability {capability}{' (its build of the same inputs)' if reused else ''}"


def sglang_builds_with_tvm_ffi() -> bool:
    """Whether the installed SGLang requires apache-tvm-ffi (0.5.23 does); an SGLang the probe cannot read counts."""
    try:
        requires = importlib.metadata.requires("sglang") or []
    except importlib.metadata.PackageNotFoundError:
        return True
    return any(re.match(r"apache[-_.]tvm[-_.]ffi\b", requirement, re.IGNORECASE) for requirement in requires)


def check_sglang_jit(settings: dict[str, Any], work: str) -> bool | None:
    """A CUDA module built the way SGLang's JIT builds its kernels during the load (nvcc -std=c++20 for the
    GPU's sm_120f, tvm-ffi's headers, -lcudart), loaded and called: on the reference host's INT4 checkpoint a
    failure here is a failure after the weights are read."""
    if str(settings.get("device") or "cuda") == "cpu":
        return None
    if not sglang_builds_with_tvm_ffi():
        return report("sglang-jit", True, f"not needed: sglang {importlib.metadata.version('sglang')} does not build "
                      "JIT kernels against tvm-ffi")
    if not TOOLCHAIN:
        return report("sglang-jit", False, "not built: the toolchain check failed")
    try:
        tvm = tvm_ffi_paths()
    except (ImportError, RuntimeError, importlib.metadata.PackageNotFoundError) as error:
        return report("sglang-jit", False, f"tvm-ffi, which SGLang's JIT kernels build against, is not usable in the "
                      f"virtualenv (package apache-tvm-ffi): {error}")
    capabilities, out = gpu_capabilities()
    if not capabilities:
        return report("sglang-jit", False, f"nvidia-smi gave no compute capability: {last_lines(out)}")
    built, problems = [], []
    for capability in capabilities:
        ok, detail = build_jit_module(capability, tvm, work)
        (built if ok else problems).append(detail)
    if problems:
        return report("sglang-jit", False, "; ".join(problems) + " (SGLang would fail the same way building its "
                      "kernels during the load)")
    return report("sglang-jit", True, f"built, loaded and called a tvm-ffi {tvm['version']} CUDA module as SGLang's "
                  f"JIT does (nvcc {TOOLCHAIN['version']}, " + ", ".join(built) + ", -lcudart)")


# ---- NUMA binding -----------------------------------------------------------------------------------
# SGLang 0.5.23 binds a rank by writing a helper to /tmp, whatever TMPDIR says, and making it the interpreter of the
# spawned process: "exec numactl <args> <python>" (srt/utils/numa_utils.py _create_numactl_executable), with the
# strongest binding numactl accepts: --membind, then --preferred, then the CPUs alone (_probe_numactl_args).
NUMA_HELPER_DIR = "/tmp"
NODE_ROOT = "/sys/devices/system/node"


def numa_binding(numactl: str, node: int) -> tuple[str | None, str]:
    """The strongest binding to the node numactl applies in this sandbox, as SGLang tries them; (None, why)."""
    strongest = f"--cpunodebind={node} --membind={node}"
    out = ""
    for candidate in (strongest, strongest.replace("--membind=", "--preferred="), f"--cpunodebind={node}"):
        code, out = run([numactl, *candidate.split(), "true"], timeout=10)
        if code == 0:
            return candidate, ""
    return None, last_lines(out)


def numa_helper(numactl: str, binding: str, directory: str | None = None) -> tuple[bool, str]:
    """Write SGLang's helper where SGLang writes it and run the interpreter through it."""
    directory = directory or NUMA_HELPER_DIR
    path = os.path.join(directory, f"sglang_temp_file_{time.time()}_{random.randrange(0, 10000000)}.sh")
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(f'#!/bin/sh\nexec numactl {binding} {sys.executable} "$@"')
        os.chmod(path, 0o777)
    except OSError as error:
        return False, f"SGLang's NUMA helper cannot be written to {directory}: {error.strerror}"
    try:
        code, out = run([path, "-c", "print('sglang-numa-helper')"], timeout=60)
    finally:
        os.unlink(path)
    if code or "sglang-numa-helper" not in out:
        return False, f"SGLang's NUMA helper does not run from {directory} in the unit ({path}: {last_lines(out)})"
    return True, f"SGLang's NUMA helper ran from {directory} (numactl {binding})"


def check_numa(settings: dict[str, Any], node_root: str = NODE_ROOT) -> bool | None:
    """With sglang_numa_bind: auto, SGLang's binding works in the unit's sandbox: numactl is there, a binding applies,
    and the helper SGLang writes to /tmp runs (a noexec /tmp, as hardened hosts mount it, stops every rank). On a
    host with one node SGLang binds nothing (numa_utils._is_numa_available), so what fails there is only reported."""
    if settings.get("numa_bind") != "auto" or str(settings.get("device") or "cuda") == "cpu":
        return None
    nodes = sorted(name for name in (os.listdir(node_root) if os.path.isdir(node_root) else [])
                   if re.fullmatch(r"node[0-9]+", name))
    numactl = shutil.which("numactl")
    binding, why = numa_binding(numactl, 0) if numactl else (None, "")
    ok, detail = numa_helper(numactl, binding) if numactl and binding else (False, "")
    if not numactl:
        problem = ("numactl is not on the unit's PATH: SGLang binds nothing without it (role sglang_stack installs it "
                   "with sglang_numa_bind: auto)")
    elif binding is None:
        problem = f"numactl applies no binding in the unit's sandbox ({why}); allowed: sglang_numa_bind: off"
    elif not ok:
        problem = (f"{detail}; allowed: sglang_numa_bind: off, or a /tmp that lets the unit run programs (mounted "
                   "without noexec)")
    else:
        problem = ""
    if len(nodes) < 2:
        return report("numa", True, f"{len(nodes)} NUMA node: SGLang binds nothing on this host; "
                      + (problem or detail))
    if problem:
        return report("numa", False, problem)
    return report("numa", True, f"{len(nodes)} NUMA nodes: each rank runs bound to its GPU's node; {detail}")


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
    if backend is not None:
        check_sglang_jit(settings, work)  # after the backend, which loads the CUDA runtime (torch) as SGLang does
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
        check_numa(settings)
        check_device(settings, work)
    ok = all(result["ok"] for result in RESULTS)
    print(json.dumps({"done": True, "ok": ok, "seconds": round(time.monotonic() - started, 1)}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
