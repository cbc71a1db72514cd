"""nvidia_driver: the persistence daemon starts at boot on every distribution, Ubuntu's static unit included."""

from __future__ import annotations

import configparser

import jinja2
import pytest
from helpers import ROOT

FIXTURES = ROOT / "tests/fixtures/nvidia-persistenced"
TEMPLATE = ROOT / "roles/nvidia_driver/templates/nvidia-device-nodes.service.j2"


def sections(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


def device_node_unit(persistence: bool) -> configparser.ConfigParser:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True)
    env.filters["comment"] = lambda text: "# " + text
    return sections(env.from_string(TEMPLATE.read_text()).render(
        ansible_managed="managed", nvidia_driver_persistence_mode=persistence,
        nvidia_driver_proc_dir="/proc/driver/nvidia", __nvidia_driver_device_nodes_script="/usr/local/sbin/x"))


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.service")), ids=lambda path: path.name)
def test_ubuntus_unit_cannot_be_enabled(path: object) -> None:
    """What makes the Wants= necessary: `systemctl enable` of a unit without [Install] does nothing."""
    unit = sections(path.read_text())  # type: ignore[attr-defined]
    assert not unit.has_section("Install") and unit["Unit"]["StopWhenUnneeded"] == "true"


def test_the_enabled_device_node_unit_wants_the_daemon() -> None:
    unit = device_node_unit(True)
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    assert unit["Unit"]["Wants"] == "nvidia-persistenced.service"
    assert "nvidia-persistenced.service" in unit["Unit"]["After"].split()


def test_without_persistence_mode_it_wants_nothing() -> None:
    unit = device_node_unit(False)
    assert "Wants" not in unit["Unit"] and "nvidia-persistenced" not in unit["Unit"]["After"]
