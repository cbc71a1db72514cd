# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""JSON state files the modules share on a host: read one as an object, replace one atomically.

The readiness waiter (sglang_ready) writes its status file and the record of what a start measured;
sglang_host_facts reads that record back. Root writes and reads these files, so neither follows a link another
user planted: a write goes to a private temporary name (``mkstemp``: ``O_EXCL``, ``O_NOFOLLOW``, a random name)
made with its mode (``fchmod`` of the descriptor, never ``chmod`` of a name) and renamed over the target (a rename
replaces a link at the target, it does not follow it); a read opens with ``O_NOFOLLOW`` and keeps only a regular
file with one link, owned by root or by the reader itself, so a record another user wrote or linked is not
trusted. Records root keeps live where only root writes (``RECORDS_DIR``), not in the service user's home.
Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from typing import Any

# Where root keeps its records of a host (what a start measured, the disk's rate): only root writes there.
RECORDS_DIR = "/var/lib/sglang-deploy/records"
# A record is a few KiB; a larger file is not one of ours.
MAX_BYTES = 1 << 20


def trusted_owner(uid: int) -> bool:
    """Whether a file of this owner may be trusted by this process: root's, or the reader's own."""
    return uid in (0, os.geteuid())


def read_object(path: str) -> dict[str, Any] | None:
    """The file's JSON object; None when it is missing, unreadable, not JSON or not an object, and when it is not
    a file root (or this reader) wrote: a symbolic link, not a regular file, hard-linked elsewhere, or owned by
    another user."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or not trusted_owner(info.st_uid):
            return None
        raw = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def make_private_dirs(path: str) -> None:
    """Create the directory and any missing parent, each 0700 (an existing one is left as it is)."""
    if not path or os.path.isdir(path):
        return
    make_private_dirs(os.path.dirname(path.rstrip("/")))
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)


def replace_atomically(path: str, data: dict[str, Any], mode: int | None = None) -> None:
    """Write data to a private temporary file beside path (with mode, 0644 if not given) and rename it over path,
    so a reader sees the old file or the new one, never a partial one, and nothing a link points to is touched.
    A missing directory is created 0700."""
    directory = os.path.dirname(path) or "."
    make_private_dirs(directory)
    fd, partial = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644 if mode is None else mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            fd = -1
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
