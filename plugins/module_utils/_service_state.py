# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A server's deployed state on its host: the deployed files' checksums, the unit's state, what the running
server was started from, and a pending reboot. Read by sglang_service_state, and by sglang_host_facts when
deploy.yml folds it into its one read of each host. Standard library only.

What runs can lag what is on disk: a controller that dies after writing a server's files and before its
restart leaves the old process serving under the new files. ``running_state`` gives the evidence the restart
decision and status.yml weigh: the main process's argv (/proc/<MainPID>/cmdline), whether systemd still has
an older unit file loaded (NeedDaemonReload), and which deployed files changed after the process started (their
mtime against ExecMainStartTimestampMonotonic, both on the host's clocks).
"""

from __future__ import annotations

import hashlib
import os
import time
import typing as t

from ._live import unit_summary

# The unit's properties the restart decision reads.
UNIT_PROPERTIES = ("LoadState", "ActiveState", "MainPID", "ExecMainStartTimestampMonotonic", "NeedDaemonReload")
PROC = "/proc"
REBOOT_REQUIRED_FILE = "/run/reboot-required"


def sha1(path: str) -> str | None:
    """The file's SHA-1, None when it does not exist; OSError when it exists and cannot be read."""
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha1").hexdigest()
    except FileNotFoundError:
        return None


def checksums(paths: t.Iterable[str]) -> dict[str, str | None]:
    """Each path's SHA-1 (None when missing); OSError when one exists and cannot be read."""
    return {path: sha1(path) for path in paths}


def pending_reboot(flag: str = REBOOT_REQUIRED_FILE) -> dict[str, t.Any]:
    """Whether a reboot is pending, and the packages that asked for it (the flag's .pkgs file)."""
    try:
        with open(f"{flag}.pkgs", encoding="utf-8") as handle:
            packages = sorted({line.strip() for line in handle if line.strip()})
    except OSError:
        packages = []
    return {"required": os.path.exists(flag), "packages": packages}


def argv_of(pid: int, proc: str = PROC) -> list[str] | None:
    """A process's argv as the kernel keeps it (/proc/<pid>/cmdline), None when it cannot be read."""
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    words = raw.split(b"\0")
    if words and words[-1] == b"":
        words.pop()
    return [word.decode("utf-8", "surrogateescape") for word in words] or None


def _int(value: t.Any) -> int:
    try:
        return int(str(value).strip() or 0)
    except ValueError:
        return 0


def running_state(unit: dict[str, str], paths: t.Iterable[str], proc: str = PROC,
                  now: tuple[float, float] | None = None) -> dict[str, t.Any] | None:
    """What the running server was started from, or None when no main process runs: its PID and argv, when it
    started (the host's wall clock, seconds), whether systemd has not loaded the unit file now on disk, and the
    deployed files modified after it started. ``now``: (wall, monotonic) clocks, for tests."""
    pid = _int(unit.get("MainPID"))
    if pid <= 0 or unit.get("ActiveState") not in ("active", "activating", "reloading"):
        return None
    wall, monotonic = now or (time.time(), time.clock_gettime(time.CLOCK_MONOTONIC))
    started_us = _int(unit.get("ExecMainStartTimestampMonotonic"))
    started = wall - (monotonic - started_us / 1e6) if started_us > 0 else None
    changed = []
    for path in paths:
        try:
            modified = os.stat(path).st_mtime
        except FileNotFoundError:
            continue
        if started is not None and modified > started:
            changed.append(path)
    return {"pid": pid, "argv": argv_of(pid, proc), "started": round(started, 3) if started is not None else None,
            "need_daemon_reload": str(unit.get("NeedDaemonReload", "")).lower() == "yes",
            "changed_after_start": changed}


def deployed_state(paths: t.Iterable[str], unit: dict[str, str], flag: str = REBOOT_REQUIRED_FILE,
                   listening: bool | None = None) -> dict[str, t.Any]:
    """What the restart decision reads, in sglang_service_state's shape: the files' checksums, the unit's
    properties as given, what the running server was started from (with ``listening``: whether it accepts
    connections on its port yet, when the caller knows), a pending reboot, and what the unit file (the first
    path) runs (_live.unit_summary). OSError when a file exists and cannot be read."""
    paths = list(paths)
    running = running_state(unit, paths)
    if running is not None:
        running["listening"] = listening
    return {"files": checksums(paths), "unit": unit, "running": running, "reboot": pending_reboot(flag),
            "unit_file": unit_summary(read_text(paths[0])) if paths else None}


def read_text(path: str) -> str | None:
    """A file's text, None when it does not exist; OSError when it exists and cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
