"""The GPU device nodes, opened the way the CUDA runtime opens them.

With SGLANG_SIM_GPU_DEVICES=1 every TP rank opens /dev/nvidiactl, /dev/nvidia-uvm and its GPU's
/dev/nvidia<N> read-write at start, as CUDA does when a scheduler initialises its device. The
sandbox's nodes have no driver behind them, so an open that the unit's device policy allows fails
with ENXIO, which counts as reachable; one the policy denies fails with EPERM (from the cgroup's
device filter), and a missing node with ENOENT: the server then dies as torch does when CUDA finds
no usable device. The probe's CUDA answer (``sglang._sim.probe``) uses the same check.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable

CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm")
# No driver behind the sandbox's nodes: the kernel answers ENXIO once the device policy let the open through.
REACHABLE = (errno.ENXIO,)
WHY = {errno.EPERM: "denied by the device policy (cgroup device filter)", errno.ENOENT: "does not exist",
       errno.EACCES: "permission denied"}


def nodes(gpus: Iterable[int]) -> list[str]:
    return [*CONTROL_NODES, *(f"/dev/nvidia{index}" for index in gpus)]


def problems(gpus: Iterable[int]) -> list[str]:
    """One line per node that the CUDA runtime could not open read-write."""
    found = []
    for node in nodes(gpus):
        try:
            os.close(os.open(node, os.O_RDWR))
        except OSError as error:
            if error.errno not in REACHABLE:
                found.append(f"{node}: {WHY.get(error.errno, error.strerror)}")
    return found
