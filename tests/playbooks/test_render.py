"""playbooks/render.yml: the example inventory renders to the golden files, offline."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, render

GOLDEN = ROOT / "tests" / "golden" / "example"
FILES = ("sglang-kimi.service", "kimi.env")


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


def run_playbook(name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    playbook = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    return subprocess.run([playbook, name, "-i", "inventory/example", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("name", ["playbooks/render.yml", "playbooks/plan.yml"])
def test_a_flag_the_pinned_version_does_not_know_is_refused(name: str, tmp_path: Path) -> None:
    proc = run_playbook(name, "-e", f"render_dir={tmp_path}", "-e", '{"sglang_extra_args": {"cuda-graph-max-bs": 8}}')
    assert proc.returncode != 0
    assert "sglang_extra_args['cuda-graph-max-bs']: --cuda-graph-max-bs is not a flag of sglang 0.5.23" in proc.stdout
    assert "did you mean --cuda-graph-max-bs-decode" in proc.stdout


def test_plan_refuses_hicache_size_300_naming_the_per_rank_meaning(tmp_path: Path) -> None:
    proc = run_playbook("playbooks/plan.yml", "-e", "hicache_size=300", "-e", f"plan_json={tmp_path}/plan.json")
    assert proc.returncode != 0
    assert "hicache_size (overrides sglang_hicache_size): 300 is GB per TP rank, not a total" in proc.stdout
    assert "8 ranks x 302.19 GB" in proc.stdout and "449.00 GB" in proc.stdout
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["gpu-node-1"]["ok"] is False and plan["gpu-node-1"]["host_kv_bytes_total"] > 2 * 10**12


def test_plan_of_the_example_host(tmp_path: Path) -> None:
    proc = run_playbook("playbooks/plan.yml", "-e", f"plan_json={tmp_path}/plan.json")
    assert proc.returncode == 0, proc.stdout[-3000:]
    plan = json.loads((tmp_path / "plan.json").read_text())["gpu-node-1"]
    assert plan["ok"] and plan["kv_bytes_per_token"] == 70_272 and plan["max_concurrent_requests"] > 0
    assert "KV cache per token, per rank           70,272 B" in proc.stdout
