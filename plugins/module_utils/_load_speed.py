# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How fast a server's weights can load: the disk's sequential read rate, measured once per host, and the advice
that compares it with the rate the last load read at. Standard library only.

The measurement reads at most ``MAX_BYTES`` of the model's largest safetensors shard, bypassing the page cache
(``O_DIRECT``; where the file system refuses it - tmpfs, some overlays - a plain read after
``posix_fadvise(DONTNEED)``, and the record says which). Module sglang_disk_rate keeps it in
``<sglang_home>/<instance>.disk.json``; a deploy measures again only when that record is missing, is of another
model directory, or is asked to (``sglang_config_disk_remeasure``).
"""

from __future__ import annotations

import errno
import mmap
import os
import time
from collections.abc import Callable
from typing import Any

from .sglang_types import positive_number

MAX_BYTES = 1 << 30     # the most a measurement reads: 1 GiB
BLOCK = 16 << 20        # read in 16 MiB blocks (dd bs=16M): large enough for the disk's sequential rate
DISK_BOUND = 0.8        # a load that read at 80 % of the disk's rate or more was waiting on the disk
DIRECT = "O_DIRECT"
FADVISE = "posix_fadvise DONTNEED"


def largest_shard(directory: str) -> str | None:
    """The largest .safetensors file directly in the directory, None when there is none."""
    try:
        entries = [entry for entry in os.scandir(directory)
                   if entry.is_file() and entry.name.endswith(".safetensors")]
    except OSError:
        return None
    return max(entries, key=lambda entry: (entry.stat().st_size, entry.name)).path if entries else None


def _open(path: str, direct: bool) -> tuple[int, str]:
    """The file opened for reading past the page cache, and how: O_DIRECT when allowed, else a plain descriptor
    whose cached pages were dropped."""
    if direct and hasattr(os, "O_DIRECT"):
        try:
            return os.open(path, os.O_RDONLY | os.O_DIRECT), DIRECT
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    fd = os.open(path, os.O_RDONLY)
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return fd, FADVISE


def _read(fd: int, limit: int, buffer: mmap.mmap) -> int:
    done = 0
    while done < limit:
        got = os.readv(fd, [buffer])
        if got <= 0:
            break
        done += got
    return done


def measure(path: str, limit: int = MAX_BYTES, direct: bool = True,
            clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Read at most ``limit`` bytes (whole 16 MiB blocks, at least one, at most MAX_BYTES) of ``path``
    sequentially past the page cache: {path, bytes, seconds, gb_per_s, method}. A file system that refuses
    O_DIRECT (EINVAL, at the open or the first read) is read after posix_fadvise(DONTNEED) instead; gb_per_s is
    None when nothing was read or no time passed."""
    limit = max(BLOCK, min(int(limit), MAX_BYTES) // BLOCK * BLOCK)  # whole blocks: never more than asked
    buffer = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
    try:
        fd, method = _open(path, direct)
        try:
            started = clock()
            try:
                done = _read(fd, limit, buffer)
            except OSError as exc:
                if method != DIRECT or exc.errno != errno.EINVAL:
                    raise
                os.close(fd)
                fd, method = _open(path, False)
                started = clock()
                done = _read(fd, limit, buffer)
            seconds = clock() - started
        finally:
            os.close(fd)
    finally:
        buffer.close()
    rate = round(done / 1e9 / seconds, 6) if done > 0 and seconds > 0 else None
    return {"path": path, "bytes": done, "seconds": round(seconds, 6), "gb_per_s": rate, "method": method}


def stale(record: dict[str, Any] | None, model_path: str, remeasure: bool = False) -> str:
    """Why the disk must be measured (again), or "" when the record holds: none yet, another model directory
    (maybe another disk), no rate, or asked to."""
    if remeasure:
        return "asked to measure again (sglang_config_disk_remeasure)"
    if not isinstance(record, dict):
        return "no measurement recorded on this host yet"
    if str(record.get("model_path") or "") != str(model_path):
        return f"the record is of {record.get('model_path')!r}, not of {model_path!r}"
    if not positive_number(record.get("gb_per_s")):
        return "the recorded measurement has no rate"
    return ""


def advise(load: dict[str, Any] | None, disk: dict[str, Any] | None, weights_bytes: Any = None,
           presharded: bool = False, threads: int | None = None) -> dict[str, Any]:
    """Which lever would shorten the next weight load, and by about how much. Advice only: nothing is changed.

    ``load`` is the last load's timings (the readiness waiter's record's ``load``: weights_load_s, SGLang's own
    "Load weight end. elapsed=" sum, and weights_bytes); ``disk`` the disk record (gb_per_s); ``weights_bytes``,
    when given, the size of the weights the next load reads (else the last load's); ``presharded`` whether
    ``--load-format presharded`` is on; ``threads`` the loader's num_threads when set (SGLang's default is 8).

    The rule: the floor (``floor_s``) is the weights' size over the disk's sequential rate, the time the disk alone
    needs. When the last load read at ``DISK_BOUND`` (80 %) of the disk's rate or more, it was disk-bound: no
    loader setting makes it faster, only faster storage or a warm page cache do (lever ``storage``, no gain
    figure: it depends on the storage). Otherwise the time beyond the floor (weights_load_s - floor_s) went to
    processing (one reader, re-quantization and repacking, CPU): the lever is ``presharded`` when it is off (later
    loads skip the post-load processing), else more loader ``threads``. ``expected_gain_s`` is that excess: an
    upper bound, since no lever makes the load faster than the disk. ``bound`` is ``unknown`` (lever ``none``)
    without a recorded weight load or a disk rate."""
    load = load if isinstance(load, dict) else {}
    disk_rate = positive_number((disk or {}).get("gb_per_s") if isinstance(disk, dict) else None)
    size = positive_number(weights_bytes) or positive_number(load.get("weights_bytes"))
    load_s = positive_number(load.get("weights_load_s"))
    result: dict[str, Any] = {"floor_s": None, "weights_load_s": load_s, "read_gb_per_s": None,
                              "disk_gb_per_s": disk_rate, "bound": "unknown", "lever": "none",
                              "expected_gain_s": None}
    if not disk_rate:
        return dict(result, why="the disk's read rate is not measured on this host yet")
    if not load_s or not size:
        return dict(result, why="no weight load recorded on this host yet")
    floor_s = round(size / 1e9 / disk_rate, 1)
    read = round(size / 1e9 / load_s, 3)
    result.update(floor_s=floor_s, read_gb_per_s=read)
    if read >= DISK_BOUND * disk_rate:
        return dict(result, bound="disk", lever="storage",
                    why=f"the last load read the weights at {read:.2f} GB/s, {read / disk_rate:.0%} of the disk's "
                        f"{disk_rate:.2f} GB/s: disk-bound, no loader setting helps; only faster storage or a warm "
                        f"page cache shorten it (floor {floor_s:.0f} s)")
    excess = round(load_s - floor_s, 1)
    if presharded:
        lever, how = "threads", (f"more loader threads (num_threads, now {threads})" if threads
                                 else "more loader threads (num_threads, SGLang's default 8; the checkpoint "
                                      "prefetch drops it to one unless set)")
    else:
        lever, how = "presharded", "--load-format presharded (later loads skip the post-load processing)"
    return dict(result, bound="processing", lever=lever, expected_gain_s=excess,
                why=f"the last load read the weights at {read:.2f} GB/s, {read / disk_rate:.0%} of the disk's "
                    f"{disk_rate:.2f} GB/s: {load_s:.0f} s against a floor of {floor_s:.0f} s; the {excess:.0f} s "
                    f"above it are processing: {how} saves at most {excess:.0f} s")


def line(advice: dict[str, Any] | None) -> str:
    """One line of advice: the lever and the gain to expect, then why."""
    if not isinstance(advice, dict) or advice.get("bound", "unknown") == "unknown":
        return "unknown: " + str((advice or {}).get("why") or "no advice")
    gain = advice.get("expected_gain_s")
    head = {"storage": "disk-bound, lever: storage",
            "presharded": f"lever: presharded, up to {gain or 0:.0f} s faster",
            "threads": f"lever: threads, up to {gain or 0:.0f} s faster"}.get(str(advice.get("lever")), "no lever")
    return f"{head} ({advice.get('why')})"
