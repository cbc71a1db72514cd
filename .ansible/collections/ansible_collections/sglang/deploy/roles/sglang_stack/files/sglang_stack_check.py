"""Report whether a virtualenv holds SGLang and its companions at their pinned versions.

    <venv>/bin/python sglang_stack_check.py SGLANG_VERSION CONSTRAINTS_FILE [REQUIRED,NAMES]

Prints one JSON object: {"sglang": installed version or null, "ok": bool, "mismatches": [...]}.
SGLang must be installed at SGLANG_VERSION (a local label such as +sim or +cu130 is accepted).
A pinned companion (a name==version line of CONSTRAINTS_FILE) that is installed must be at its pin;
one that is not installed is fine (this build of SGLang does not need it), unless it is one of the
REQUIRED names (FlashInfer's prebuilt kernels): those must be installed at exactly their pin, local
label included, as FlashInfer ignores them at any other version. Reads only metadata.
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


def check(version: str, constraints: str, required: list[str] | None = None) -> dict[str, object]:
    have = installed()
    sglang = have.get("sglang")
    mismatches = []
    if sglang is None:
        mismatches.append(f"sglang is not installed (pinned {version})")
    elif sglang.split("+", 1)[0] != version:
        mismatches.append(f"sglang {sglang} (pinned {version})")
    pinned_versions = pins(constraints)
    for name in sorted(canonical(n) for n in required or []):
        if name not in pinned_versions:
            mismatches.append(f"{name} is required but the constraints pin no version of it")
        elif name not in have:
            mismatches.append(f"{name} is not installed (pinned {pinned_versions[name]})")
        elif have[name] != pinned_versions[name]:
            mismatches.append(f"{name} {have[name]} (pinned {pinned_versions[name]}, required exactly)")
    for name, pinned in sorted(pinned_versions.items()):
        if name in (canonical(n) for n in required or []):
            continue
        if name in have and have[name].split("+", 1)[0] != pinned.split("+", 1)[0]:
            mismatches.append(f"{name} {have[name]} (pinned {pinned})")
    return {"sglang": sglang, "ok": not mismatches, "mismatches": mismatches}


if __name__ == "__main__":
    print(json.dumps(check(sys.argv[1], sys.argv[2], [n for n in (sys.argv[3:4] or [""])[0].split(",") if n])))
