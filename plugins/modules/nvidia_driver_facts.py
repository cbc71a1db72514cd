#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read what the NVIDIA driver role needs to know about a host, without changing anything."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_driver_facts
short_description: Secure Boot state, NVIDIA kernel module, GPUs and apt key fingerprints of a host
author: sglang-deploy contributors (@sglang-deploy)
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
  query_gpus:
    description: Query the GPUs with C(nvidia-smi).
    type: bool
    default: true
  container:
    description: The host is a container; take the loaded driver version from C(nvidia-smi).
    type: bool
    default: false
  key_file:
    description:
      - An OpenPGP public key file (armored or binary) whose fingerprints to report.
      - The path of a public key, not a secret, so it is logged.
    type: path
  mok_keys:
    description:
      - DKMS / MOK public key files; reports whether one of them is enrolled (C(mokutil --test-key)).
      - Paths of public keys, not secrets, so they are logged.
    type: list
    elements: path
    default: []
  packages:
    description:
      - Debian package names whose installed versions to report in RV(packages) (C(dpkg-query)).
      - The driver role's plan compares them with the pinned version before anything changes.
    type: list
    elements: str
    default: []
  sysfs:
    description: Root of sysfs (tests point it elsewhere).
    type: path
    default: /sys
notes:
  - C(mokutil) and C(modinfo) are used when they are installed.
extends_documentation_fragment: [sglang.deploy.attributes, sglang.deploy.attributes.read_only, sglang.deploy.nvidia_smi]
"""

EXAMPLES = r"""
- name: Read the host's driver state
  sglang.deploy.nvidia_driver_facts:
    key_file: /etc/apt/keyrings/nvidia-cuda.asc
    mok_keys: [/var/lib/dkms/mok.pub]
  register: __nvidia_driver_facts

- name: Read the installed and the running driver, without querying the GPUs
  sglang.deploy.nvidia_driver_facts:
    query_gpus: false
    packages: [nvidia-driver-cuda, nvidia-kernel-open-dkms, libcuda1]
  register: __nvidia_driver_now
"""

RETURN = r"""
secure_boot:
  description: The Secure Boot state.
  type: str
  returned: always
  choices: [enabled, disabled, unknown]
  sample: disabled
secure_boot_source:
  description: How the Secure Boot state was decided.
  type: str
  returned: always
  sample: "mokutil --sb-state: SecureBoot disabled"
mok_enrolled:
  description: True when one of O(mok_keys) is enrolled, false when none is, null when unknown.
  type: bool
  returned: always
  sample: null
module:
  description: The NVIDIA and nouveau kernel modules.
  type: dict
  returned: always
  contains:
    loaded:
      description: The C(nvidia) module is loaded.
      type: bool
      sample: true
    version:
      description: Version of the loaded C(nvidia) module; null when none is loaded.
      type: str
      sample: "580.95.05"
    nouveau_loaded:
      description: The C(nouveau) module is loaded.
      type: bool
      sample: false
    signer:
      description: Signer of the installed C(nvidia) module (C(modinfo -F signer)); null when unknown.
      type: str
      sample: DKMS module signing key
loaded_driver_version:
  description: Version of the running driver (the kernel module's; in a container, nvidia-smi's); null if none.
  type: str
  returned: always
  sample: "580.95.05"
nvidia_smi:
  description: What C(nvidia-smi) reported.
  type: dict
  returned: always
  contains:
    ok:
      description: It answered and its output was read.
      type: bool
      sample: true
    rc:
      description: Its exit status; null when it was not run.
      type: int
      sample: 0
    error:
      description: Why it did not answer; empty when it did.
      type: str
      sample: ""
    driver_version:
      description: The driver version all GPUs report; null when they differ or none answered.
      type: str
      sample: "580.95.05"
    gpus:
      description: One entry per GPU.
      type: list
      elements: dict
      contains:
        index:
          description: GPU index.
          type: int
          sample: 0
        name:
          description: GPU name.
          type: str
          sample: NVIDIA RTX PRO 6000 Blackwell Server Edition
        compute_cap:
          description: Compute capability.
          type: str
          sample: "12.0"
        memory_total_mib:
          description: Memory in MiB; null when not reported.
          type: int
          sample: 97887
        persistence_mode:
          description: Persistence mode.
          type: str
          sample: Enabled
        uuid:
          description: GPU UUID.
          type: str
          sample: GPU-5f3c1e2a-0000-0000-0000-000000000000
        driver_version:
          description: Driver version this GPU reports.
          type: str
          sample: "580.95.05"
packages:
  description: The installed version of each of O(packages) that is installed (C(dpkg-query)); absent ones are left out.
  type: dict
  returned: always
  sample: {"nvidia-driver-cuda": "580.95.05-1", "nvidia-kernel-open-dkms": "580.95.05-1"}
key_fingerprints:
  description: Fingerprints (upper-case hex) of the primary keys in O(key_file); empty if it is unset or unreadable.
  type: list
  elements: str
  returned: always
  sample: ["811A93906F60FC0E7A3A5B3BAA1B041702EB5817"]
