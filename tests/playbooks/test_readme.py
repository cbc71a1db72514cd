"""The README's variable tables are generated from the roles' argument specs and kept in step."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT


def test_variable_tables_are_up_to_date() -> None:
    proc = subprocess.run([sys.executable, "tools/role_docs.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make demo" in readme
    assert "exec make test" in (ROOT / ".ci" / "run").read_text()
