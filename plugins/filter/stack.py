# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter of the stack's install: what `uv pip check` reports that the host must act on. Documented in its sidecar
file, unmet_requirements.yml."""

from __future__ import annotations

import re
from typing import Any

from ansible.errors import AnsibleFilterError

# uv's own lines around its findings (uv 0.13: "Using Python 3.11.2 environment at: ...", "Checked 175 packages in
# 17ms", "Found 14 incompatibilities", "All installed packages are compatible").
_INFORMATIONAL = re.compile(r"^(Using C?Python .*|Checked \d+ packages? in .*|Found \d+ incompatibilit(y|ies)"
                            r"|All installed packages are compatible)$")
# "The package `sglang` requires `flashinfer-python[cu13]==0.7.2`, but it's not installed"
_MISSING = re.compile(r"^The package `[^`]+` requires `(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)[^`]*`, "
                      r"but it's not installed$")


def canonical(name: str) -> str:
    """A package name as PEP 503 normalises it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def unmet_requirements(lines: Any, excludes: Any = None, not_installed: str = "") -> list[str]:
    """`(out.stdout_lines + out.stderr_lines) | sglang.deploy.unmet_requirements(sglang_stack_excludes, pattern)`:
    the lines of uv pip check that are problems. A missing requirement is none when it is one of excludes (left
    out on purpose), or its name matches the regular expression not_installed (FlashInfer's kernel packages of
    other GPUs, which the jit-cache shim requires and the host does not install)."""
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise AnsibleFilterError(f"unmet_requirements: expected the lines of uv pip check, got {lines!r}")
    left_out = {canonical(str(name)) for name in excludes or []}
    try:
        other = re.compile(str(not_installed)) if not_installed else None
    except re.error as error:
        raise AnsibleFilterError(f"unmet_requirements: not_installed is not a regular expression: {error}") from error
    problems = []
    for line in (line.strip() for line in lines):
        missing = _MISSING.match(line)
        name = canonical(missing.group("name")) if missing else ""
        if not line or _INFORMATIONAL.match(line) or (missing and (name in left_out or (other and other.match(name)))):
            continue
        problems.append(line)
    return problems


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"unmet_requirements": unmet_requirements}
