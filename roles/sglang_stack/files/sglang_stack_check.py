"""Report whether a virtualenv holds SGLang and its companions at their pinned versions.

    <venv>/bin/python sglang_stack_check.py SGLANG_VERSION CONSTRAINTS_FILE

Prints one JSON object: {"sglang": installed version or null, "ok": bool, "mismatches": [...]}.
SGLang must be installed at SGLANG_VERSION (a local label such as +sim or +cu130 is accepted).
A pinned companion (a name==version line of CONSTRAINTS_FILE) that is installed must be at its pin;
one that is not installed is fine (this build of SGLang does not need it). Reads only metadata.
"""

from __future__ import annotations

import json
import re
import sys
from importlib import metadata


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, str]:
    return {canonical(dist.metadata["Name"]): dist.version for dist in metadata.distributions()
            if dist.metadata["Name"]}


def pins(path: str) -> dict[str, str]:
    result = {}
    with open(path, encoding="utf-8") as handle:
        for raw in handle:
            line = raw.split("#", 1)[0].strip()
            match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*==\s*(\S+)", line)
            if match:
                result[canonical(match.group(1))] = match.group(3)
    return result


def check(version: str, constraints: str) -> dict[str, object]:
    have = installed()
    sglang = have.get("sglang")
    mismatches = []
    if sglang is None:
        mismatches.append(f"sglang is not installed (pinned {version})")
    elif sglang.split("+", 1)[0] != version:
        mismatches.append(f"sglang {sglang} (pinned {version})")
    for name, pinned in sorted(pins(constraints).items()):
        if name in have and have[name].split("+", 1)[0] != pinned.split("+", 1)[0]:
            mismatches.append(f"{name} {have[name]} (pinned {pinned})")
    return {"sglang": sglang, "ok": not mismatches, "mismatches": mismatches}


if __name__ == "__main__":
    print(json.dumps(check(sys.argv[1], sys.argv[2])))
