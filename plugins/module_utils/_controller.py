# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of the rollout lease: who this run is, and whether a lease's holder is gone.

A run is its ``ansible-playbook`` process: the outermost process among the caller and its ancestors whose command
is ``ansible-playbook`` (a worker Ansible forked keeps that command line; the main process is its parent). Its id
is derived from the controller's boot, the PID and the process's start, so it is the same for every task of one run
and differs for every other run.
A lease whose holder ran on this controller's current boot is stale once no process of that run is left: its
``ansible-playbook`` is gone (or is another process under the same PID), and so is every worker Ansible forked
from it. A worker outlives a SIGKILLed controller (it is in a session of its own: Ansible's WorkerProcess._detach
calls setsid, so neither the controller's process group nor its session holds it) and may still act on a host.
A worker is recognised by what a fork keeps: the controller's command line, as the lease records it (``command``,
redacted: no digest of the raw line is kept, which would let a secret passed with -e be guessed offline), and a
start no earlier than the controller's; the caller's own run (its ansible-playbook and that process's children)
is left out, as it may run the same command. Two runs whose command lines differ only in a secret value look
alike: the rule then waits (a live run is never taken over). On a controller without /proc (macOS), the run is
the caller's parent and a lease's holder cannot be checked: only its expiry makes it stale. Standard library
only.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import shlex
import socket
import time
import typing as t

PROC = "/proc"
# Variables whose values a lease's command line must not show (it is written to a host and shown to others).
SECRET = re.compile(r"(key|token|password|passwd|secret|credential)", re.IGNORECASE)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def boot_id(proc: str = PROC) -> str:
    return _read(f"{proc}/sys/kernel/random/boot_id").strip()


def start_ticks(pid: int, proc: str = PROC) -> str:
    """The process's start (clock ticks after boot, /proc/<pid>/stat field 22), "" when it does not exist."""
    stat = _read(f"{proc}/{pid}/stat")
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def argv_of(pid: int, proc: str = PROC) -> list[str]:
    return [word for word in _read(f"{proc}/{pid}/cmdline").split("\0") if word]


def parent_of(pid: int, proc: str = PROC) -> int:
    fields = _read(f"{proc}/{pid}/stat").rsplit(")", 1)[-1].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0


def _state_and_start(pid: int, proc: str = PROC) -> tuple[str, int]:
    fields = _read(f"{proc}/{pid}/stat").rsplit(")", 1)[-1].split()
    if len(fields) <= 19 or not fields[19].isdigit():
        return "", -1
    return fields[0], int(fields[19])


def run_processes(lease: dict[str, t.Any], own: int | None = None, proc: str = PROC) -> list[int]:
    """The live processes of the lease holder's run on this controller: its ansible-playbook (same PID, same
    start) and every process with its command line (redacted, as the lease records it) started no earlier, that
    is not ``own`` (this caller's ansible-playbook, by default) nor a child of it. Zombies are not live. Empty
    without /proc."""
    pid, command = int(lease.get("pid") or 0), str(lease.get("command") or "")
    try:
        since = int(str(lease.get("pid_start")))
    except ValueError:
        return []
    own = playbook_process(proc=proc) if own is None else own
    found = []
    try:
        entries = [entry.name for entry in os.scandir(proc) if entry.name.isdigit()]
    except OSError:
        return []
    for name in entries:
        other = int(name)
        if other in (own, os.getpid()):
            continue
        state, start = _state_and_start(other, proc)
        if not state or state in "ZX" or start < since:
            continue
        controller = other == pid and start == since
        if controller or (command and run_command(other, proc) == command and parent_of(other, proc) != own):
            found.append(other)
    return sorted(found)


def playbook_process(pid: int | None = None, proc: str = PROC) -> int:
    """The ansible-playbook process this one runs under: the outermost ancestor (or itself) whose command is
    ansible-playbook. Ansible's workers are forks of it and keep its command line, so the nearest one would be
    the worker of this task; else the parent."""
    current, found = pid or os.getpid(), 0
    for _depth in range(32):
        if any(os.path.basename(word) == "ansible-playbook" for word in argv_of(current, proc)[:2]):
            found = current
        parent = parent_of(current, proc)
        if parent <= 1:
            break
        current = parent
    if found:
        return found
    return os.getppid() if pid is None else pid


def run_command(pid: int, proc: str = PROC) -> str:
    """The process's command line as the lease records a holder's ("" for a process without one: a zombie, a
    kernel thread, one gone)."""
    argv = argv_of(pid, proc)
    return redacted(argv) if argv else ""


def redacted(argv: list[str]) -> str:
    """The command line, the interpreter left out, and the value of every secret-looking variable replaced."""
    words = argv[1:] if argv and os.path.basename(argv[0]).startswith("python") else argv
    shown = [_shown(word) for word in words]
    return shlex.join([os.path.basename(shown[0]), *shown[1:]] if shown else [])


def _shown(word: str) -> str:
    if "=" in word and SECRET.search(word.split("=", 1)[0]):
        return word.split("=", 1)[0] + "=<hidden>"
    if word.lstrip().startswith("{") and SECRET.search(word):
        return "<extra variables with a secret, hidden>"
    return word


def holder(proc: str = PROC, now: float | None = None) -> dict[str, t.Any]:
    """Who this run is, as the rollout lease records its holder."""
    pid = playbook_process(proc=proc)
    boot, ticks = boot_id(proc), start_ticks(pid, proc)
    host = socket.gethostname()
    digest = hashlib.sha256(f"{host} {boot} {pid} {ticks}".encode()).hexdigest()[:16]
    return {"id": digest, "user": getpass.getuser(), "controller": host, "boot_id": boot, "pid": pid,
            "pid_start": ticks, "command": run_command(pid, proc) or "ansible-playbook",
            "started": time.time() if now is None else now}


def gone(lease: t.Any, proc: str = PROC, own: int | None = None) -> dict[str, str]:
    """{lease id: why} when the lease's holder ran on this controller's current boot and no process of its run is
    left (run_processes); {} when one is alive, it ran elsewhere, or it cannot be checked here."""
    if not isinstance(lease, dict) or not lease.get("id") or not lease.get("boot_id"):
        return {}
    if lease.get("boot_id") != boot_id(proc) or lease.get("controller") != socket.gethostname():
        return {}
    pid = int(lease.get("pid") or 0)
    if pid <= 0 or run_processes(lease, own, proc):
        return {}
    return {str(lease["id"]): f"its holder, PID {pid} on this controller ({lease.get('controller')}), is gone, "
                              "and no worker of its run is left"}


def still_running(lease: t.Any, proc: str = PROC, own: int | None = None) -> str:
    """Why a lease whose holder's ansible-playbook is gone on this controller is not stale yet: the processes of
    its run still alive ("" when there are none, or the holder is alive, elsewhere or unknown)."""
    if not isinstance(lease, dict) or lease.get("boot_id") != boot_id(proc) or \
            lease.get("controller") != socket.gethostname():
        return ""
    pid = int(lease.get("pid") or 0)
    if pid <= 0 or start_ticks(pid, proc) == str(lease.get("pid_start")):
        return ""
    alive = run_processes(lease, own, proc)
    if not alive:
        return ""
    return (f"its holder, PID {pid} on this controller, is gone, but {len(alive)} process(es) of its run still "
            f"run (Ansible workers outlive a killed controller and may still act on a host): PID "
            f"{', '.join(str(other) for other in alive)}. Wait for them to end, or end them (by PID), then deploy "
            "again")
