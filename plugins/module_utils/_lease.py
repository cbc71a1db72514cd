# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's rollout lease: one deploy that changes anything at a time, across controllers.

The lease is a JSON file on one host of the fleet (the lease host), read and written under an exclusive
``flock`` of a lock file beside it, so two deploys that start together are served one after the other: the
first takes it, the second finds it held and is refused before it changes anything.

A lease names its holder (its ``id``, the user, the controller host and its boot, the PID of
``ansible-playbook`` and that process's start, the command, when it began) and an expiry that the holder moves
on at each batch. It is stale when it expired (its holder stopped renewing it), or when the controller that
reads it is the holder's own and the holder's process is gone (``stale_reason``, on the controller). A stale
lease is taken over only when the run names it (its ``id``); a live one never. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
import typing as t

from ansible_collections.sglang.deploy.plugins.module_utils._json_file import read_object, replace_atomically

DEFAULT_FILE = "/var/lib/sglang-deploy/rollout-lease.json"
HOLDER_KEYS = ("id", "user", "controller", "boot_id", "pid", "pid_start", "command", "started")


class LeaseRefused(Exception):
    """The lease is another run's, and this run may not take it."""


@contextlib.contextmanager
def locked(path: str) -> t.Iterator[None]:
    """An exclusive lock of the lease file's lock file for the read-modify-write."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    with open(f"{path}.lock", "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
         now: float | None = None) -> dict[str, t.Any]:
    """Take or renew the lease for ``holder``: {changed, lease, took_over}. LeaseRefused when another run holds it
    and may keep it (live), or it is stale and ``takeover`` does not name it."""
    with locked(path):
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
        replace_atomically(path, lease, 0o644)
        return {"changed": not current or current.get("id") != holder["id"], "lease": lease, "took_over": took_over}


def release(path: str, holder_id: str) -> dict[str, t.Any]:
    """Give the lease back if ``holder_id`` holds it: {changed, lease (what remains, or None)}."""
    with locked(path):
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
