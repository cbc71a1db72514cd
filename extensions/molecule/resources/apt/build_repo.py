"""Build a signed apt repository of dummy NVIDIA driver packages for sandbox and Molecule hosts.

    build_repo.py OUT_DIR [--kernel RELEASE]

Runs on the (Debian) host it serves, with the host's own ``dpkg-deb`` and ``gpg``. It writes:

* ``OUT_DIR/repo/compute/cuda/repos/<distro>/<arch>/``: the tree of NVIDIA's CUDA repository
  (a flat repository: ``Packages``, ``Release``, ``InRelease``, ``Release.gpg`` and the ``.deb``
  files), for ``debian12``, ``ubuntu2204`` and ``ubuntu2404``, plus the public signing key as
  ``sglang-sim-archive-key.asc`` in each. Serve ``OUT_DIR/repo`` over HTTP (loopback) and point
  ``nvidia_driver_repo_base_url`` at ``http://HOST:PORT/compute/cuda/repos``.
* ``OUT_DIR/fingerprint``: the fingerprint of the throwaway signing key (generated here, never
  reused: its private half stays in ``OUT_DIR/gnupg``).

The packages carry NVIDIA's real names, with exact-version dependencies between a driver's
components as in NVIDIA's packaging, in several versions so that pins, holds and upgrades run
through real apt:

* Debian (CUDA repository packaging): ``nvidia-driver-cuda`` and ``nvidia-kernel-open-dkms`` with
  ``libcuda1``, ``libnvidia-ml1``, ``nvidia-persistenced``, ``nvidia-kernel-support`` and
  ``firmware-nvidia-gsp``, at 580.95.05-1, 580.105.08-1 and 590.44.01-1 (a newer branch that a
  pin must keep out).
* Ubuntu (branch in the name, up to 580): ``libnvidia-compute-580``, ``nvidia-utils-580``,
  ``nvidia-compute-utils-580``, ``nvidia-dkms-580-open`` with ``nvidia-kernel-common-580``,
  ``nvidia-kernel-source-580-open`` and ``nvidia-firmware-580-<version>``, at 580.95.05-0ubuntu1 and
  580.105.08-0ubuntu1.
* the CUDA 13.0 toolkit pieces the JIT builds need, at the versions roles/sglang_stack pins
  (``cuda-nvcc-13-0`` 13.0.88-1 with a dummy ``nvcc``, ``cuda-cudart-dev-13-0`` 13.0.96-1 with a dummy
  ``cuda_runtime.h``, and the others as empty packages), under ``/usr/local/cuda-13.0``.
* ``nvidia-modprobe`` at each driver version: a script that checks the device nodes the real tool
  would create (Docker gives the sandbox its nodes) and sets their mode 0666.
* ``linux-headers-<kernel>`` for the running kernel (``--kernel``, default ``uname -r``): a container
  runs the host's kernel, whose headers no distribution mirror carries; and the metapackages
  ``linux-image-<arch>`` and ``linux-headers-<arch>`` (epoch 100, so apt prefers them to Debian's).

They install no files but a README, except the persistence daemon's (a ``nvidia-persistenced``
script that only sleeps and its systemd unit, shaped like the real one) and ``nvidia-modprobe``. Nothing is installed at
``/usr/bin/nvidia-smi``: the sandbox's fake ``nvidia-smi`` stays in place.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

DEBIAN_VERSIONS = ("580.95.05", "580.105.08", "590.44.01")
UBUNTU_VERSIONS = ("580.95.05", "580.105.08")
DISTROS = {"debian12": "debian", "ubuntu2204": "ubuntu", "ubuntu2404": "ubuntu"}
KEY_NAME = "sglang-sim-archive-key.asc"
KEY_UID = "sglang-deploy sandbox repository (throwaway test key) <sandbox@sglang-deploy.invalid>"

PERSISTENCED_SCRIPT = """#!/bin/bash
# Dummy nvidia-persistenced (sglang-deploy sandbox): forks a process that sleeps, like the daemon.
(exec -a nvidia-persistenced sleep infinity) </dev/null >/dev/null 2>&1 &
exit 0
"""
PERSISTENCED_UNIT = """[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""

NVIDIA_MODPROBE_SCRIPT = """#!/usr/bin/python3
# Dummy nvidia-modprobe (sglang-deploy sandbox). The real one (setuid root) loads the NVIDIA modules
# and creates their device nodes: -c N -> /dev/nvidiaN (195:N; N=255: /dev/nvidiactl), -u -c 0 ->
# /dev/nvidia-uvm and /dev/nvidia-uvm-tools, mode 0666. A container cannot load modules: the sandbox's
# nodes are given to it by Docker (--device), so this checks that each node exists and sets the mode
# the real tool sets.
import os, stat, sys

def node(path):
    try:
        st = os.stat(path)
    except OSError:
        sys.stderr.write("nvidia-modprobe: %s does not exist (the sandbox host was created without it)\\n" % path)
        sys.exit(1)
    if not stat.S_ISCHR(st.st_mode):
        sys.stderr.write("nvidia-modprobe: %s is not a character device\\n" % path)
        sys.exit(1)
    os.chmod(path, 0o666)

args, uvm, minors = sys.argv[1:], False, []
while args:
    arg = args.pop(0)
    if arg in ("-u", "--unified-memory"):
        uvm = True
    elif arg in ("-c", "--create-nvidia-device-file") and args:
        minors.append(int(args.pop(0)))
    elif arg.startswith(("-c=", "--create-nvidia-device-file=")):
        minors.append(int(arg.split("=", 1)[1]))
    elif arg.startswith("-c") and arg[2:].isdigit():
        minors.append(int(arg[2:]))
if uvm:
    if minors:
        node("/dev/nvidia-uvm")
        node("/dev/nvidia-uvm-tools")
else:
    for minor in minors:
        node("/dev/nvidiactl" if minor == 255 else "/dev/nvidia%d" % minor)
"""
# Dummy nvcc (the CUDA compiler driver): `--version` prints what nvcc 13.0.88 prints; a -gencode/-arch target it
# does not know fails as nvcc 13.0.88 fails (tests/fixtures/cuda-toolchain/nvcc-13.0.88-gencode.json); compiling
# a .cu file checks that the toolkit's CUDA headers are installed and has the host C++ compiler (which the real
# nvcc drives) compile it as host code, with the -I, -D, -std and -Xcompiler flags given, into a real object.
NVCC_SCRIPT = """#!/usr/bin/python3
import os, re, shutil, subprocess, sys

HOME = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
VERSION = (
    "nvcc: NVIDIA (R) Cuda compiler driver\\n"
    "Copyright (c) 2005-2025 NVIDIA Corporation\\n"
    "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\\n"
    "Cuda compilation tools, release {release}, V{version}\\n"
    "Build cuda_{release}.r{release}/compiler.36424714_0\\n"
)
# nvcc 13.0.88's targets (--list-gpu-arch), with "a" from 9.0 and "f" from 10.0 on.
BASES = {"75", "80", "86", "87", "88", "89", "90", "100", "103", "110", "120", "121"}


def known(target):
    match = re.fullmatch(r"(?:compute|sm)_([0-9]+)([af]?)", target)
    if not match or match.group(1) not in BASES:
        return False
    return match.group(2) == "" or int(match.group(1)) >= (90 if match.group(2) == "a" else 100)


args = sys.argv[1:]
if "--version" in args or "-V" in args:
    sys.stdout.write(VERSION)
    sys.exit(0)
for arg in args:
    given = arg.startswith(("-gencode", "-arch", "--gpu-arch"))
    for target in re.findall(r"(?:compute|sm)_[0-9a-z]+", arg) if given else []:
        if not known(target):
            name = target.replace("sm_", "compute_")
            sys.stderr.write("nvcc fatal   : Unsupported gpu architecture '" + name + "'\\n")
            sys.exit(1)
header = os.path.join(HOME, "include", "cuda_runtime.h")
if not os.path.isfile(header):
    sys.stderr.write("nvcc fatal   : cuda_runtime.h: No such file or directory (package cuda-cudart-dev)\\n")
    sys.exit(1)
cxx = os.environ.get("CXX") or "c++"
if shutil.which(cxx) is None:
    sys.stderr.write("sh: 1: " + cxx + ": not found\\nnvcc fatal   : Failed to preprocess host compiler properties.\\n")
    sys.exit(1)
host, sources, out, index = [], [], "a.out", 0
while index < len(args):
    arg = args[index]
    if arg in ("-o", "-MF", "-Xcompiler") and index + 1 < len(args):
        value = args[index + 1]
        if arg == "-o":
            out = value
        else:
            host += ["-MF", value] if arg == "-MF" else value.split(",")
        index += 2
        continue
    if arg.endswith(".cu"):
        sources.append(arg)
    elif arg.startswith(("-I", "-D", "-std=", "-O", "-MD")):
        host.append(arg)
    index += 1
for source in sources:
    proc = subprocess.run([cxx, "-x", "c++", "-D__global__=", "-D__device__=", "-D__host__=",
                           "-I", os.path.join(HOME, "include"), *host, "-c", source, "-o", out])
    if proc.returncode:
        sys.exit(proc.returncode)
if not sources:
    open(out, "wb").close()
"""
# The runtime header, with the one runtime call the probe's module makes defined inline: no GPU, no libcudart.
CUDA_RUNTIME_H = ("/* Dummy CUDA runtime header (sglang-deploy sandbox). */\n#pragma once\n"
                  "/* cudaErrorNoDevice */\n"
                  "static inline int cudaGetDeviceCount(int *count) { *count = 0; return 100; }\n")
CURAND_H = "/* Dummy curand header (sglang-deploy sandbox). */\n#pragma once\n"
# libcudart.so, the link-time name the -dev package adds: a GNU ld script here, which -lcudart finds as the
# real symlink is found.
LIBCUDART_SO = ("/* Dummy libcudart.so (sglang-deploy sandbox): the runtime is in cuda_runtime.h. */\n"
                "INPUT(AS_NEEDED(-lc))\n")
# CUDA toolkit components of the 13.0 Update 2 set, as roles/sglang_stack pins them.
CUDA_PACKAGES = (("cuda-nvcc-13-0", "13.0.88-1"), ("cuda-crt-13-0", "13.0.88-1"), ("libnvvm-13-0", "13.0.88-1"),
                 ("libnvptxcompiler-13-0", "13.0.88-1"), ("cuda-cudart-13-0", "13.0.96-1"),
                 ("cuda-cudart-dev-13-0", "13.0.96-1"), ("cuda-driver-dev-13-0", "13.0.96-1"),
                 ("cuda-cccl-13-0", "13.0.85-1"), ("libcurand-dev-13-0", "10.4.0.35-1"))

# Kernel metapackages: a high epoch so that apt prefers them to Debian's real ones (which would pull
# a real kernel's headers and a compiler into every sandbox host).
KERNEL_META_VERSION = "100:1.0"


@dataclass
class Package:
    name: str
    version: str
    depends: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # path -> (content, mode)
    description: str = "NVIDIA driver component"


def debian_packages(version: str) -> list[Package]:
    full = f"{version}-1"
    exact = f"(= {full})"
    return [
        Package("nvidia-driver-cuda", full,
                [f"libcuda1 {exact}", f"libnvidia-ml1 {exact}", f"nvidia-persistenced {exact}"],
                description="NVIDIA driver CUDA integration components (compute only)"),
        Package("nvidia-kernel-open-dkms", full,
                [f"nvidia-kernel-support {exact}", f"firmware-nvidia-gsp {exact}"], ["nvidia-kernel-dkms"],
                description="NVIDIA open GPU kernel module (DKMS source)"),
        Package("libcuda1", full, description="NVIDIA CUDA driver library"),
        Package("libnvidia-ml1", full, description="NVIDIA Management Library (NVML) runtime library"),
        Package("nvidia-kernel-support", full, description="NVIDIA binary kernel module support files"),
        Package("firmware-nvidia-gsp", full, description="NVIDIA GSP firmware"),
        Package("nvidia-persistenced", full, files=persistenced_files(), description="NVIDIA persistence daemon"),
        nvidia_modprobe(full),
    ]


def ubuntu_packages(version: str) -> list[Package]:
    branch = version.split(".", maxsplit=1)[0]
    full = f"{version}-0ubuntu1"
    exact = f"(= {full})"
    firmware = f"nvidia-firmware-{branch}-{version}"
    return [
        Package(f"libnvidia-compute-{branch}", full, description="NVIDIA libcompute package"),
        Package(f"nvidia-utils-{branch}", full, [f"libnvidia-compute-{branch} {exact}"],
                description="NVIDIA driver support binaries"),
        Package(f"nvidia-compute-utils-{branch}", full, [f"libnvidia-compute-{branch} {exact}"],
                ["nvidia-persistenced"], persistenced_files(), "NVIDIA compute utilities (nvidia-persistenced)"),
        Package(f"nvidia-dkms-{branch}-open", full,
                [f"nvidia-kernel-common-{branch} {exact}", f"nvidia-kernel-source-{branch}-open {exact}", firmware],
                description="NVIDIA DKMS package (open kernel module)"),
        Package(f"nvidia-kernel-common-{branch}", full, description="Shared files used with the kernel module"),
        Package(f"nvidia-kernel-source-{branch}-open", full, description="NVIDIA kernel source package"),
        Package(firmware, full, description="Firmware files used by the kernel module"),
        nvidia_modprobe(full),
    ]


def nvidia_modprobe(version: str) -> Package:
    return Package("nvidia-modprobe", version, files={"usr/bin/nvidia-modprobe": (NVIDIA_MODPROBE_SCRIPT, 0o755)},
                   description="utility to load NVIDIA kernel modules and create device nodes")


def persistenced_files() -> dict[str, tuple[str, int]]:
    return {"usr/bin/nvidia-persistenced": (PERSISTENCED_SCRIPT, 0o755),
            "lib/systemd/system/nvidia-persistenced.service": (PERSISTENCED_UNIT, 0o644)}


def cuda_packages() -> list[Package]:
    """The CUDA 13.0 toolkit pieces the JIT builds use: a dummy nvcc, the runtime header and link name, curand's
    headers."""
    home = "usr/local/cuda-13.0"
    nvcc = NVCC_SCRIPT.replace("{release}", "13.0").replace("{version}", "13.0.88")
    files = {"cuda-nvcc-13-0": {f"{home}/bin/nvcc": (nvcc, 0o755)},
             "cuda-cudart-dev-13-0": {f"{home}/include/cuda_runtime.h": (CUDA_RUNTIME_H, 0o644),
                                      f"{home}/lib64/libcudart.so": (LIBCUDART_SO, 0o644)},
             "libcurand-dev-13-0": {f"{home}/include/{name}": (CURAND_H, 0o644)
                                    for name in ("curand.h", "curand_kernel.h")}}
    return [Package(name, version, files=files.get(name, {}), description=f"CUDA 13.0 component {name}")
            for name, version in CUDA_PACKAGES]


def kernel_packages(kernel: str, arch: str) -> list[Package]:
    """Headers of the running kernel (a container runs the host's kernel, whose headers no mirror carries),
    and the kernel and headers metapackages of the architecture (linux-image-amd64, linux-headers-amd64)."""
    return [Package(f"linux-headers-{kernel}", "1.0", description=f"Header files for Linux {kernel} (dummy)"),
            Package(f"linux-image-{arch}", KERNEL_META_VERSION, description=f"Linux for {arch} (metapackage)"),
            Package(f"linux-headers-{arch}", KERNEL_META_VERSION, [f"linux-headers-{kernel}"],
                    description=f"Header files for Linux {arch} configuration (metapackage)")]


def run(argv: list[str], **kwargs: object) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def control(pkg: Package, arch: str) -> str:
    lines = [f"Package: {pkg.name}", f"Version: {pkg.version}", f"Architecture: {arch}",
             "Maintainer: sglang-deploy sandbox <sandbox@sglang-deploy.invalid>", "Section: non-free/libs",
             "Priority: optional"]
    if pkg.depends:
        lines.append("Depends: " + ", ".join(pkg.depends))
    if pkg.conflicts:
        lines.append("Conflicts: " + ", ".join(pkg.conflicts))
    lines += [f"Description: {pkg.description} (sglang-deploy dummy)",
              " Test double with NVIDIA's package name and version; installs no driver."]
    return "\n".join(lines) + "\n"


def build_deb(pkg: Package, arch: str, pool: str, work: str) -> str:
    root = os.path.join(work, f"{pkg.name}_{pkg.version}")
    os.makedirs(os.path.join(root, "DEBIAN"))
    with open(os.path.join(root, "DEBIAN", "control"), "w", encoding="utf-8") as handle:
        handle.write(control(pkg, arch))
    files = {f"usr/share/doc/{pkg.name}/README.sglang-deploy": ("Dummy package for sglang-deploy tests.\n", 0o644),
             **pkg.files}
    for rel, (content, mode) in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(path, mode)
    deb = os.path.join(pool, f"{pkg.name}_{pkg.version.split(':')[-1]}_{arch}.deb")  # no epoch in file names
    run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, deb])
    return deb


