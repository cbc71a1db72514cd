"""The venv hook that turns progress-bar redraws into journal lines."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from helpers import ROOT, load_script

HOOK = ROOT / "roles/sglang_stack/files/sglang_deploy_line_progress.py"


def load() -> ModuleType:
    return load_script(HOOK, "line_progress_under_test")


def test_carriage_returns_become_newlines_without_empty_lines() -> None:
    out = io.StringIO()
    stream = load().LineProgressStream(out)
    stream.write("[t] Load weight begin\n")
    for done in (0, 32, 64):
        stream.write(f"\rLoading safetensors checkpoint shards: {done * 100 // 64:3d}% Completed | {done}/64")
    stream.write("\n")
    stream.write("a\r\nb\n")
    assert out.getvalue().splitlines() == [
        "[t] Load weight begin",
        "Loading safetensors checkpoint shards:   0% Completed | 0/64",
        "Loading safetensors checkpoint shards:  50% Completed | 32/64",
        "Loading safetensors checkpoint shards: 100% Completed | 64/64",
        "a", "b"]
    assert stream.getvalue() == out.getvalue()  # everything else is the wrapped stream's


@pytest.mark.parametrize(("enabled", "expected"), [("1", b"x\ny\n"), ("0", b"x\ry\n")])
def test_pth_hook_is_active_only_when_enabled(tmp_path: Path, enabled: str, expected: bytes) -> None:
    (tmp_path / HOOK.name).write_text(HOOK.read_text())
    code = "import sys, site; site.addsitedir(sys.argv[1]); sys.stderr.write('x\\ry\\n')"
    (tmp_path / "sglang_deploy_line_progress.pth").write_text("import sglang_deploy_line_progress\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, check=True,
                          env=dict(os.environ, SGLANG_DEPLOY_LINE_PROGRESS=enabled))
    assert proc.stderr == expected
