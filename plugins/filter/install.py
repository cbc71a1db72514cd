# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of an install: what a host lacks of what the controller would put there (apt packages, the files of
a wheelhouse). Each filter is documented in its sidecar file, <filter>.yml."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from ansible.errors import AnsibleFilterError


def apt_missing(specs: Any, packages: Any) -> list[str]:
    """`['g++', 'cuda-nvcc-13-0=13.0.88-1'] | sglang_apt_missing(ansible_facts.packages)`: the specs
    that package_facts does not show installed (at exactly that version, for name=version)."""
    missing = []
    for spec in specs or []:
        name, _sep, version = str(spec).partition("=")
        installed = [str(entry.get("version")) for entry in (packages or {}).get(name) or []]
        if not installed or (version and version not in installed):
            missing.append(str(spec))
    return missing


def _sha1(path: str) -> str:
    with open(path, "rb") as handle:  # SHA-1: what ansible.builtin.find's get_checksum reports
        return hashlib.file_digest(handle, "sha1").hexdigest()


def files_to_copy(directory: Any, found: Any) -> list[str]:
    """`dir | sglang.deploy.files_to_copy(find_result)`: paths of the files of the controller directory
    `dir` that the host lacks, or holds with another checksum, in the directory `find` read."""
    on_host = {os.path.basename(str(f.get("path"))): f.get("checksum") for f in (found or {}).get("files") or []}
    try:
        names = sorted(os.listdir(str(directory)))
    except OSError as exc:
        raise AnsibleFilterError(f"files_to_copy: {exc}") from exc
    paths = [os.path.join(str(directory), name) for name in names]
    return [path for path in paths if os.path.isfile(path) and on_host.get(os.path.basename(path)) != _sha1(path)]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"apt_missing": apt_missing, "files_to_copy": files_to_copy}
