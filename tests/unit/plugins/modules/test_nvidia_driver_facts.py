"""nvidia_driver_facts: Secure Boot, kernel modules, nvidia-smi and key fingerprints, read-only."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.modules import nvidia_driver_facts as facts
from helpers import ROOT
from host_commands import Commands

FAKE_SMI = ROOT / "extensions/molecule/resources/nvidia-smi/nvidia-smi"
VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

# Throwaway public keys made with gpg 2.2 for these tests (no private half exists anywhere).
RSA_KEY = """-----BEGIN PGP PUBLIC KEY BLOCK-----

mQENBGsMBV0BCADhPUhZ12aGCilpuTJ5yzh/bv+AzWC7bATi5t8ptQpufyFc56j4
q2boqa4V88EjNunRQE0rIulpnwOJgMrzAfxhZz7vuoeJ29ZDKOQCbnrBjDgpDLGY
0k/8ZE2mlsgRrg/qxuQM6OhaVnxUEsHzDUkq6L0lOdlWZa0HwSb7hPabPKoEOmpP
4f8Urxs3JdkSOQXCALOpnZqIsqEOIwYJhGODR7U56nDB+/nf9spsEXswnpUT0ES9
YZkzN7FAYNUM3xSztA//U3+FIQYcgBbt7aOCzeODQ+183UKRLKuCYPqMRWVn7PDK
3RPMw1itUG8glaM/UZmgNY9gdRVxjx3OyfVpABEBAAG0OnNnbGFuZy1kZXBsb3kg
dGVzdCBmaXh0dXJlIDxmaXh0dXJlQHNnbGFuZy1kZXBsb3kuaW52YWxpZD6JAU4E
EwEKADgWIQSBGpOQb2D8Dno6WzuqGwQXAutYFwUCawwFXQIbAwULCQgHAgYVCgkI
CwIEFgIDAQIeAQIXgAAKCRCqGwQXAutYFxsiCADA9dLOqHx+JilI5GKBFWTf/JFW
gVvQySbOjTQcSPYwYKO2V9coFsBVr6n1vKCSl0YkHIC/z86OUVkq7hLouCpTZ/U7
tgZAL9jujw9Ms0si4c6BCwRfw53RBQXzgRKS0vAP+oL2Tw637AhIilfDgLHNTV7m
uU2FqMVVuboBRWwFPoGiU6fhcaN9OhAIbMv2MiR01HMshIEOAdCPf+1g3rHOO99z
xxVYYkT7BCn18lhV8GgYxrWUnxT/Vk+FfuJxgN4dP80G9heDaJCs+1AkJdjNHGs3
8srVm+rqUaFh/HgQYeO6v64kSVL9jaee6WrjjxnjVzexm+jWOoO9GlFoY8lI
=u5sP
-----END PGP PUBLIC KEY BLOCK-----
"""
RSA_FINGERPRINT = "811A93906F60FC0E7A3A5B3BAA1B041702EB5817"
ED25519_KEY = """-----BEGIN PGP PUBLIC KEY BLOCK-----

mDMEawv/EhYJKwYBBAHaRw8BAQdALcIZB+68R2B/QRwRWONJmw2Q6vwLXL5Dlpkm
/h0yGgC0VXNnbGFuZy1kZXBsb3kgc2FuZGJveCByZXBvc2l0b3J5ICh0aHJvd2F3
YXkgdGVzdCBrZXkpIDxzYW5kYm94QHNnbGFuZy1kZXBsb3kuaW52YWxpZD6IkAQT
FggAOBYhBLigLT94Gl6wbn1X6Ulbb1mct4jkBQJrC/8SAhsDBQsJCAcCBhUKCQgL
AgQWAgMBAh4BAheAAAoJEElbb1mct4jkOnYA/RhOoI7fQhKRqQY4sgSZHFaxVki2
B2Pqw2eGN5lYyh8OAQC11ry8KqmhXunkOnDzVemfmDr6OApTsCDsk7w7IQWhDA==
=Z0pz
-----END PGP PUBLIC KEY BLOCK-----
"""
ED25519_FINGERPRINT = "B8A02D3F781A5EB06E7D57E9495B6F599CB788E4"


def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any] | None) -> str:
    """The sandbox's fake nvidia-smi, configured by a JSON file."""
    if config is not None:
        (tmp_path / "smi.json").write_text(json.dumps(config))
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CONFIG", str(tmp_path / "smi.json"))
    os.chmod(FAKE_SMI, 0o755)
    return str(FAKE_SMI)


