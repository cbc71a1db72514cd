# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Presharded weights (``sglang_presharded``, opt-in): the dump's key, its paths and flags, its disk plan.

SGLang 0.5.23's ``--load-format presharded`` (srt/model_loader/loader.py, PreshardedModelLoader) dumps each
rank's post-processed weights on the first load under ``<presharded_path>/TP-<tp>-sig-<16 hex>/`` (with a
``READY`` file once complete) and reads them back on later loads. Its subfolder name covers the parallelism,
the quantization, the dtype and the tensors' names, shapes and dtypes, but neither the SGLang version nor the
weights' content: a new checkpoint with the same shapes would load the old dump. The deploy therefore puts the
dump under ``<sglang_presharded_dir>/<key>``, the key a digest of what SGLang's misses - the version, the model's
and the draft's safetensors (each file's name, size and mtime, read on the host), tp_size and nnodes. A new key
is a new ``--model-loader-extra-config``, so the restart decision restarts the server, and its first load
dumps again.

The EAGLE draft loads through the same loader (``--speculative-draft-load-format`` defaults to
``--load-format``) under ``draft_presharded_path``, else under ``<draft model>/presharded``, which the unit's
sandbox cannot write: the deploy names ``<dir>/<key>-draft`` whenever the server has a draft model.
Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
import re
from collections.abc import Iterable
from typing import Any

FLAG_LOAD_FORMAT = "--load-format"
FLAG_EXTRA_CONFIG = "--model-loader-extra-config"
FLAGS = (FLAG_LOAD_FORMAT, FLAG_EXTRA_CONFIG)
LOAD_FORMAT = "presharded"
READY_FILE = "READY"            # PreshardedModelLoader.READY_FILENAME
KEY_VERSION = 1                 # bump when what the key covers changes
KEY_RE = re.compile(r"^[0-9a-f]{16}$")
DRAFT_SUFFIX = "-draft"
# Written by the deploy into each dump root it names (roles/sglang_service, configure.yml) before SGLang's first
# load: the prune removes only roots that carry it (issue 49: never a directory the deploy did not make).
MARKER_FILE = ".sglang-deploy-dump"
# A directory the unit's argv, its ReadWritePaths= and a JSON string carry without quoting surprises.
DIR_RE = re.compile(r"^/[A-Za-z0-9._/-]*$")
DIR_ALLOWED = ("an absolute path of letters, digits, '.', '_', '-' and '/' (no '..'), under sglang_home or "
               "one of sglang_service_read_write_paths (the unit's ProtectSystem=strict lets it write only there)")
# Free space the first load's dump needs beyond the checkpoint's size: the dump holds every rank's shards
# after post-load processing, about the checkpoint's size (replicated tensors are written once, as the
# "common" file), so 10 % and 1 GiB on top.
MARGIN_FRACTION = 0.10
MARGIN_BYTES = 1 << 30


