"""Role nvidia_driver's preflight collects every reason to refuse a host (nvidia_driver_refusals) and refuses them in
one message - or, with nvidia_driver_preflight_refuse false, only publishes them, for deploy.yml to refuse with the
plan's once the whole rollout plan is printed (docs/maintenance.md, "The deploy plan").

Runs the entry point on this machine (Debian 12, a supported platform) as a declared container, so that neither the
platform nor the container check refuses it whatever this machine is; its reads (dpkg, /sys, nvidia-smi where there
is one) change nothing. The settings checks give the refusals. The install scenario's Secure Boot drill refuses a
host in a container with a fake mokutil.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import run_example

PLAY = """
- name: The driver's preflight, as deploy.yml's validation play runs it
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Preflight
      ansible.builtin.import_role:
        name: nvidia_driver
        tasks_from: preflight
    - name: Keep what it published
      ansible.builtin.copy:
        dest: "{{ test_out }}/published.json"
        content: "{{ {'refusals': nvidia_driver_refusals, 'plan': nvidia_driver_plan} | to_json }}"
        mode: "0600"
"""


def preflight(tmp_path: Path, **variables: Any) -> tuple[int, str, dict[str, Any] | None]:
    playbook = tmp_path / "preflight.yml"
    playbook.write_text(PLAY)
    extra = {"test_out": str(tmp_path), "nvidia_driver_container": True, "ansible_python_interpreter": sys.executable,
             **variables}
    proc = run_example(str(playbook), "-i", "localhost,", "-c", "local", "-e", json.dumps(extra))
    published = tmp_path / "published.json"
    return proc.returncode, proc.stdout + proc.stderr, json.loads(published.read_text()) if published.exists() else None


BAD = {"nvidia_driver_branch": "570", "nvidia_driver_version": "570.195.03"}


def test_the_reasons_are_published_and_not_refused_when_the_caller_refuses(tmp_path: Path) -> None:
    rc, out, published = preflight(tmp_path, nvidia_driver_preflight_refuse=False, **BAD)
    assert rc == 0 and published is not None, out[-3000:]
    assert any("nvidia_driver_branch must be a driver branch of 580 or newer" in reason
               for reason in published["refusals"]), published
    assert published["plan"]["pin"] == "570.195.03" and published["plan"]["reboot_policy"] == "auto", published


def test_the_role_alone_refuses_every_reason_in_one_message(tmp_path: Path) -> None:
    rc, out, published = preflight(tmp_path, **BAD)
    assert rc != 0 and published is None, out[-3000:]
    assert "localhost: the NVIDIA driver is refused, nothing was changed:" in out, out[-3000:]
    assert "nvidia_driver_branch must be a driver branch of 580 or newer" in out, out[-3000:]


def test_good_settings_on_a_supported_platform_give_no_refusal(tmp_path: Path) -> None:
    rc, out, published = preflight(tmp_path)
    assert rc == 0 and published is not None and published["refusals"] == [], out[-3000:]


def test_secure_boot_with_a_module_that_would_be_unsigned_is_among_the_reasons(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mokutil says Secure Boot is on and no DKMS signing key is there (a path that does not exist): refused with
    the settings' reasons in the same list; a module signed another way is not."""
    fake = tmp_path / "bin" / "mokutil"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n[ \"$1\" = --sb-state ] && echo 'SecureBoot enabled'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    keys = [str(tmp_path / "no-such-mok.pub")]
    rc, out, published = preflight(tmp_path, nvidia_driver_preflight_refuse=False, nvidia_driver_mok_keys=keys, **BAD)
    assert rc == 0 and published is not None, out[-3000:]
    assert published["refusals"][-1].startswith(
        "Secure Boot is enabled on localhost (mokutil --sb-state: SecureBoot enabled), and the NVIDIA kernel module "
        f"that DKMS builds would not be signed with an enrolled key (no DKMS signing key found among {keys[0]}), so "
        "it would not load."), published["refusals"]
    assert any("nvidia_driver_branch" in reason for reason in published["refusals"][:-1]), published["refusals"]
    assert all("\n" not in reason and "  " not in reason for reason in published["refusals"]), published["refusals"]
    rc, out, published = preflight(tmp_path, nvidia_driver_preflight_refuse=False, nvidia_driver_mok_keys=keys,
                                   nvidia_driver_module_signed=True)
    assert rc == 0 and published is not None and published["refusals"] == [], out[-3000:]
