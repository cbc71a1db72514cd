"""playbooks/prometheus.yml on the example inventory, offline: the three files, the rule file checked by promtool,
and a refused threshold that names its variable and leaves the files that were there as they were."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml
from helpers import run_example


def run(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_example("playbooks/prometheus.yml", "-e", f"sglang_monitoring_output_dir={out}", *extra)


def test_the_playbook_writes_targets_rules_and_dashboard(tmp_path: Path) -> None:
    result = run(tmp_path, "-e", "hicache_ratio=3.0", "-e", "sglang_monitoring_hicache_pressure_window=20m")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "checked by promtool" in result.stdout
    targets = json.loads((tmp_path / "sglang-targets.json").read_text())
    assert targets == [{"targets": ["10.0.0.11:30000"], "labels": {
        "job": "sglang", "sglang_host": "gpu-node-1", "sglang_unit": "sglang-kimi.service", "sglang_version": "0.5.23",
        "sglang_load_budget_seconds": "1080", "sglang_hicache": "on", "sglang_hicache_ratio": "3"}}]
    rules = yaml.safe_load((tmp_path / "sglang-alerts.yml").read_text())["groups"][0]["rules"]
    ratio = [rule for rule in rules if rule["labels"].get("drift") == "hicache_ratio"]
    assert [rule["labels"]["sglang_hicache_ratio"] for rule in ratio] == ["3"]  # -e hicache_ratio reaches the rules
    pressure = next(rule for rule in rules if rule["alert"] == "SGLangHiCacheHostPoolPressure")
    assert pressure["expr"].count("[20m]") == 2 and pressure["expr"].endswith(") > 0.05")  # role default share
    assert pressure["for"] == "15m"
    assert json.loads((tmp_path / "sglang-dashboard.json").read_text())["uid"] == "sglang-deploy-fleet"


def test_a_bad_threshold_is_refused_by_name_and_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "sglang-alerts.yml").write_text("groups: []\n")
    result = run(tmp_path, "-e", "sglang_monitoring_token_usage=1.5")
    assert result.returncode != 0
    assert "sglang_monitoring_token_usage: 1.5; allowed: a fraction in (0, 1]" in result.stdout
    assert (tmp_path / "sglang-alerts.yml").read_text() == "groups: []\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sglang-alerts.yml"]
