#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read what the NVIDIA driver role needs to know about a host, without changing anything."""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import os
import shutil
import subprocess
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: nvidia_driver_facts
short_description: Secure Boot state, NVIDIA kernel module, GPUs and apt key fingerprints of a host
description:
  - Read-only. Reports the Secure Boot state and how it was decided, whether a DKMS signing key
    is enrolled, the loaded C(nvidia) kernel module's version, whether C(nouveau) is loaded, the
    GPUs C(nvidia-smi) reports, and the fingerprints of an OpenPGP key file.
  - "Secure Boot is decided in this order: C(mokutil --sb-state) when mokutil is installed;
    otherwise no C(/sys/firmware/efi) means a legacy BIOS boot, where Secure Boot cannot be on;
    otherwise the C(SecureBoot) EFI variable. When none of these can be read the state is
    C(unknown)."
  - With O(container=true) the loaded driver version is the one C(nvidia-smi) reports, since a
    container shares the host's kernel and has no module of its own.
version_added: "1.0.0"
options:
  nvidia_smi:
    description: Query the GPUs with C(nvidia-smi).
    type: bool
    default: true
  nvidia_smi_path:
    description: The C(nvidia-smi) command.
    type: str
    default: nvidia-smi
  container:
    description: The host is a container; take the loaded driver version from C(nvidia-smi).
    type: bool
    default: false
  key_file:
    description: An OpenPGP public key file (armored or binary) whose fingerprints to report.
    type: path
  mok_keys:
    description: DKMS / MOK public key files; reports whether one of them is enrolled (C(mokutil --test-key)).
    type: list
    elements: path
    default: []
  sysfs:
    description: Root of sysfs (tests point it elsewhere).
    type: path
    default: /sys
author: sglang-deploy contributors
"""

EXAMPLES = r"""
- name: Read the host's driver state
  nvidia_driver_facts:
    key_file: /etc/apt/keyrings/nvidia-cuda.asc
    mok_keys: [/var/lib/dkms/mok.pub]
  register: __nvidia_driver_facts
"""

RETURN = r"""
secure_boot:
  description: enabled, disabled or unknown.
  type: str
  returned: always
secure_boot_source:
  description: How the Secure Boot state was decided.
  type: str
  returned: always
mok_enrolled:
  description: True when one of O(mok_keys) is enrolled, false when none is, null when unknown.
  type: bool
  returned: always
module:
  description: The kernel modules (C(loaded), C(version), C(nouveau_loaded), C(signer) of the installed module).
  type: dict
  returned: always
loaded_driver_version:
  description: Version of the running driver (the kernel module's; in a container, nvidia-smi's); null if none.
  type: str
  returned: always
nvidia_smi:
  description: C(ok), C(rc), C(error), C(driver_version) and C(gpus) (index, name, compute_cap, memory_total_mib,
    persistence_mode, uuid).
  type: dict
  returned: always
key_fingerprints:
  description: Fingerprints (upper-case hex) of the primary keys in O(key_file); empty if it is unset or unreadable.
  type: list
  elements: str
  returned: always
