"""roles/nvidia_driver/files/nvidia-device-nodes: the boot-time script that creates the NVIDIA device
nodes and loads nvidia-uvm, run here against a copy of /proc/driver/nvidia and a recording
nvidia-modprobe (the real one needs the driver and root)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT

SCRIPT = ROOT / "roles" / "nvidia_driver" / "files" / "nvidia-device-nodes"
INFORMATION = (ROOT / "tests" / "fixtures" / "real-host" / "proc-driver-nvidia-gpu-information.txt").read_text()

# Records its arguments and makes the nodes the real tool makes, as character devices (1:3, a /dev/null:
# nothing can reach a GPU through them; mknod needs root, as the CI and the real tool have).
FAKE_MODPROBE = """#!/bin/sh
echo "$*" >> "$LOG"
[ -n "${FAIL_ON:-}" ] && [ "$*" = "$FAIL_ON" ] && exit 1
uvm=0
node() { [ -e "$DEV/$1" ] || mknod "$DEV/$1" c 1 3; }
while [ $# -gt 0 ]; do
  case "$1" in
    -u) uvm=1 ;;
    -c) shift; if [ "$uvm" = 1 ]; then node nvidia-uvm; node nvidia-uvm-tools;
        elif [ "$1" = 255 ]; then node nvidiactl; else node "nvidia$1"; fi ;;
  esac
  shift
done
"""


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("proc", "dev")}
    for path in paths.values():
        path.mkdir()
    (paths["proc"] / "gpus").mkdir()
    modprobe = tmp_path / "nvidia-modprobe"
    modprobe.write_text(FAKE_MODPROBE)
    modprobe.chmod(0o755)
    paths["modprobe"], paths["log"] = modprobe, tmp_path / "log"
    return paths


def gpu(host: dict[str, Path], bus: str, minor: int | None) -> None:
    directory = host["proc"] / "gpus" / bus
    directory.mkdir()
    text = INFORMATION.replace("Bus Location: \t 0000:01:00.0", f"Bus Location: \t {bus}")
    text = text.replace("Device Minor: \t 0\n", f"Device Minor: \t {minor}\n" if minor is not None else "")
    (directory / "information").write_text(text)


def run(host: dict[str, Path], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT)], capture_output=True, text=True, check=False,
                          env={**os.environ, "NVIDIA_PROC_DIR": str(host["proc"]), "NVIDIA_DEV_DIR": str(host["dev"]),
                               "NVIDIA_MODPROBE": str(host["modprobe"]), "DEV": str(host["dev"]),
                               "LOG": str(host["log"]), **env})


def test_creates_a_node_per_gpu_minor_then_loads_uvm(host: dict[str, Path]) -> None:
    for minor, bus in enumerate(["0000:01:00.0", "0000:02:00.0", "0000:81:00.0"]):
        gpu(host, bus, [0, 1, 4][minor])  # minors need not be 0..N-1: they come from the driver
    proc = run(host)
    assert proc.returncode == 0, proc.stderr
    assert host["log"].read_text().splitlines() == ["-c 255", "-c 0 -c 1 -c 4", "-u -c 0"]
    assert sorted(p.name for p in host["dev"].iterdir()) == [
        "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1", "nvidia4", "nvidiactl"]
    assert "3 GPU node(s) (minors: 0 1 4)" in proc.stdout


def test_fails_without_the_driver(host: dict[str, Path]) -> None:
    (host["proc"] / "gpus").rmdir()
    proc = run(host)
    assert proc.returncode == 1 and "gpus does not exist: the nvidia module is not loaded" in proc.stderr


def test_fails_when_the_driver_lists_no_gpu_or_no_minor(host: dict[str, Path]) -> None:
    proc = run(host)
    assert proc.returncode == 1 and "the driver lists no GPU" in proc.stderr
    gpu(host, "0000:01:00.0", None)
    proc = run(host)
    assert proc.returncode == 1 and "no 'Device Minor:' line" in proc.stderr


def test_fails_when_nvidia_uvm_does_not_load(host: dict[str, Path]) -> None:
    gpu(host, "0000:01:00.0", 0)
    proc = run(host, FAIL_ON="-u -c 0")
    assert proc.returncode == 1 and "nvidia-modprobe -u -c 0 (nvidia-uvm) failed" in proc.stderr


def test_a_node_that_is_not_a_character_device_fails(host: dict[str, Path]) -> None:
    gpu(host, "0000:01:00.0", 0)
    (host["dev"] / "nvidia0").write_text("")  # a regular file where the node should be
    proc = run(host)
    assert proc.returncode == 1 and "nvidia0 is not a character device after nvidia-modprobe" in proc.stderr


def test_the_script_is_executable_and_posix_sh() -> None:
    assert SCRIPT.stat().st_mode & stat.S_IXUSR
    assert SCRIPT.read_text().startswith("#!/bin/sh\n")
    subprocess.run(["sh", "-n", str(SCRIPT)], check=True)
