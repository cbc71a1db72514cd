"""Fault injection from SGLANG_SIM_FAULT: crash or hang during the load, failed warm-up, later crash."""

from __future__ import annotations

import errno
import json
import subprocess
import time
from pathlib import Path

import pytest
from helpers import wait_for
from sim_helpers import LaunchFn, alive, children_of, free_port, get_status, port_open, server_args, shards_drawn

CUDA_ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_crash_at_percent_prints_a_traceback_and_exits_1(launch: LaunchFn, model_dir: Path) -> None:
    port = free_port()
    server = launch(server_args(model_dir, port, tp=4), SGLANG_SIM_FAULT="crash_at=50")
    children = wait_for(lambda: len(children_of(server.pid)) == 5 and children_of(server.pid), 10, what="children")
    assert server.wait_exit() == 1
    log = server.stderr
    # The crash comes before shard 33; which counts the bar drew depends on time (tqdm draws every 0.1 s at most).
    assert 0 <= shards_drawn(log) <= 32
    assert "TP0] Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "sglang/srt/model_loader/loader.py" in log
    assert CUDA_ERROR in log
    assert "Received sigquit from a child process. It usually means the child failed." in log
    assert "Load weight end" not in log
    assert not port_open(port)
    wait_for(lambda: not any(alive(pid) for pid in children), 5, what="children gone")


def test_exit_code_fault(launch: LaunchFn, model_dir: Path) -> None:
    server = launch(server_args(model_dir, free_port(), tp=1), SGLANG_SIM_FAULT="crash_at=0,exit_code=3")
    assert server.wait_exit() == 3
    assert CUDA_ERROR in server.stderr


def test_hang_at_percent_stops_progress_but_keeps_running(launch: LaunchFn, model_dir: Path) -> None:
    port = free_port()
    server = launch(server_args(model_dir, port, tp=2), SGLANG_SIM_FAULT="hang_at=25")
    wait_for(lambda: shards_drawn(server.stderr) >= 1, 10, what="the first shards")
    time.sleep(1.5)  # longer than the whole 1 s load
    assert server.running()
    assert 1 <= shards_drawn(server.stderr) <= 16
    assert "Load weight end" not in server.stderr
    assert not port_open(port)
    assert len(children_of(server.pid)) == 3


def test_hold_load_holds_the_weights_until_its_file_exists(launch: LaunchFn, model_dir: Path, tmp_path: Path) -> None:
    """A drill's "still loading" on cue: the load waits at its first shard (port closed) until the file appears."""
    release = tmp_path / "release"
    port = free_port()
    server = launch(server_args(model_dir, port, tp=1), SGLANG_SIM_FAULT=f"hold_load={release}")
    wait_for(lambda: "Load weight begin" in server.stderr, 10, what="the weights' load")
    assert server.running() and not port_open(port) and "Load weight end" not in server.stderr
    release.touch()
    server.wait_ready()
    assert "Load weight end" in server.stderr and port_open(port)


def test_fail_warmup_exits_after_the_port_opened(launch: LaunchFn, model_dir: Path) -> None:
    port = free_port()
    server = launch(server_args(model_dir, port, tp=1), SGLANG_SIM_FAULT="fail_warmup", SGLANG_SIM_WARMUP_SECONDS="1")
    wait_for(lambda: port_open(port), 10, what="port open")
    assert get_status(port) == 503
    assert server.wait_exit() == 1
    assert "Initialization failed. warmup error: Traceback (most recent call last):" in server.stderr
    assert "AssertionError: <Response [500]>" in server.stderr
    assert "ready to roll" not in server.stderr


def test_crash_after_ready(launch: LaunchFn, model_dir: Path) -> None:
    server = launch(server_args(model_dir, free_port(), tp=1), SGLANG_SIM_FAULT="crash_after_ready=0.5")
    server.wait_ready()
    ready_at = time.monotonic()
    assert server.wait_exit() == 1
    assert time.monotonic() - ready_at >= 0.3
    assert CUDA_ERROR in server.stderr.split("ready to roll!")[1]


@pytest.mark.parametrize("spec", ["explode", "hold_load=relative/path"])
def test_bad_fault_spec_is_refused(launch: LaunchFn, model_dir: Path, spec: str) -> None:
    server = launch(server_args(model_dir, free_port(), tp=1), SGLANG_SIM_FAULT=spec)
    assert server.wait_exit() == 1
    assert f"SGLANG_SIM_FAULT: cannot use {spec!r}" in server.stderr


def test_gpu_devices_that_cannot_be_opened_end_the_start_like_torch(launch: LaunchFn, model_dir: Path) -> None:
    """SGLANG_SIM_GPU_DEVICES=1: every rank opens its GPU's nodes as CUDA does. This machine has no
    /dev/nvidiactl (the sandbox hosts get theirs from Docker), so the start ends as torch ends it."""
    assert not Path("/dev/nvidiactl").exists()
    server = launch(server_args(model_dir, free_port(), tp=2), SGLANG_SIM_GPU_DEVICES="1")
    assert server.wait_exit() == 1
    log = server.stderr
    assert "(simulator) CUDA cannot open: /dev/nvidiactl: does not exist" in log
    assert "TP1] Scheduler hit an exception: Traceback" in log and "RuntimeError: No CUDA GPUs are available" in log
    assert "Load weight begin" not in log


PROBE_BACKEND = """
import errno, json, os
from importlib.metadata import entry_points
from sglang._sim import devices

def fake_open(path, flags):
    code = errno.EPERM if path == "/dev/nvidia1" else errno.ENXIO
    raise OSError(code, os.strerror(code), path)

devices.os.open = fake_open
backend = next(e for e in entry_points(group="sglang_deploy.probe") if e.name == "cuda").load()()
print(json.dumps([backend.accept_errnos, backend.gpus(1, 64), backend.gpus(2, 64), backend.nccl(8, 60, "/tmp")]))
"""


def test_the_probe_backend_opens_the_nodes_the_server_opens(sim_python: Path) -> None:
    """The wheel declares the probe's CUDA answer (entry point sglang_deploy.probe): ENXIO, a sandbox node
    with no driver behind it, is reachable; EPERM, the device policy, is not."""
    out = subprocess.run([str(sim_python), "-c", PROBE_BACKEND], capture_output=True, text=True, check=True).stdout
    accept, one, two, nccl = json.loads(out)
    assert accept == [errno.ENXIO] and one[0] is True
    assert two == [False, "No CUDA GPUs are available: /dev/nvidia1: denied by the device policy (cgroup device "
                          "filter)"]
    assert nccl[0] is True and "answered by the simulator" in nccl[1]
