# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the install roles' stamps: the digest of a role's inputs and code, where a role's code is, and
whether a host's stamp says the role has nothing to do there. Each filter is documented in its sidecar file,
<filter>.yml."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from typing import Any

from ansible.errors import AnsibleFilterError

# This file is <collection>/plugins/filter/stamp.py.
COLLECTION_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def role_dir(name: Any, collection_dir: str | None = None) -> str:
    """`'sglang_stack' | role_dir`: <collection>/roles/<name>, which must exist (`collection_dir`: by default this
    collection's)."""
    collection_dir = collection_dir or COLLECTION_DIR
    path = os.path.join(collection_dir, "roles", str(name))
    if not re.fullmatch(r"[a-z][a-z0-9_]*", str(name)) or not os.path.isdir(path):
        roles = sorted(entry for entry in os.listdir(os.path.join(collection_dir, "roles"))
                       if not entry.startswith("."))
        raise AnsibleFilterError(f"role_dir: the collection has no role {name!r}; it has {', '.join(roles)}")
    return path


# The collection's own code trees as stamp_digest reads them, read once in Ansible's main process before it forks
# a worker per task and host (before_fork, called by the sglang.deploy.prefork callback): the workers that digest
# a role's code for every host inherit them. Paths not read then (a test's, a wheelhouse) are read each time.
_TREES: dict[str, bytes] = {}


def _tree_chunks(top: str) -> Iterator[bytes]:
    """What stamp_digest hashes for a directory, piece by piece: every file's relative name and content, in a
    stable order (byte-code caches left out)."""
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(n for n in files if not n.endswith(".pyc")):
            full = os.path.join(root, name)
            yield f"\0{os.path.relpath(full, top)}\0".encode()
            with open(full, "rb") as handle:
                yield handle.read()


def before_fork(collection_dir: str = COLLECTION_DIR) -> None:
    """Read the collection's plugins and roles for stamp_digest, once per run in the main process."""
    roles = os.path.join(collection_dir, "roles")
    for top in [os.path.join(collection_dir, "plugins")] + [os.path.join(roles, name) for name in os.listdir(roles)]:
        if os.path.isdir(top):
            _TREES[os.path.abspath(top)] = b"".join(_tree_chunks(top))


def stamp_digest(inputs: Any, paths: Any = ()) -> str:
    """`inputs | stamp_digest([role_path, plugins_dir])`: SHA-256 of the inputs as canonical JSON, and of
    every file under the paths (relative name and content; byte-code caches left out)."""
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode())
    for top in [str(path) for path in paths or ()]:
        if not os.path.isdir(top):
            raise AnsibleFilterError(f"stamp_digest: {top} is not a directory")
        known = _TREES.get(os.path.abspath(top))
        for chunk in [known] if known is not None else _tree_chunks(top):  # a wheelhouse is hashed file by file
            digest.update(chunk)
    return digest.hexdigest()


def stamp_state(stamp: Any, digest: str, enabled: Any = True) -> dict[str, Any]:
    """`stamps[role] | stamp_state(digest, enabled)`: {digest, converged, why}. Converged: the stamp
    exists, its digest is this run's and nothing it lists moved; never when not `enabled`."""
    stamp = stamp if isinstance(stamp, dict) else {}
    if not enabled:
        why = "the stamps are not trusted in this run (a phase of the role was asked for, or the skip is off)"
    elif not stamp.get("found"):
        why = "; ".join(stamp.get("drift") or ["no stamp was read"])
    elif stamp.get("digest") != digest:
        why = "its inputs changed (variables, the role or the collection) since it last converged here"
    elif stamp.get("drift"):
        why = "the host moved since it last converged here: " + "; ".join(stamp["drift"])
    else:
        why = ""
    return {"digest": digest, "converged": not why, "why": why}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"stamp_digest": stamp_digest, "stamp_state": stamp_state, "role_dir": role_dir}
