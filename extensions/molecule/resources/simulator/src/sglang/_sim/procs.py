"""Child processes named like SGLang's, and the process-level exits of the main process.

A child is ``python -c <bootstrap> <title> <parent pid>`` with the venv's own interpreter (so it
finds its standard library), which then renames itself like py-setproctitle does: prctl
PR_SET_NAME (the kernel keeps 15 characters: ``sglang::schedul``) and the argv area rewritten in
place, so /proc/<pid>/cmdline and ps show ``sglang::scheduler_TP3``. Children set
PR_SET_PDEATHSIG=SIGKILL like SGLang's, and otherwise only sleep.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

from sglang._sim import logs

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
COMM_LEN = 15
# setproctitle(f"sglang::scheduler{prefix.replace(' ', '_')}") with the log prefix (0.5.23
# managers/scheduler.py:6279-6294): sglang::scheduler_TP3 with tp_size > 1, sglang::scheduler on one GPU.
SCHEDULER_TITLE = "sglang::scheduler{suffix}"
DETOKENIZER_TITLE = "sglang::detokenizer"
BOOTSTRAP = "from sglang._sim.procs import child_main; child_main()"

_children: list[subprocess.Popen[bytes]] = []
_titles: dict[int, str] = {}
_expected_exit = threading.Event()
_die_lock = threading.Lock()


def _prctl(option: int, arg: object) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        zero = ctypes.c_ulong(0)
        return libc.prctl(ctypes.c_int(option), arg, zero, zero, zero) == 0
    except (OSError, AttributeError):
        return False


def _argv_area() -> range | None:
    """The [arg_start, arg_end) addresses of our argv strings (fields 48, 49 of stat)."""
    try:
        with open("/proc/self/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])
    except (OSError, IndexError, ValueError):
        return None
    return range(start, end) if 0 < start < end else None


def set_process_title(title: str) -> None:
    """prctl(PR_SET_NAME) plus an in-place argv rewrite, as py-setproctitle does on Linux."""
    raw = title.encode()
    _prctl(PR_SET_NAME, ctypes.c_char_p(raw[:COMM_LEN]))
    area = _argv_area()
    if area is None or len(area) < 2:
        return
    # Keep the last byte NUL so the kernel reports exactly the area (title + NUL padding).
    payload = raw[: len(area) - 1]
    payload += b"\0" * (len(area) - len(payload))
    try:
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(area.start)
            mem.write(payload)
    except OSError:
        pass


def child_main() -> None:
    """Entry of a child: ``python -c BOOTSTRAP <title> <parent pid>``."""
    title, parent = sys.argv[1], int(sys.argv[2])
    _prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(int(signal.SIGKILL)))
    if os.getppid() != parent:
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_process_title(title)
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def spawn_children(global_ranks: Sequence[int]) -> None:
    """One scheduler per local TP rank, then the detokenizer."""
    titles = [SCHEDULER_TITLE.format(suffix=logs.rank_prefix(rank).replace(" ", "_")) for rank in global_ranks]
    for title in [*titles, DETOKENIZER_TITLE]:
        command = [sys.executable, "-c", BOOTSTRAP, title, str(os.getpid())]
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        _children.append(child)
        _titles[child.pid] = title


def child_pids() -> list[int]:
    return [child.pid for child in _children]


def kill_children() -> None:
    for child in _children:
        with contextlib.suppress(OSError):
            os.kill(child.pid, signal.SIGKILL)
    for child in _children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=2)


def exiting() -> bool:
    return _expected_exit.is_set()


def exit_now(code: int, text: str = "") -> NoReturn:
    """Kill the children (SGLang's kill_process_tree), write text, exit; from any thread."""
    with _die_lock:
        _expected_exit.set()
        kill_children()
        if text:
            logs.write(text)
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os._exit(code)


def die_by_signal(signum: int) -> NoReturn:
    """Exit "killed by signal", as an uncaught SIGTERM/SIGINT does."""
    with _die_lock:
        _expected_exit.set()
        kill_children()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        time.sleep(1)
        os._exit(128 + signum)


def watch_children(on_death: Callable[[str, int, int], None], interval: float = 0.5) -> None:
    """Call on_death(title, pid, returncode) for a child that exits while we are not exiting."""

    def loop() -> None:
        reported = set()
        while not _expected_exit.is_set():
            for child in _children:
                code = child.poll()
                if code is not None and child.pid not in reported and not _expected_exit.is_set():
                    reported.add(child.pid)
                    on_death(_titles.get(child.pid, "?"), child.pid, code)
            time.sleep(interval)

    threading.Thread(target=loop, name="child-watch", daemon=True).start()
