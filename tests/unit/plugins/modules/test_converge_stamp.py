"""converge_stamp: a role's stamp recorded root-only, nothing written in check mode, drift read back."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.modules import converge_stamp
from helpers import ROOT
from host_commands import Commands

Runner = Callable[[Callable[[], None], dict[str, Any]], dict[str, Any]]
FIXTURES = ROOT / "tests/fixtures/host-commands"


@pytest.fixture
def host(path_commands: Commands) -> Commands:
    """The host's dpkg-query and systemctl answer as Debian 12's did (tests/fixtures/host-commands)."""
    path_commands.add("dpkg-query", (FIXTURES / "dpkg-query-status.txt").read_text(), rc=1)
    path_commands.add("systemctl", (FIXTURES / "systemctl-show-units.txt").read_text())
    return path_commands


def test_record_then_read(tmp_path: Path, host: Commands, run_module: Runner) -> None:
    managed = tmp_path / "pin"
    managed.write_text("Pin\n")
    stamps = tmp_path / "stamps"
    manifest = {"paths": [str(managed)], "packages": ["nvidia-modprobe", "no-such-package"],
                "units": ["nvidia-persistenced.service"]}
    result = run_module(converge_stamp.main, {"state": "record", "name": "nvidia_driver", "digest": "abc",
                                              "manifest": manifest, "dir": str(stamps)})
    assert result["changed"] is False and result["path"] == str(stamps / "nvidia_driver.json")
    assert stat.S_IMODE((stamps / "nvidia_driver.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(stamps.stat().st_mode) == 0o700
    written = json.loads((stamps / "nvidia_driver.json").read_text())
    assert written["observed"]["packages"] == {"nvidia-modprobe": "580.95.05-1 hi", "no-such-package": "absent"}
    assert host.calls("dpkg-query")[0][-2:] == ["no-such-package", "nvidia-modprobe"]

    read = run_module(converge_stamp.main, {"names": ["nvidia_driver", "sglang_stack"], "dir": str(stamps)})
    assert read["stamps"]["nvidia_driver"]["found"] and read["stamps"]["nvidia_driver"]["drift"] == []
    assert read["stamps"]["nvidia_driver"]["digest"] == "abc"
    assert read["stamps"]["sglang_stack"]["found"] is False
    assert read["ansible_facts"]["sglang_deploy_stamps"] == read["stamps"]

    managed.unlink()
    drift = run_module(converge_stamp.main, {"names": ["nvidia_driver"], "dir": str(stamps)})
    before = written["observed"]["paths"][str(managed)]
    assert drift["stamps"]["nvidia_driver"]["drift"] == [f"path {managed}: {before} -> absent"]


def test_check_mode_writes_nothing(tmp_path: Path, host: Commands, run_module: Runner) -> None:
    result = run_module(converge_stamp.main, {"state": "record", "name": "sglang_stack", "digest": "abc",
                                              "dir": str(tmp_path / "stamps"), "_ansible_check_mode": True})
    assert result["changed"] is False and not (tmp_path / "stamps").exists()


@pytest.mark.parametrize(("args", "message"), [
    ({"state": "record", "name": "x"}, "needs name and digest"),
    ({"state": "record", "name": "../x", "digest": "d"}, "plain file name"),
    ({"state": "record", "name": "x", "digest": "d", "manifest": {"file": ["/a"]}}, "unknown manifest kinds"),
    ({"names": ["a/b"]}, "plain file name"),
])
def test_refusals(tmp_path: Path, host: Commands, run_module: Runner, args: dict[str, Any], message: str) -> None:
    result = run_module(converge_stamp.main, {"dir": str(tmp_path), **args})
    assert result["failed"] and message in result["msg"]