"""

import base64
import binascii
import hashlib
import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils import _nvidia_smi as smi

SECURE_BOOT_VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
SMI_FIELDS = ("index", "name", "compute_cap", "memory.total", "persistence_mode", "uuid", "driver_version")


def run(module: AnsibleModule, name: str, *args: str) -> tuple[int, str] | None:
    """(exit status, stdout and stderr) of a tool through the module; None when it is not installed."""
    path = module.get_bin_path(name)
    if not path:
        return None
    rc, out, err = module.run_command([path, *args])
    return rc, out + err


def secure_boot(module: AnsibleModule, sysfs: str) -> tuple[str, str]:
    """(state, how it was decided)."""
    answer = run(module, "mokutil", "--sb-state")
    if answer is not None:
        rc, output = answer
        text = output.strip()
        lowered = text.lower()
        if "secureboot enabled" in lowered:
            return "enabled", f"mokutil --sb-state: {text}"
        if "secureboot disabled" in lowered or "not supported" in lowered:
            return "disabled", f"mokutil --sb-state: {text}"
        return "unknown", f"mokutil --sb-state (rc {rc}): {text or 'no output'}"
    return efi_secure_boot(sysfs)


def efi_secure_boot(sysfs: str) -> tuple[str, str]:
    """(state, how it was decided) without mokutil: from the firmware's SecureBoot variable."""
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


def mok_enrolled(module: AnsibleModule, keys: list[str]) -> bool | None:
    present = [key for key in keys if os.path.isfile(key)]
    if not present or not module.get_bin_path("mokutil"):
        return None
    answers = (run(module, "mokutil", "--test-key", key) for key in present)
    return any(answer is not None and "is already enrolled" in answer[1] for answer in answers)


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def kernel_module(module: AnsibleModule, sysfs: str) -> dict[str, Any]:
    modules = os.path.join(sysfs, "module")
    answer = run(module, "modinfo", "-F", "signer", "nvidia")
    return {"loaded": os.path.isdir(os.path.join(modules, "nvidia")),
            "version": read_text(os.path.join(modules, "nvidia", "version")),
            "nouveau_loaded": os.path.isdir(os.path.join(modules, "nouveau")),
            "signer": answer[1].strip() if answer and answer[0] == 0 else None}


def gpu(row: dict[str, str]) -> dict[str, Any]:
    """One GPU of nvidia-smi's row (SMI_FIELDS)."""
    return {"index": int(row["index"]), "name": row["name"], "compute_cap": row["compute_cap"],
            "memory_total_mib": smi.mib(row["memory.total"]), "persistence_mode": row["persistence_mode"],
            "uuid": row["uuid"], "driver_version": row["driver_version"]}


def nvidia_smi(module: AnsibleModule, command: str) -> dict[str, Any]:
    result: dict[str, Any] = {"ok": False, "rc": None, "error": "", "driver_version": None, "gpus": []}
    try:
        answer, rows = smi.query(module, command, SMI_FIELDS)
    except ValueError as error:
        return dict(result, rc=0, error=str(error))
    result.update(rc=answer.rc, error=answer.error)
    if not answer.ok:
        return result
    result.update(ok=True, gpus=[gpu(row) for row in rows])
    versions = sorted({row["driver_version"] for row in rows})
    result["driver_version"] = versions[0] if len(versions) == 1 else None
    return result


NOT_QUERIED = {"ok": False, "rc": None, "error": "not queried", "driver_version": None, "gpus": []}


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


def installed_packages(module: AnsibleModule, names: list[str]) -> dict[str, str]:
    """name -> version of those of `names` dpkg has installed (half-installed, removed or unknown ones left out)."""
    if not names:
        return {}
    answer = run(module, "dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n", *names)
    # dpkg-query exits 1 when some name is unknown and still lists the others (its complaint has no tabs).
    rows = [line.split("\t") for line in (answer[1] if answer else "").splitlines()]
    return {row[0]: row[1] for row in rows if len(row) == 3 and row[2][1:2] == "i" and row[0] in names}


def gather(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    kernel = kernel_module(module, params["sysfs"])
    gpus = nvidia_smi(module, params["nvidia_smi_path"]) if params["query_gpus"] else dict(NOT_QUERIED)
    state, source = secure_boot(module, params["sysfs"])
    loaded = gpus["driver_version"] if params["container"] else kernel["version"]
    return {"changed": False, "secure_boot": state, "secure_boot_source": source,
            "mok_enrolled": mok_enrolled(module, params["mok_keys"]), "module": kernel, "nvidia_smi": gpus,
            "loaded_driver_version": loaded, "key_fingerprints": key_fingerprints(params["key_file"]),
            "packages": installed_packages(module, params["packages"])}


ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "query_gpus": {"type": "bool", "default": True},
    "nvidia_smi_path": {"type": "str", "default": "nvidia-smi"},
    "container": {"type": "bool", "default": False},
    "key_file": {"type": "path", "no_log": False},  # a public key file
    "mok_keys": {"type": "list", "elements": "path", "default": [], "no_log": False},  # public key files
    "packages": {"type": "list", "elements": "str", "default": []},
    "sysfs": {"type": "path", "default": "/sys"},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**gather(module))


if __name__ == "__main__":
    main()
