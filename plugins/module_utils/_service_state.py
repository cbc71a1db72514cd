# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A server's deployed state on its host: the deployed files' checksums, the unit's state and a pending
reboot. Read by sglang_service_state, and by sglang_host_facts when deploy.yml folds it into its one read
of each host. Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import typing as t

# The unit's properties the restart decision reads.
UNIT_PROPERTIES = ("LoadState", "ActiveState")
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


def deployed_state(paths: t.Iterable[str], unit: dict[str, str], flag: str = REBOOT_REQUIRED_FILE) -> dict[str, t.Any]:
    """What the restart decision reads, in sglang_service_state's shape: the files' checksums, the unit's
    properties as given, and a pending reboot. OSError when a file exists and cannot be read."""
    return {"files": checksums(paths), "unit": unit, "reboot": pending_reboot(flag)}