@pytest.mark.parametrize(("key", "expected"), [(RSA_KEY, RSA_FINGERPRINT), (ED25519_KEY, ED25519_FINGERPRINT)],
                         ids=["rsa", "ed25519"])
def test_fingerprints_of_armored_and_binary_keys(key: str, expected: str) -> None:
    assert facts.fingerprints(key.encode()) == [expected]
    assert facts.fingerprints(facts.dearmor(key.encode())) == [expected]
    with_header = key.replace("-----\n\n", "-----\nComment: a mirror's copy\n\n", 1)
    assert facts.fingerprints(with_header.encode()) == [expected]


def test_new_format_packets_are_read() -> None:
    body = facts.packets(facts.dearmor(RSA_KEY.encode()))[0][1]
    assert len(body) < 8384  # fits a two-octet new-format length
    length = len(body) - 192
    packet = bytes([0xC6, (length >> 8) + 192, length & 0xFF]) + body
    assert facts.fingerprints(packet) == [RSA_FINGERPRINT]


def test_unreadable_key_files_have_no_fingerprint(tmp_path: Path) -> None:
    (tmp_path / "html").write_text("<html>404 Not Found</html>")
    assert facts.key_fingerprints(str(tmp_path / "html")) == []
    assert facts.key_fingerprints(str(tmp_path / "absent")) == []
    assert facts.key_fingerprints(None) == []


def test_secure_boot_without_mokutil(tmp_path: Path, commands: Commands) -> None:
    state, source = facts.secure_boot(commands.module, str(tmp_path))
    assert state == "disabled" and "legacy BIOS boot" in source
    efivars = tmp_path / "firmware" / "efi" / "efivars"
    efivars.mkdir(parents=True)
    assert facts.secure_boot(commands.module, str(tmp_path))[0] == "unknown"
    (efivars / VAR).write_bytes(b"\x06\x00\x00\x00\x01")
    assert facts.secure_boot(commands.module, str(tmp_path)) == ("enabled", f"no mokutil; EFI variable {VAR} = 1")
    (efivars / VAR).write_bytes(b"\x06\x00\x00\x00\x00")
    assert facts.secure_boot(commands.module, str(tmp_path))[0] == "disabled"


@pytest.mark.parametrize(("output", "state"), [
    ("SecureBoot enabled\n", "enabled"), ("SecureBoot disabled\n", "disabled"),
    ("EFI variables are not supported on this system\n", "disabled"), ("", "unknown")])
def test_secure_boot_from_mokutil(commands: Commands, output: str, state: str) -> None:
    commands.add("mokutil", stdout=output)
    assert facts.secure_boot(commands.module, "/nonexistent")[0] == state
    assert commands.calls("mokutil") == [["--sb-state"]]


def test_mok_enrollment(tmp_path: Path, commands: Commands) -> None:
    key = tmp_path / "mok.pub"
    assert facts.mok_enrolled(commands.module, [str(key)]) is None  # no key file
    key.write_bytes(b"der")
    assert facts.mok_enrolled(commands.module, [str(key)]) is None  # no mokutil
    commands.add("mokutil", stdout=f"{key} is not enrolled\n")
    assert facts.mok_enrolled(commands.module, [str(key)]) is False
    commands.add("mokutil", stderr=f"{key} is already enrolled\n", rc=1)
    assert facts.mok_enrolled(commands.module, [str(key)]) is True
    assert commands.calls("mokutil")[-1] == ["--test-key", str(key)]


