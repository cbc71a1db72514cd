"""playbooks/render.yml: the example inventory renders to the golden files, offline."""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "example"
FILES = ("sglang-kimi.service", "kimi.env")


def render(tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    playbook = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    return subprocess.run([playbook, "playbooks/render.yml", "-i", "inventory/example",
                           "-e", f"render_dir={tmp}", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("render")
    proc = render(out, "-e", "hicache_ratio=2.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / "gpu-node-1"


@pytest.mark.parametrize("name", FILES)
def test_matches_golden_file(rendered: Path, name: str) -> None:
    """Regenerate with: UPDATE_GOLDEN=1 pytest tests/test_render.py"""
    got = (rendered / name).read_text()
    golden = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got)
    diff = "".join(difflib.unified_diff(golden.read_text().splitlines(True), got.splitlines(True)))
    assert not diff, diff


def test_exec_start_carries_the_example_flags(rendered: Path) -> None:
    unit = (rendered / "sglang-kimi.service").read_text()
    for flag in ("--tp-size 8", "--mem-fraction-static 0.85", "--enable-hierarchical-cache", "--hicache-ratio 2.0",
                 "--hicache-write-policy write_through", "--hicache-io-backend kernel",
                 "--speculative-algorithm EAGLE3", "--speculative-draft-model-path /models/Kimi-K2.5-EAGLE3"):
        assert f"    {flag} \\\n" in unit, flag


def test_a_new_ratio_changes_only_that_line(rendered: Path, tmp_path: Path) -> None:
    proc = render(tmp_path, "-e", "hicache_ratio=3.5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    before = (rendered / "sglang-kimi.service").read_text().splitlines()
    after = (tmp_path / "gpu-node-1" / "sglang-kimi.service").read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [("    --hicache-ratio 2.0 \\", "    --hicache-ratio 3.5 \\")]
    assert (rendered / "kimi.env").read_text() == (tmp_path / "gpu-node-1" / "kimi.env").read_text()


def test_refusal_names_the_variable_and_writes_nothing(tmp_path: Path) -> None:
    proc = render(tmp_path, "-e", "hicache_ratio=0.9")
    assert proc.returncode != 0
    assert "hicache_ratio (overrides sglang_hicache_ratio): 0.9 is out of range; allowed: a number above 1.0" \
        in proc.stdout
    assert not (tmp_path / "gpu-node-1").exists()
