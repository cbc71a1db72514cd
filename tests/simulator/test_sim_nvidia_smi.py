"""The fake nvidia-smi: default 8 GPUs, CSV queries formatted like the real tool, compute apps, failures."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sim_helpers import NVIDIA_SMI, NVIDIA_SMI_PY

UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def smi(*args: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, FAKE_NVIDIA_SMI_CONFIG=str(config or "/nonexistent/nvidia-smi.json"))
    return subprocess.run([sys.executable, str(NVIDIA_SMI_PY), *args], capture_output=True, text=True, env=env,
                          check=False)


@pytest.fixture
def with_app(tmp_path: Path) -> Path:
    gpus = [{"uuid": f"GPU-0000000{i}-0000-0000-0000-000000000000"} for i in range(2)]
    config = {"driver_version": "580.95.05", "cuda_version": "13.0", "gpus": gpus,
              "compute_apps": [{"pid": 1234, "gpu_uuid": gpus[1]["uuid"], "used_memory_mib": 1000,
                                "process_name": "python3"}]}
    path = tmp_path / "nvidia-smi.json"
    path.write_text(json.dumps(config))
    return path


def test_command_is_a_sh_wrapper_running_the_python_next_to_it(tmp_path: Path) -> None:
    # Hosts have python3 but no `python`; the sandbox installs both files side by side in /usr/bin.
    assert os.access(NVIDIA_SMI, os.X_OK)
    assert NVIDIA_SMI.read_text().startswith("#!/bin/sh\n")
    assert not NVIDIA_SMI_PY.read_text().startswith("#!")
    for path in (NVIDIA_SMI, NVIDIA_SMI_PY):
        shutil.copy(path, tmp_path / path.name)
    env = dict(os.environ, FAKE_NVIDIA_SMI_CONFIG="/nonexistent/nvidia-smi.json")
    done = subprocess.run([str(tmp_path / "nvidia-smi"), "--query-gpu=index", "--format=csv,noheader"],
                          capture_output=True, text=True, env=env, check=False)
    assert (done.returncode, done.stdout) == (0, "".join(f"{index}\n" for index in range(8)))
    done = subprocess.run([str(tmp_path / "nvidia-smi"), "--bogus"], capture_output=True, text=True, env=env,
                          check=False)
    assert done.returncode == 2 and "Invalid combination" in done.stdout


def test_default_is_eight_rtx_pro_6000() -> None:
    done = smi("--query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,memory.used,memory.free,"
               "compute_cap,persistence_mode,count", "--format=csv")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == ("index, name, uuid, pci.bus_id, driver_version, memory.total [MiB], memory.used [MiB], "
                        "memory.free [MiB], compute_cap, persistence_mode, count")
    assert len(lines) == 9
    fields = lines[1].split(", ")
    assert fields[0] == "0"
    assert fields[1] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert UUID.match(fields[2])
    assert fields[3:] == ["00000000:01:00.0", "580.95.05", "97887 MiB", "0 MiB", "97887 MiB", "12.0", "Enabled", "8"]
    assert len({line.split(", ")[2] for line in lines[1:]}) == 8
    assert smi("--query-gpu=uuid", "--format=csv,noheader").stdout == "".join(
        line.split(", ")[2] + "\n" for line in lines[1:])


def test_the_default_uuids_written_out_are_the_derived_ones(tmp_path: Path) -> None:
    """The eight default UUIDs are written out (no hashlib import per call); a ninth GPU still gets the derived one,
    so the stamps that hash nvidia-smi's answer stay what they were."""
    import hashlib

    def derived(index: int) -> str:
        digest = hashlib.sha256(f"sglang-deploy fake GPU {index}".encode()).hexdigest()
        return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"

    assert smi("--query-gpu=uuid", "--format=csv,noheader").stdout.split() == [derived(i) for i in range(8)]
    config = tmp_path / "nine.json"
    config.write_text(json.dumps({"gpus": [{}] * 9}))
    assert smi("--query-gpu=uuid", "--format=csv,noheader", config=config).stdout.split() == [
        derived(i) for i in range(9)]


def test_noheader_nounits_and_id_filter() -> None:
    done = smi("--query-gpu=index,memory.total,compute_cap", "--format=csv,noheader,nounits", "-i", "3")
    assert done.stdout == "3, 97887, 12.0\n"


def test_list_gpus() -> None:
    lines = smi("-L").stdout.splitlines()
    assert len(lines) == 8
    assert re.fullmatch(r"GPU 7: NVIDIA RTX PRO 6000 Blackwell Server Edition \(UUID: GPU-[0-9a-f-]{36}\)", lines[7])


def test_compute_apps_and_their_memory(with_app: Path) -> None:
    done = smi("--query-compute-apps=pid,gpu_uuid,used_memory,process_name,name", "--format=csv", config=with_app)
    assert done.stdout.splitlines() == [
        "pid, gpu_uuid, used_gpu_memory [MiB], process_name, process_name",
        "1234, GPU-00000001-0000-0000-0000-000000000000, 1000 MiB, python3, python3",
    ]
    used = smi("--query-gpu=memory.used,memory.free", "--format=csv,noheader,nounits", config=with_app)
    assert used.stdout.splitlines() == ["0, 97887", "1000, 96887"]
    assert smi("--query-compute-apps=pid", "--format=csv,noheader").stdout == ""


def test_table_view(with_app: Path) -> None:
    out = smi(config=with_app).stdout
    assert "NVIDIA-SMI 580.95.05" in out
    assert "CUDA Version: 13.0" in out
    assert "1000MiB /  97887MiB" in out
    assert "python3" in out
    assert "No running processes found" in smi().stdout


def test_driver_not_loaded(tmp_path: Path) -> None:
    config = tmp_path / "smi.json"
    config.write_text(json.dumps({"driver_loaded": False}))
    done = smi("-L", config=config)
    assert done.returncode == 9
    assert done.stdout.startswith("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "Invalid combination of input arguments."),
        (["--query-gpu=name"], '"--format=" must be specified'),
        (["--query-gpu=nonsense", "--format=csv"], 'Field "nonsense" is not a valid field to query.'),
        (["--query-gpu=name", "--format=json"], '"json" is not a valid format.'),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    done = smi(*args)
    assert done.returncode == 2
    assert message in done.stdout


def test_version_and_help() -> None:
    assert "DRIVER version      : 580.95.05" in smi("--version").stdout
    assert smi("-h").stdout.startswith("NVIDIA System Management Interface")