def fingerprint(files: Iterable[tuple[str, int, int]]) -> str:
    """A digest of a checkpoint's identity: each safetensors file's (name, size, mtime in ns), in name order."""
    digest = hashlib.sha256()
    for name, size, mtime_ns in sorted(files):
        digest.update(f"{name}\0{int(size)}\0{int(mtime_ns)}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def read_fingerprint(path: str | None) -> str | None:
    """The fingerprint of the ``*.safetensors`` files directly in ``path``; None without a directory."""
    if not path or not os.path.isdir(path):
        return None
    entries = []
    for entry in os.scandir(path):
        if entry.name.endswith(".safetensors") and entry.is_file():
            stat = entry.stat()
            entries.append((entry.name, stat.st_size, stat.st_mtime_ns))
    return fingerprint(entries)


def dump_key(version: str, model: str | None, draft: str | None, tp_size: int, nnodes: int) -> str:
    """The 16 hex digits naming the dump of this SGLang version, checkpoint(s) and parallelism."""
    text = json.dumps({"key": KEY_VERSION, "sglang": str(version), "model": model, "draft": draft,
                       "tp_size": int(tp_size), "nnodes": int(nnodes)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def dir_problem(directory: str, writable: Iterable[str]) -> str | None:
    """Why the unit could not write dumps under ``directory``; None when it can."""
    text = str(directory)
    if not DIR_RE.match(text) or ".." in text.split("/") or text != posixpath.normpath(text) or text == "/":
        return f"{text!r} is not a usable directory; allowed: {DIR_ALLOWED}"
    roots = [posixpath.normpath(str(root)) for root in writable if str(root).startswith("/")]
    if not any(text == root or text.startswith(root.rstrip("/") + "/") for root in roots):
        return (f"{text} is outside the paths the unit may write ({', '.join(roots) or 'none'}): SGLang could not "
                f"write its dump there; allowed: {DIR_ALLOWED}")
    return None


def paths(directory: str, key: str, draft: bool) -> dict[str, str]:
    """The roots SGLang's loader takes (``--model-loader-extra-config``): the model's, and the draft's if any."""
    if not KEY_RE.match(key):
        raise ValueError(f"{key!r} is not a dump key")
    result = {"presharded_path": f"{directory}/{key}"}
    if draft:
        result["draft_presharded_path"] = f"{directory}/{key}{DRAFT_SUFFIX}"
    return result


def loader_args(directory: str, key: str, draft: bool) -> list[list[str]]:
    """The argv groups: ``--load-format presharded --model-loader-extra-config <json>``."""
    config = json.dumps(paths(directory, key, draft), sort_keys=True, separators=(",", ":"))
    return [[FLAG_LOAD_FORMAT, LOAD_FORMAT], [FLAG_EXTRA_CONFIG, config]]


def needed_bytes(model_bytes: int, draft_bytes: int = 0) -> int:
    """Free space the first load's dump needs: the weights (model and draft) plus the margin."""
    weights = int(model_bytes or 0) + int(draft_bytes or 0)
    return int(weights * (1 + MARGIN_FRACTION)) + MARGIN_BYTES


def _tree_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _ready(path: str) -> bool:
    """A dump root holds a complete dump: one of SGLang's subfolders has its READY file."""
    try:
        return any(entry.is_dir() and os.path.isfile(os.path.join(entry.path, READY_FILE))
                   for entry in os.scandir(path))
    except OSError:
        return False


def _free_bytes(directory: str) -> int | None:
    """Free bytes for an unprivileged writer on the filesystem that holds (or will hold) ``directory``."""
    path = directory
    while path and not os.path.isdir(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    try:
        stat = os.statvfs(path or "/")
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def read_state(directory: str) -> dict[str, Any]:
    """What is under the dump directory on the host: each key's dump (ready, bytes, mtime) and the free space."""
    dumps: dict[str, dict[str, Any]] = {}
    foreign: list[str] = []
    if os.path.isdir(directory):
        for entry in os.scandir(directory):
            if entry.is_dir(follow_symlinks=False) and is_key_name(entry.name):
                dumps[entry.name] = {"ready": _ready(entry.path), "bytes": _tree_bytes(entry.path),
                                     "mtime": int(entry.stat(follow_symlinks=False).st_mtime),
                                     "marked": os.path.isfile(os.path.join(entry.path, MARKER_FILE))}
            else:
                foreign.append(entry.name)
    return {"exists": os.path.isdir(directory), "dumps": dumps, "foreign": sorted(foreign),
            "free_bytes": _free_bytes(directory)}


def is_key_name(name: str) -> bool:
    """A dump root's name: a key, or a key's draft."""
    return bool(KEY_RE.match(name[:-len(DRAFT_SUFFIX)] if name.endswith(DRAFT_SUFFIX) else name))


def ready(state: dict[str, Any], key: str, draft: bool) -> bool:
    """The key's dump (and its draft's) are complete: the next start loads them."""
    dumps = state.get("dumps") or {}
    names = [key] + ([key + DRAFT_SUFFIX] if draft else [])
    return all((dumps.get(name) or {}).get("ready") for name in names)


def dump_bytes(state: dict[str, Any], key: str) -> int:
    dumps = state.get("dumps") or {}
    return sum(int((dumps.get(name) or {}).get("bytes") or 0) for name in (key, key + DRAFT_SUFFIX))


def to_prune(state: dict[str, Any], key: str) -> list[str]:
    """The entries of the dump directory to remove once a start with ``key`` was recorded good: every dump root
    the deploy made (named as a key, with its marker) but the key's own and the newest other complete dump (the
    previous configuration's, for a rollback). Never an entry without the marker, nor one not named as a key."""
    dumps = state.get("dumps") or {}

    def base(name: str) -> str:
        return name[:-len(DRAFT_SUFFIX)] if name.endswith(DRAFT_SUFFIX) else name

    others = sorted((info.get("mtime") or 0, name) for name, info in dumps.items()
                    if KEY_RE.match(name) and name != key and info.get("ready"))
    keep = {key} | ({others[-1][1]} if others else set())
    return sorted(name for name, info in dumps.items()
                  if base(name) not in keep and is_key_name(name) and (info or {}).get("marked"))


def disk_problem(directory: str, need: int, free: int | None) -> str | None:
    """Refusal when the filesystem of ``directory`` cannot take the first load's dump."""
    if free is None or free >= need:
        return None
    return (f"sglang_presharded_dir: the first start with sglang_presharded dumps about {need / 1e9:,.1f} GB "
            f"(the model's and the draft's safetensors + {MARGIN_FRACTION:.0%} + 1 GiB) under {directory}, and its "
            f"filesystem has {free / 1e9:,.1f} GB free; allowed: a directory on a filesystem with that much free, "
            "or sglang_presharded: false")


def foreign_problem(directory: str, state: dict[str, Any]) -> str | None:
    """Refusal when the dump directory holds anything but dumps (the weights, a cache, another program's files)."""
    foreign = list(state.get("foreign") or [])
    if not foreign:
        return None
    shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    return (f"sglang_presharded_dir: {directory} holds {shown}, which are not the deploy's dumps (a directory named "
            "by a 16-hex-digit key); allowed: a directory for the dumps alone, such as <sglang_home>/presharded")
