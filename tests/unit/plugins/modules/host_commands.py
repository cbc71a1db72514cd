"""A real AnsibleModule whose host commands are scripts a test writes: modules run them with run_command,
find them with get_bin_path, and nothing of the machine's own (mokutil, systemctl, ...) is found."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args


class Commands:
    """The host's commands: each one a script that prints what the test says and logs its arguments."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.log = bin_dir / "calls.jsonl"
        with patch_module_args({}):
            self.module = AnsibleModule(argument_spec={}, supports_check_mode=True)
        self.module.get_bin_path = self.get_bin_path  # type: ignore[method-assign]

    def add(self, name: str, stdout: str = "", stderr: str = "", rc: int = 0) -> str:
        path = self.bin_dir / name
        record = f"import json, sys; open({str(self.log)!r}, 'a').write(json.dumps([{name!r}, *sys.argv[1:]]) + '\\n')"
        path.write_text(f"#!/bin/sh\npython3 -c {shlex.quote(record)} \"$@\"\nprintf '%s' {shlex.quote(stdout)}\n"
                        f"printf '%s' {shlex.quote(stderr)} >&2\nexit {rc}\n")
        path.chmod(0o755)
        return str(path)

    def get_bin_path(self, arg: str, required: bool = False, opt_dirs: list[str] | None = None) -> str | None:
        path = arg if os.path.isabs(arg) else str(self.bin_dir / arg)
        return path if os.access(path, os.X_OK) else None

    def calls(self, name: str) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [call[1:] for call in map(json.loads, self.log.read_text().splitlines()) if call[0] == name]
