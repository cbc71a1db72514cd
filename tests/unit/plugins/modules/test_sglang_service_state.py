"""sglang_service_state: the deployed files' SHA-1 (null when missing) and the unit's state, in one call."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.filter import restart
from ansible_collections.sglang.deploy.plugins.modules import sglang_service_state
from host_commands import Commands

Runner = Callable[[Callable[[], None], dict[str, Any]], dict[str, Any]]
SHOW = "LoadState=loaded\nActiveState=active\n"


@pytest.fixture
def host(path_commands: Commands) -> Commands:
    path_commands.add("systemctl", SHOW)
    return path_commands


def test_checksums_and_unit_in_one_call(tmp_path: Path, host: Commands, run_module: Runner) -> None:
    unit = tmp_path / "sglang-kimi.service"
    unit.write_text("[Service]\n")
    missing = tmp_path / "kimi.env"
    result = run_module(sglang_service_state.main, {"unit": "sglang-kimi.service",
                                                    "files": [str(unit), str(missing)]})
    assert result["changed"] is False
    assert result["files"] == {str(unit): hashlib.sha1(b"[Service]\n").hexdigest(), str(missing): None}
    assert result["unit"] == {"LoadState": "loaded", "ActiveState": "active"}
    assert result["running"] is None  # the stub's unit has no MainPID
    assert host.calls("systemctl") == [["show", "-p", "LoadState,ActiveState,MainPID,ExecMainStartTimestampMonotonic,"
                                        "NeedDaemonReload", "--", "sglang-kimi.service"]]


def test_properties_asked_for(host: Commands, run_module: Runner) -> None:
    run_module(sglang_service_state.main, {"unit": "u.service", "properties": ["ActiveState", "NRestarts"]})
    assert host.calls("systemctl") == [["show", "-p", "ActiveState,NRestarts", "--", "u.service"]]


def test_an_unreadable_file_is_an_error_not_a_missing_one(tmp_path: Path, host: Commands,
                                                          run_module: Runner) -> None:
    result = run_module(sglang_service_state.main, {"unit": "u.service", "files": [str(tmp_path)]})
    assert result["failed"] and str(tmp_path) in result["msg"]


def test_systemctl_failing_fails_the_module(path_commands: Commands, run_module: Runner) -> None:
    path_commands.add("systemctl", stderr="Failed to connect to bus", rc=1)
    result = run_module(sglang_service_state.main, {"unit": "u.service"})
    assert result["failed"] and "Failed to connect to bus" in result["msg"]


def test_drifted_files_compares_renderings_with_the_host() -> None:
    files = [{"dest": "/etc/a", "template": "a.j2"}, {"dest": "/etc/b", "template": "b.j2"},
             {"dest": "/etc/c", "template": "c.j2"}]
    checksums = {"/etc/a": hashlib.sha1("same ✓\n".encode()).hexdigest(), "/etc/b": "0" * 40, "/etc/c": None}
    assert restart.drifted_files(files, ["same ✓\n", "other", "new"], checksums) == ["/etc/b", "/etc/c"]
    assert restart.drifted_files([], [], {}) == []
    with pytest.raises(restart.AnsibleFilterError, match="2 files but 1 renderings"):
        restart.drifted_files(files[:2], ["x"], checksums)


def test_a_pending_reboot_and_the_packages_that_asked_for_it(tmp_path: Path, host: Commands,
                                                             run_module: Runner) -> None:
    flag = tmp_path / "reboot-required"
    args = {"unit": "sglang-kimi.service", "reboot_required_file": str(flag)}
    assert run_module(sglang_service_state.main, args)["reboot"] == {"required": False, "packages": []}
    # Debian's kernel postinst hook (/etc/kernel/postinst.d/unattended-upgrades, update-notifier-common on
    # Ubuntu) writes both files; a package may be listed twice.
    flag.write_text("*** System restart required ***\n")
    (tmp_path / "reboot-required.pkgs").write_text(
        "linux-image-6.1.0-41-amd64\nlinux-base\nlinux-image-6.1.0-41-amd64\n")
    assert run_module(sglang_service_state.main, args)["reboot"] == {
        "required": True, "packages": ["linux-base", "linux-image-6.1.0-41-amd64"]}
