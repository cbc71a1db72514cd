# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's rollout lease: one deploy that changes anything at a time, across controllers.

The lease is a JSON file on one host of the fleet (the lease host), read and written under an exclusive
``flock`` of a lock file beside it, so two deploys that start together are served one after the other: the
first takes it, the second finds it held and is refused before it changes anything.

A lease names its holder (its ``id``, the user, the controller host and its boot, the PID of
``ansible-playbook`` and that process's start, the command, when it began) and an expiry that the holder moves
on at each batch. It is stale when it expired (its holder stopped renewing it), or when the controller that
reads it is the holder's own and no process of the holder's run is left there: neither its ``ansible-playbook``
nor a worker Ansible forked from it, which outlives a killed controller (module_utils _controller.gone, on the
controller). A stale lease is taken over only when the run names it (its ``id``); a live one never.

The lock is taken without blocking, retried for a bounded time (``lock_timeout``), then refused naming the
process that holds it; the lock file is 0600 and its directory 0700 (created so), so no other local user can
open it, let alone hold it. Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
import typing as t

from ansible_collections.sglang.deploy.plugins.module_utils._json_file import (
    make_private_dirs,
    read_object,
    replace_atomically,
    trusted_owner,
)

DEFAULT_FILE = "/var/lib/sglang-deploy/rollout-lease.json"
HOLDER_KEYS = ("id", "user", "controller", "boot_id", "pid", "pid_start", "command", "started")
# How long a run waits for the lock of the lease's read-modify-write (milliseconds when it is another deploy's).
DEFAULT_LOCK_TIMEOUT = 60
LOCK_POLL = 0.05
PROC = "/proc"


class LeaseRefused(Exception):
    """The lease is another run's, and this run may not take it."""


class LeaseLocked(Exception):
    """The lease's lock stayed held longer than the bound: not a deploy's quick read-modify-write."""


class LeaseUnsafe(Exception):
    """The lease's directory or lock file is one another user could write or hold."""


def _private_directory(directory: str) -> None:
    """The lease's directory, created 0700 when missing; the default one (root's state directory, as role
    sglang_weights keeps it) tightened to 0700; one that another user may write is refused."""
    make_private_dirs(directory)
    info = os.stat(directory)
    if directory == os.path.dirname(DEFAULT_FILE) and info.st_uid == os.geteuid() and info.st_mode & 0o077:
        os.chmod(directory, 0o700)
        info = os.stat(directory)
    if info.st_mode & 0o022 or not trusted_owner(info.st_uid):
        raise LeaseUnsafe(f"the rollout lease's directory {directory} is owned by uid {info.st_uid} with mode "
                          f"{stat.S_IMODE(info.st_mode):04o}: another user could replace its lock or lease. "
                          "Allowed (sglang_rollout_lease_file): a file in a directory only root writes, such as "
                          f"the default {DEFAULT_FILE}")


def _open_lock(lock: str) -> int:
    """The lock file, 0600 and root's (a link there is refused, an older 0644 one is tightened)."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise LeaseUnsafe(f"the rollout lease's lock {lock} is a symbolic link; remove it (a deploy creates it "
                          "again, 0600)") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or not trusted_owner(info.st_uid):
        os.close(fd)
        raise LeaseUnsafe(f"the rollout lease's lock {lock} is not a regular file root owns (uid {info.st_uid}); "
                          "remove it (a deploy creates it again, 0600)")
    if stat.S_IMODE(info.st_mode) != 0o600:
        os.fchmod(fd, 0o600)
    return fd


def lock_holders(fd: int, proc: str = PROC) -> list[int]:
    """The PIDs /proc/locks names as holding a lock on the file open at ``fd`` (empty when unknown)."""
    info = os.fstat(fd)
    inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        with open(f"{proc}/locks", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    pids = []
    for line in lines:
        fields = line.split()
        if "->" not in fields and len(fields) > 5 and fields[5] == inode and fields[4].isdigit():
            pids.append(int(fields[4]))
    return sorted(set(pids))


def _command(pid: int, proc: str = PROC) -> str:
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as handle:
            words = handle.read().split(b"\0")
    except OSError:
        return "?"
    return " ".join(word.decode("utf-8", "replace") for word in words if word)[:200] or "?"


def _locked_error(path: str, fd: int, timeout: float) -> LeaseLocked:
    holders = lock_holders(fd)
    who = ", ".join(f"PID {pid} (`{_command(pid)}`)" for pid in holders) or "a local process"
    current = read_object(path)
    lease = (f"The lease itself is held by {describe(current, time.time())}." if current
             else "No deploy holds the lease itself.")
    return LeaseLocked(f"ROLLOUT LEASE LOCK {path}.lock still held after {timeout:g} s (sglang_rollout_lease_"
                       f"lock_timeout) by {who} on the lease host: a deploy holds it only for milliseconds, so "
                       f"another process keeps it. {lease} Nothing was changed. End that process, then deploy again.")


@contextlib.contextmanager
def locked(path: str, timeout: float = DEFAULT_LOCK_TIMEOUT) -> t.Iterator[None]:
    """An exclusive lock of the lease file's lock file for the read-modify-write, waited for at most ``timeout``
    seconds (LeaseLocked then, naming who holds it)."""
    _private_directory(os.path.dirname(path) or ".")
    fd = _open_lock(f"{path}.lock")
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _locked_error(path, fd, timeout) from None
                time.sleep(LOCK_POLL)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def describe(lease: dict[str, t.Any], now: float) -> str:
    """Who holds a lease, since when, and until when, for a person."""
    expires = float(lease.get("expires") or 0)
    return (f"{lease.get('user', '?')}@{lease.get('controller', '?')}, PID {lease.get('pid', '?')}, "
            f"running `{lease.get('command', '?')}` since {_stamp(lease.get('started'))} (lease {lease.get('id')}; "
            f"renewed {_stamp(lease.get('renewed'))}; {'expired' if expires <= now else 'expires'} {_stamp(expires)})")


def _stamp(value: t.Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(value)))
    except (TypeError, ValueError):
        return "?"


def staleness(lease: dict[str, t.Any] | None, now: float, gone: dict[str, str] | None = None) -> str:
    """Why a lease is stale ("" when it is live): it expired, or its holder is known gone (``gone``: lease id ->
    the controller's reason)."""
    if not lease:
        return ""
    if float(lease.get("expires") or 0) <= now:
        return f"it expired at {_stamp(lease.get('expires'))} (its holder stopped renewing it)"
    return (gone or {}).get(str(lease.get("id")), "")


def hold(path: str, holder: dict[str, t.Any], ttl: int, takeover: str = "", gone: dict[str, str] | None = None,
         now: float | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> dict[str, t.Any]:
    """Take or renew the lease for ``holder``: {changed, lease, took_over}. LeaseRefused when another run holds it
    and may keep it (live), or it is stale and ``takeover`` does not name it."""
    with locked(path, lock_timeout):
        now = time.time() if now is None else now
        current = read_object(path)
        took_over = None
        if current and current.get("id") != holder["id"]:
            stale = staleness(current, now, gone)
            if not stale:
                raise LeaseRefused(f"ROLLOUT LEASE HELD by {describe(current, now)}: another deploy is changing the "
                                   "fleet. Nothing was changed. Wait for it to end (it releases the lease), or stop "
                                   "it.")
            if takeover != current.get("id"):
                raise LeaseRefused(f"ROLLOUT LEASE HELD by {describe(current, now)}, and it is stale: {stale}. "
                                   "Nothing was changed. If that deploy is no longer running, take the lease over "
                                   f"with -e sglang_rollout_lease_takeover={current.get('id')}")
            took_over = dict(current, stale=stale)
        lease = {key: holder.get(key) for key in HOLDER_KEYS}
        lease["started"] = current.get("started") if current and current.get("id") == holder["id"] else (
            holder.get("started") or now)
        lease.update(renewed=now, expires=now + int(ttl))
        if took_over:
            lease["took_over"] = {key: took_over.get(key) for key in (*HOLDER_KEYS, "stale")}
        replace_atomically(path, lease, 0o644)  # who holds it is no secret (its command line is redacted)
        return {"changed": not current or current.get("id") != holder["id"], "lease": lease, "took_over": took_over}


def release(path: str, holder_id: str, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> dict[str, t.Any]:
    """Give the lease back if ``holder_id`` holds it: {changed, lease (what remains, or None)}."""
    with locked(path, lock_timeout):
        current = read_object(path)
        if current and current.get("id") == holder_id:
            os.unlink(path)
            return {"changed": True, "lease": None}
        return {"changed": False, "lease": current}


def read(path: str, now: float | None = None, gone: dict[str, str] | None = None) -> dict[str, t.Any]:
    """The lease as it is: {changed: false, lease, stale}."""
    current = read_object(path)
    now = time.time() if now is None else now
    return {"changed": False, "lease": current, "stale": staleness(current, now, gone)}