"""

SECURE_BOOT_VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
SMI_FIELDS = ("index", "name", "compute_cap", "memory.total", "persistence_mode", "uuid", "driver_version")


def run(argv: list[str], timeout: int = 60) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return 127, "", str(error)
    return proc.returncode, proc.stdout, proc.stderr


def secure_boot(sysfs: str) -> tuple[str, str]:
    """(state, how it was decided)."""
    if shutil.which("mokutil"):
        rc, out, err = run(["mokutil", "--sb-state"])
        text = (out + err).strip()
        lowered = text.lower()
        if "secureboot enabled" in lowered:
            return "enabled", f"mokutil --sb-state: {text}"
        if "secureboot disabled" in lowered or "not supported" in lowered:
            return "disabled", f"mokutil --sb-state: {text}"
        return "unknown", f"mokutil --sb-state (rc {rc}): {text or 'no output'}"
    efi = os.path.join(sysfs, "firmware", "efi")
    if not os.path.isdir(efi):
        return "disabled", f"no mokutil; no {efi}: legacy BIOS boot, which has no Secure Boot"
    var = os.path.join(efi, "efivars", SECURE_BOOT_VAR)
    try:
        with open(var, "rb") as handle:
            data = handle.read()
    except OSError as error:
        return "unknown", f"no mokutil; EFI boot but {var} is unreadable ({error.strerror})"
    if len(data) < 5:  # 4 bytes of attributes, then the value
        return "unknown", f"no mokutil; {var} holds {len(data)} bytes"
    return ("enabled" if data[4] == 1 else "disabled"), f"no mokutil; EFI variable {SECURE_BOOT_VAR} = {data[4]}"


def mok_enrolled(keys: list[str]) -> bool | None:
    present = [key for key in keys if os.path.isfile(key)]
    if not present or not shutil.which("mokutil"):
        return None
    for key in present:
        _, out, err = run(["mokutil", "--test-key", key])
        if "is already enrolled" in (out + err):
            return True
    return False


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def kernel_module(sysfs: str) -> dict[str, Any]:
    module = os.path.join(sysfs, "module")
    signer = None
    if shutil.which("modinfo"):
        rc, out, _ = run(["modinfo", "-F", "signer", "nvidia"])
        signer = out.strip() if rc == 0 else None
    return {"loaded": os.path.isdir(os.path.join(module, "nvidia")),
            "version": read_text(os.path.join(module, "nvidia", "version")),
            "nouveau_loaded": os.path.isdir(os.path.join(module, "nouveau")),
            "signer": signer}


def parse_smi(text: str) -> list[dict[str, Any]]:
    gpus = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if not row:
            continue
        if len(row) != len(SMI_FIELDS):
            raise ValueError(f"unexpected nvidia-smi line: {','.join(row)!r}")
        values = dict(zip(SMI_FIELDS, (cell.strip() for cell in row), strict=True))
        memory = values["memory.total"].split()[0]
        gpus.append({"index": int(values["index"]), "name": values["name"], "compute_cap": values["compute_cap"],
                     "memory_total_mib": int(memory) if memory.isdigit() else None,
                     "persistence_mode": values["persistence_mode"], "uuid": values["uuid"],
                     "driver_version": values["driver_version"]})
    return gpus


def nvidia_smi(command: str) -> dict[str, Any]:
    result: dict[str, Any] = {"ok": False, "rc": None, "error": "", "driver_version": None, "gpus": []}
    if not shutil.which(command):
        result["error"] = f"{command} is not installed"
        return result
    rc, out, err = run([command, "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"])
    result["rc"] = rc
    if rc != 0:
        result["error"] = (out + err).strip() or f"exit status {rc}"
        return result
    try:
        result["gpus"] = parse_smi(out)
    except ValueError as error:
        result["error"] = str(error)
        return result
    result["ok"] = True
    versions = sorted({gpu["driver_version"] for gpu in result["gpus"]})
    result["driver_version"] = versions[0] if len(versions) == 1 else None
    return result


def dearmor(data: bytes) -> bytes:
    """The binary packets of an OpenPGP key file, armored or not."""
    text = data.decode("ascii", errors="replace")
    if "-----BEGIN PGP" not in text:
        return data
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("-----BEGIN PGP"))
    body, in_headers = [], True
    for line in lines[start + 1:]:
        if line.startswith("-----END PGP"):
            break
        if in_headers:
            if not line.strip():
                in_headers = False
            elif ":" not in line:  # no armor headers at all
                in_headers = False
                body.append(line.strip())
            continue
        if line.startswith("="):  # CRC-24 checksum line
            break
        body.append(line.strip())
    return base64.b64decode("".join(body))


def packets(data: bytes) -> list[tuple[int, bytes]]:
    """(tag, body) of each OpenPGP packet (RFC 4880 old and new formats)."""
    out, pos = [], 0
    while pos < len(data):
        first = data[pos]
        if not first & 0x80:
            raise ValueError("not an OpenPGP packet")
        if first & 0x40:  # new format
            tag, pos = first & 0x3F, pos + 1
            length_octet = data[pos]
            if length_octet < 192:
                length, pos = length_octet, pos + 1
            elif length_octet < 224:
                length, pos = ((length_octet - 192) << 8) + data[pos + 1] + 192, pos + 2
            elif length_octet == 255:
                length, pos = int.from_bytes(data[pos + 1:pos + 5], "big"), pos + 5
            else:
                raise ValueError("partial body lengths do not occur in keys")
        else:
            tag, kind, pos = (first >> 2) & 0x0F, first & 0x03, pos + 1
            size = {0: 1, 1: 2, 2: 4}.get(kind)
            if size is None:
                raise ValueError("indeterminate packet length")
            length, pos = int.from_bytes(data[pos:pos + size], "big"), pos + size
        out.append((tag, data[pos:pos + length]))
        pos += length
    return out


def fingerprints(data: bytes) -> list[str]:
    """Fingerprints of the primary public keys (tag 6): v4 SHA-1, v6 SHA-256 (RFC 9580)."""
    result = []
    for tag, body in packets(dearmor(data)):
        if tag != 6 or not body:
            continue
        if body[0] == 4:
            digest = hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest()
        elif body[0] in (5, 6):
            prefix = b"\x9a" if body[0] == 5 else b"\x9b"
            digest = hashlib.sha256(prefix + len(body).to_bytes(4, "big") + body).hexdigest()
        else:
            continue
        result.append(digest.upper())
    return result


def key_fingerprints(path: str | None) -> list[str]:
    if not path:
        return []
    try:
        with open(path, "rb") as handle:
            return fingerprints(handle.read())
    except (OSError, ValueError, IndexError, binascii.Error):
        return []


def gather(params: dict[str, Any]) -> dict[str, Any]:
    state, source = secure_boot(params["sysfs"])
    module = kernel_module(params["sysfs"])
    smi = nvidia_smi(params["nvidia_smi_path"]) if params["nvidia_smi"] else {
        "ok": False, "rc": None, "error": "not queried", "driver_version": None, "gpus": []}
    loaded = smi["driver_version"] if params["container"] else module["version"]
    return {"changed": False, "secure_boot": state, "secure_boot_source": source,
            "mok_enrolled": mok_enrolled(params["mok_keys"]), "module": module, "nvidia_smi": smi,
            "loaded_driver_version": loaded, "key_fingerprints": key_fingerprints(params["key_file"])}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "bool", "default": True},
            "nvidia_smi_path": {"type": "str", "default": "nvidia-smi"},
            "container": {"type": "bool", "default": False},
            "key_file": {"type": "path"},
            "mok_keys": {"type": "list", "elements": "path", "default": []},
            "sysfs": {"type": "path", "default": "/sys"},
        },
        supports_check_mode=True,
    )
    module.exit_json(**gather(module.params))


if __name__ == "__main__":
    main()
