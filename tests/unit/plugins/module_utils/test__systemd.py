"""_systemd: `systemctl show` read into a dict, through the module's run_command."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import _systemd


class Module:
    """What show() uses of an AnsibleModule: a systemctl that answers as scripted (or none at all)."""

    def __init__(self, rc: int = 0, out: str = "", err: str = "", installed: bool = True) -> None:
        self.answer, self.installed = (rc, out, err), installed
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def get_bin_path(self, arg: str) -> str | None:
        return f"/usr/bin/{arg}" if self.installed else None

    def run_command(self, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        self.calls.append((args, kwargs))
        if isinstance(self.answer[1], Exception):
            raise self.answer[1]
        return self.answer


def test_show_output_is_split_at_the_first_equals_sign() -> None:
    text = "ActiveState=active\nEnvironment=A=1 B=2\nStatusText=\nnot a property\n\nMainPID=42\n"
    assert _systemd.parse_show(text) == {"ActiveState": "active", "Environment": "A=1 B=2", "StatusText": "",
                                         "MainPID": "42"}
    assert _systemd.parse_show("") == {}


def test_show_runs_systemctl_show_for_the_properties() -> None:
    module = Module(out="ActiveState=inactive\nLoadState=not-found\n")
    assert _systemd.show(module, "-odd.service", ["LoadState", "ActiveState"]) == {  # type: ignore[arg-type]
        "ActiveState": "inactive", "LoadState": "not-found"}
    args, kwargs = module.calls[0]
    assert args == ["/usr/bin/systemctl", "show", "-p", "LoadState,ActiveState", "--", "-odd.service"]
    assert kwargs == {"handle_exceptions": False}  # the caller decides what a failure means, not fail_json


@pytest.mark.parametrize(("module", "message"), [
    (Module(installed=False), "systemctl is not installed"),
    (Module(rc=1, err="Failed to connect to bus: No such file or directory\n"),
     r"show -p ActiveState -- x\.service failed \(1\): Failed to connect to bus"),
    (Module(out=PermissionError(13, "Permission denied")), "Permission denied"),  # type: ignore[arg-type]
])
def test_a_failing_systemctl_raises_with_the_reason(module: Module, message: str) -> None:
    with pytest.raises(_systemd.SystemctlError, match=message):
        _systemd.show(module, "x.service", ["ActiveState"])  # type: ignore[arg-type]
