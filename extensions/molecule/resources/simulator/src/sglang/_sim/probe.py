"""The simulator's answer to the deploy's pre-restart probe (entry point ``sglang_deploy.probe``).

On a real host the probe asks torch: CUDA initialises and allocates on every GPU, a Triton kernel
compiles and runs, NCCL all-reduces across the ranks. In the sandbox there is no GPU, so this
backend answers instead: the GPU part opens the device nodes exactly as the server does at start
(``devices``), so the unit's device policy decides here as it would for CUDA; Triton and NCCL need
a GPU and are reported as answered by the simulator.
"""

from __future__ import annotations

import errno

from sglang._sim import devices
from sglang.version import __version__


class Backend:
    accept_errnos = (errno.ENXIO,)  # the sandbox's nodes have no driver behind them

    def __init__(self) -> None:
        self.name = f"the SGLang simulator {__version__} (no GPU in the sandbox)"

    def gpus(self, count: int, alloc_mib: int) -> tuple[bool, str]:
        found = devices.problems(range(count))
        if found:
            return False, "No CUDA GPUs are available: " + "; ".join(found)
        return True, f"{count} GPU(s) reachable through their device nodes ({alloc_mib} MiB not allocated: no GPU)"

    def triton(self, work: str) -> tuple[bool, str]:
        return True, ("answered by the simulator: no GPU to run a Triton kernel on; the C helper Triton builds at run "
                      "time was compiled in the toolchain check")

    def nccl(self, ranks: int, timeout: float, work: str) -> tuple[bool, str]:
        return True, f"answered by the simulator: {ranks} ranks, no NCCL without GPUs"