def test_kernel_modules_from_sysfs(tmp_path: Path, commands: Commands) -> None:
    assert facts.kernel_module(commands.module, str(tmp_path))["loaded"] is False
    (tmp_path / "module" / "nvidia").mkdir(parents=True)
    (tmp_path / "module" / "nvidia" / "version").write_text("580.95.05\n")
    (tmp_path / "module" / "nouveau").mkdir()
    module = facts.kernel_module(commands.module, str(tmp_path))
    assert (module["loaded"], module["version"], module["nouveau_loaded"], module["signer"]) == (
        True, "580.95.05", True, None)
    commands.add("modinfo", stdout="DKMS module signing key\n")
    assert facts.kernel_module(commands.module, str(tmp_path))["signer"] == "DKMS module signing key"
    assert commands.calls("modinfo") == [["-F", "signer", "nvidia"]]


def test_gpus_from_the_sandbox_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commands: Commands) -> None:
    smi = facts.nvidia_smi(commands.module, fake_smi(tmp_path, monkeypatch, None))
    assert smi["ok"] and smi["rc"] == 0 and smi["driver_version"] == "580.95.05" and len(smi["gpus"]) == 8
    assert smi["gpus"][7] == {"index": 7, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "compute_cap": "12.0",
                              "memory_total_mib": 97887, "persistence_mode": "Enabled",
                              "uuid": smi["gpus"][7]["uuid"], "driver_version": "580.95.05"}
    smi = facts.nvidia_smi(commands.module, fake_smi(tmp_path, monkeypatch, {"gpus": [{}] * 7,
                                                                             "driver_version": "580.105.08"}))
    assert len(smi["gpus"]) == 7 and smi["driver_version"] == "580.105.08"


def test_nvidia_smi_failures_are_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commands: Commands) -> None:
    smi = facts.nvidia_smi(commands.module, fake_smi(tmp_path, monkeypatch, {"driver_loaded": False}))
    assert not smi["ok"] and smi["rc"] == 9 and "couldn't communicate with the NVIDIA driver" in smi["error"]
    absent = facts.nvidia_smi(commands.module, str(tmp_path / "absent"))
    assert absent["rc"] is None and absent["error"].endswith("is not installed")
    commands.add("nvidia-smi", stdout="0, NVIDIA L40S, 8.9\n")  # three cells for seven fields
    odd = facts.nvidia_smi(commands.module, "nvidia-smi")
    assert not odd["ok"] and odd["error"].startswith("unexpected nvidia-smi line")


def test_module_in_a_container_reads_the_running_driver_from_nvidia_smi(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commands: Commands, run_module: Any) -> None:
    monkeypatch.setattr(facts.AnsibleModule, "get_bin_path", lambda self, arg, *args, **kwargs:
                        commands.get_bin_path(arg))
    smi = fake_smi(tmp_path, monkeypatch, {"driver_version": "580.105.08"})
    (tmp_path / "key.asc").write_text(RSA_KEY)
    args = {"nvidia_smi_path": smi, "container": True, "sysfs": str(tmp_path), "key_file": str(tmp_path / "key.asc"),
            "_ansible_check_mode": True}
    result = run_module(facts.main, args)
    assert result["changed"] is False and result["secure_boot"] == "disabled"
    assert result["loaded_driver_version"] == "580.105.08" and result["module"]["loaded"] is False
    assert result["key_fingerprints"] == [RSA_FINGERPRINT]
    assert run_module(facts.main, {**args, "container": False})["loaded_driver_version"] is None  # no module here


def test_the_gpu_query_can_be_turned_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commands: Commands, run_module: Any) -> None:
    monkeypatch.setattr(facts.AnsibleModule, "get_bin_path", lambda self, arg, *args, **kwargs:
                        commands.get_bin_path(arg))
    result = run_module(facts.main, {"query_gpus": False, "sysfs": str(tmp_path)})
    assert result["nvidia_smi"]["error"] == "not queried"


