"""What the running server was started from (_service_state.running_state): its argv, its start against the
deployed files' mtimes, and whether systemd still has an older unit file loaded."""

from __future__ import annotations

import os
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.module_utils import _service_state

WALL, MONOTONIC = 1_796_425_700.0, 5_000.0  # the host's clocks "now"
STARTED_US = int((MONOTONIC - 100.0) * 1e6)    # the main process started 100 s ago
STARTED = WALL - 100.0


def unit(**changes: str) -> dict[str, str]:
    return {"ActiveState": "active", "MainPID": "4242", "ExecMainStartTimestampMonotonic": str(STARTED_US),
            "NeedDaemonReload": "no", **changes}


def proc_with(tmp_path: Path, argv: list[str]) -> str:
    (tmp_path / "proc" / "4242").mkdir(parents=True)
    (tmp_path / "proc" / "4242" / "cmdline").write_bytes(b"\0".join(word.encode() for word in argv) + b"\0")
    return str(tmp_path / "proc")


def deployed_file(tmp_path: Path, name: str, modified: float) -> str:
    path = tmp_path / name
    path.write_text(name)
    os.utime(path, (modified, modified))
    return str(path)


def test_files_written_before_the_start_are_what_it_runs(tmp_path: Path) -> None:
    proc = proc_with(tmp_path, ["/opt/venv/bin/python", "-m", "sglang.launch_server", "--x", "a b"])
    files = [deployed_file(tmp_path, "sglang-kimi.service", STARTED - 30),
             deployed_file(tmp_path, "kimi.env", STARTED - 1)]
    state = _service_state.running_state(unit(), [*files, str(tmp_path / "missing.yaml")], proc, (WALL, MONOTONIC))
    assert state == {"pid": 4242, "argv": ["/opt/venv/bin/python", "-m", "sglang.launch_server", "--x", "a b"],
                     "started": STARTED, "need_daemon_reload": False, "changed_after_start": []}


def test_a_file_written_after_the_start_and_a_unit_not_reloaded_are_reported(tmp_path: Path) -> None:
    """A deploy that wrote the new files and died before the restart."""
    proc = proc_with(tmp_path, ["python"])
    env = deployed_file(tmp_path, "kimi.env", STARTED + 40)
    state = _service_state.running_state(unit(NeedDaemonReload="yes"), [env], proc, (WALL, MONOTONIC))
    assert state is not None and state["changed_after_start"] == [env] and state["need_daemon_reload"] is True


def test_nothing_runs_nothing_to_compare(tmp_path: Path) -> None:
    for props in (unit(ActiveState="inactive"), unit(ActiveState="failed"), unit(MainPID="0"), unit(MainPID="")):
        assert _service_state.running_state(props, [], str(tmp_path), (WALL, MONOTONIC)) is None


def test_an_unreadable_argv_or_an_unknown_start_leaves_that_evidence_out(tmp_path: Path) -> None:
    env = deployed_file(tmp_path, "kimi.env", STARTED + 40)
    state = _service_state.running_state(unit(ExecMainStartTimestampMonotonic="0"), [env], str(tmp_path),
                                         (WALL, MONOTONIC))
    assert state == {"pid": 4242, "argv": None, "started": None, "need_daemon_reload": False,
                     "changed_after_start": []}


def test_the_deployed_state_carries_the_running_server(tmp_path: Path) -> None:
    state = _service_state.deployed_state([], {"ActiveState": "inactive"}, str(tmp_path / "reboot-required"))
    assert state == {"files": {}, "unit": {"ActiveState": "inactive"}, "running": None,
                     "reboot": {"required": False, "packages": []}, "unit_file": None}