def digests(path: str) -> dict[str, str]:
    with open(path, "rb") as handle:
        data = handle.read()
    return {"MD5sum": hashlib.md5(data).hexdigest(), "SHA1": hashlib.sha1(data).hexdigest(),
            "SHA256": hashlib.sha256(data).hexdigest(), "Size": str(len(data))}


def packages_index(repo: str, debs: list[tuple[Package, str]], arch: str) -> None:
    stanzas = []
    for pkg, deb in debs:
        info = digests(deb)
        stanzas.append(control(pkg, arch).rstrip("\n").replace(
            "\nMaintainer:", f"\nFilename: ./{os.path.relpath(deb, repo)}\nSize: {info['Size']}\n"
            f"MD5sum: {info['MD5sum']}\nSHA1: {info['SHA1']}\nSHA256: {info['SHA256']}\nMaintainer:", 1))
    text = "\n\n".join(stanzas) + "\n"
    with open(os.path.join(repo, "Packages"), "w", encoding="utf-8") as handle:
        handle.write(text)
    with gzip.GzipFile(os.path.join(repo, "Packages.gz"), "wb", mtime=0) as handle:
        handle.write(text.encode())


def release_file(repo: str, arch: str) -> None:
    entries = {name: digests(os.path.join(repo, name)) for name in ("Packages", "Packages.gz")}
    lines = ["Origin: sglang-deploy", "Label: sglang-deploy dummy NVIDIA CUDA repository",
             f"Architectures: {arch}",
             "Date: " + time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()),
             "Description: dummy NVIDIA driver packages for sandbox and Molecule hosts"]
    for field_name, key in (("MD5Sum", "MD5sum"), ("SHA1", "SHA1"), ("SHA256", "SHA256")):
        lines.append(f"{field_name}:")
        lines += [f" {info[key]} {int(info['Size']):>8} {name}" for name, info in entries.items()]
    with open(os.path.join(repo, "Release"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


def make_key(gnupg: str) -> str:
    os.makedirs(gnupg, mode=0o700, exist_ok=True)
    env = dict(os.environ, GNUPGHOME=gnupg)
    run(["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key", KEY_UID,
         "ed25519", "sign", "never"], env=env)
    for line in run(["gpg", "--batch", "--with-colons", "--list-keys"], env=env).splitlines():
        if line.startswith("fpr:"):
            return line.split(":")[9]
    raise SystemExit("gpg created no key")


def sign(repo: str, gnupg: str, fingerprint: str) -> None:
    env = dict(os.environ, GNUPGHOME=gnupg)
    release = os.path.join(repo, "Release")
    base = ["gpg", "--batch", "--yes", "--pinentry-mode", "loopback", "--passphrase", "", "--local-user", fingerprint]
    run([*base, "--clearsign", "--output", os.path.join(repo, "InRelease"), release], env=env)
    run([*base, "--armor", "--detach-sign", "--output", os.path.join(repo, "Release.gpg"), release], env=env)
    with open(os.path.join(repo, KEY_NAME), "w", encoding="utf-8") as handle:
        handle.write(run(["gpg", "--batch", "--armor", "--export", fingerprint], env=env))


def build(out: str, kernel: str) -> str:
    arch = run(["dpkg", "--print-architecture"]).strip()
    repo_arch = {"amd64": "x86_64", "arm64": "sbsa"}.get(arch, arch)
    gnupg = os.path.join(out, "gnupg")
    fingerprint = make_key(gnupg)
    with tempfile.TemporaryDirectory() as work:
        for distro, family in DISTROS.items():
            repo = os.path.join(out, "repo", "compute", "cuda", "repos", distro, repo_arch)
            pool = os.path.join(repo, "pool")
            os.makedirs(pool, exist_ok=True)
            pkgs = kernel_packages(kernel, arch) + cuda_packages()
            for version in DEBIAN_VERSIONS if family == "debian" else UBUNTU_VERSIONS:
                pkgs += debian_packages(version) if family == "debian" else ubuntu_packages(version)
            debs = [(pkg, build_deb(pkg, arch, pool, os.path.join(work, distro))) for pkg in pkgs]
            packages_index(repo, debs, arch)
            release_file(repo, arch)
            sign(repo, gnupg, fingerprint)
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=dict(os.environ, GNUPGHOME=gnupg), check=False)
    with open(os.path.join(out, "fingerprint"), "w", encoding="utf-8") as handle:
        handle.write(fingerprint + "\n")
    return fingerprint


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--kernel", default=os.uname().release)
    args = parser.parse_args(argv)
    if os.path.exists(os.path.join(args.out, "fingerprint")):
        print(f"{args.out}: already built")
        return 0
    shutil.rmtree(args.out, ignore_errors=True)  # a half-built tree from an interrupted run
    fingerprint = build(args.out, args.kernel)
    print(f"built {args.out} (signing key {fingerprint})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