def test_fixture_keys_are_public_only() -> None:
    for key in (RSA_KEY, ED25519_KEY):
        tags = {packet[0] for packet in facts.packets(facts.dearmor(key.encode()))}
        assert "PRIVATE" not in key and 6 in tags and not tags & {5, 7}  # no secret (sub)key packets


def test_installed_driver_packages_from_dpkg_query(path_commands: Commands, run_module: Any, tmp_path: Path) -> None:
    # dpkg-query -W lists what it knows (a removed package keeps its "rc" row) and exits 1 for a name it does not.
    path_commands.add("dpkg-query", rc=1, stderr="dpkg-query: no packages found matching libcuda1\n",
                      stdout="nvidia-driver-cuda\t580.95.05-1\thi \nnvidia-kernel-open-dkms\t580.95.05-1\tii \n"
                             "nvidia-persistenced\t580.95.05-1\trc \n")
    result = run_module(facts.main, {"query_gpus": False, "sysfs": str(tmp_path),
                                     "packages": ["nvidia-driver-cuda", "nvidia-kernel-open-dkms",
                                                  "nvidia-persistenced", "libcuda1"]})
    assert result["packages"] == {"nvidia-driver-cuda": "580.95.05-1", "nvidia-kernel-open-dkms": "580.95.05-1"}
    assert path_commands.calls("dpkg-query")[0][:3] == ["-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n"]
    assert run_module(facts.main, {"query_gpus": False, "sysfs": str(tmp_path)})["packages"] == {}
    assert len(path_commands.calls("dpkg-query")) == 1  # no names, no call


def test_the_sandbox_nvidia_smi_reports_the_driver_its_last_boot_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commands: Commands) -> None:
    """molecule/resources/nvidia-smi: the driver changes only at a boot (nvidia-module-load writes it)."""
    module = tmp_path / "nvidia-module"
    monkeypatch.setenv("FAKE_NVIDIA_MODULE", str(module))
    smi = fake_smi(tmp_path, monkeypatch, None)
    assert facts.nvidia_smi(commands.module, smi)["driver_version"] == "580.95.05"  # no boot has loaded one
    module.write_text("580.105.08\n")
    assert facts.nvidia_smi(commands.module, smi)["driver_version"] == "580.105.08"
    module.write_text("failed\n")  # the drill's module that does not load
    failed = facts.nvidia_smi(commands.module, smi)
    assert not failed["ok"] and failed["rc"] == 9 and "couldn't communicate with the NVIDIA driver" in failed["error"]
    # The JSON file, when it sets the driver, wins (the install scenario's drills set it).
    explicit = fake_smi(tmp_path, monkeypatch, {"driver_version": "580.105.08", "driver_loaded": True})
    assert facts.nvidia_smi(commands.module, explicit)["ok"]


def test_the_sandbox_module_load_reads_the_installed_package(tmp_path: Path, path_commands: Commands) -> None:
    script = ROOT / "extensions/molecule/resources/nvidia-smi/nvidia-module-load"
    text = script.read_text().replace("/run/sglang-sim", str(tmp_path / "run")).replace(
        "/etc/sglang-sim", str(tmp_path / "etc"))
    (tmp_path / "load").write_text(text)
    loaded = tmp_path / "run/nvidia-module"
    for answer, expected in (("", None), ("rc  580.95.05-1", None), ("ii  580.105.08-1", "580.105.08\n"),
                             ("hi  580.95.05-1", "580.95.05\n")):
        loaded.unlink(missing_ok=True)
        path_commands.add("dpkg-query", stdout=answer, rc=0 if answer else 1)
        subprocess.run(["sh", str(tmp_path / "load")], check=True, capture_output=True)
        assert (loaded.read_text() if loaded.exists() else None) == expected, answer
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/drill-module-fails-to-load").touch()
    subprocess.run(["sh", str(tmp_path / "load")], check=True, capture_output=True)
    assert loaded.read_text() == "failed\n"
