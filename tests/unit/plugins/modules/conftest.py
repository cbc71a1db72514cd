"""Fixtures of the module tests: the host's commands (host_commands.Commands) and running a module's main()."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from host_commands import Commands


@pytest.fixture
def commands(tmp_path: Path) -> Commands:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return Commands(bin_dir)


@pytest.fixture
def path_commands(commands: Commands, monkeypatch: pytest.MonkeyPatch) -> Commands:
    """The fake commands first on PATH, for modules that find them through AnsibleModule's own get_bin_path."""
    monkeypatch.setenv("PATH", f"{commands.bin_dir}:{os.environ['PATH']}")
    return commands


@pytest.fixture
def run_module(capsys: pytest.CaptureFixture[str]) -> Callable[[Callable[[], None], dict[str, Any]], dict[str, Any]]:
    """Run a module's main() with these arguments; its JSON result (exit_json and fail_json alike)."""
    def run(main: Callable[[], None], args: dict[str, Any]) -> dict[str, Any]:
        with patch_module_args(args), pytest.raises(SystemExit):
            main()
        return json.loads(capsys.readouterr().out)
    return run
