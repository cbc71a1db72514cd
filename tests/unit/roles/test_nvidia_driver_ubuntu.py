"""nvidia_driver on Ubuntu: the package names the role installs there exist in Canonical's 580 packaging, and the
one that ships nvidia-persistenced is among them (tests/fixtures/ubuntu: never deployed to in CI)."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest
import yaml
from helpers import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "ubuntu"
VARS = yaml.safe_load((ROOT / "roles" / "nvidia_driver" / "vars" / "main.yml").read_text())


def binary_packages(control: Path) -> dict[str, str]:
    """debian/control's binary stanzas: package -> its Provides line."""
    packages = {}
    for stanza in control.read_text().split("\n\n"):
        name = re.search(r"^Package:\s*(\S+)", stanza, re.MULTILINE)
        if name:
            provides = re.search(r"^Provides:\s*(.*)$", stanza, re.MULTILINE)
            packages[name.group(1)] = provides.group(1) if provides else ""
    return packages


def ubuntu_packages(branch: str) -> list[str]:
    """The role's Ubuntu package list, rendered as Ansible renders its vars for nvidia_driver_branch."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    suffix = env.from_string(VARS["__nvidia_driver_ubuntu_suffix"]).render(nvidia_driver_branch=branch)
    return [env.from_string(item).render(__nvidia_driver_ubuntu_suffix=suffix)
            for item in VARS["__nvidia_driver_ubuntu_packages"]]


@pytest.mark.parametrize("release", ["580-jammy", "580-noble"])
def test_the_ubuntu_package_names_exist_in_canonicals_packaging(release: str) -> None:
    packages = binary_packages(FIXTURES / f"nvidia-graphics-drivers-{release}.control")
    wanted = ubuntu_packages("580")
    assert wanted == ["libnvidia-compute-580", "nvidia-dkms-580-open", "nvidia-utils-580",
                      "nvidia-compute-utils-580", "nvidia-modprobe"]
    missing = [name for name in wanted if name not in packages and name != "nvidia-modprobe"]  # NVIDIA's own
    assert not missing, missing
    # The open kernel modules (Blackwell needs them), and the persistence daemon comes with the compute utilities.
    assert "nvidia-dkms-580-open" in packages and "nvidia-dkms-580" in packages
    assert "nvidia-persistenced" in packages["nvidia-compute-utils-580"]


def test_both_ubuntu_releases_take_the_same_list() -> None:
    platforms = VARS["__nvidia_driver_platforms"]
    assert platforms["Ubuntu-22.04"] == {"repo": "ubuntu2204", "packages": "{{ __nvidia_driver_ubuntu_packages }}"}
    assert platforms["Ubuntu-24.04"] == {"repo": "ubuntu2404", "packages": "{{ __nvidia_driver_ubuntu_packages }}"}
