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
    assert "8 ranks x 302.19 GB" in proc.stdout and "440.00 GB" in proc.stdout
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["gpu-node-1"]["ok"] is False and plan["gpu-node-1"]["host_kv_bytes_total"] > 2 * 10**12


def test_plan_of_the_example_host(tmp_path: Path) -> None:
    proc = run_playbook("playbooks/plan.yml", "-e", f"plan_json={tmp_path}/plan.json")
    assert proc.returncode == 0, proc.stdout[-3000:]
    plan = json.loads((tmp_path / "plan.json").read_text())["gpu-node-1"]
    assert plan["ok"] and plan["kv_bytes_per_token"] == 70_272 and plan["max_concurrent_requests"] > 0
    assert "KV cache per token, per rank           70,272 B" in proc.stdout


REAL_HOST_LOG = "tests/fixtures/sglang-logs/real-host-config-0.5.23.log"


def plan_of(tmp_path: Path, *extra: str) -> dict[str, object]:
    proc = run_playbook("playbooks/plan.yml", "-e", f"plan_json={tmp_path}/plan.json", *extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return json.loads((tmp_path / "plan.json").read_text())["gpu-node-1"]


def test_the_example_host_calibrated_from_a_start_of_its_configuration_reproduces_the_pool(tmp_path: Path) -> None:
    """The example inventory (Kimi-K2.5 + EAGLE-3, TP8, 0.85) with a start of that configuration in 0.5.23's
    format: the real host allocated 116,171 tokens per rank; the start in the log 116,167. The plan given
    the log reproduces it; the estimate from the inventory does not."""
    estimate = plan_of(tmp_path)
    calibrated = plan_of(tmp_path, "-e", f"sglang_startup_log={REAL_HOST_LOG}")  # relative to the checkout
    assert calibrated["calibrated"] and not estimate["calibrated"]
    assert calibrated["calibration_source"] == REAL_HOST_LOG
    assert calibrated["device_kv_tokens"] == 116167
    assert abs(calibrated["device_kv_tokens"] - 116171) <= 0.01 * 116171
    assert estimate["device_kv_tokens"] > 1.4 * 116171  # weights per GPU are not checkpoint size / TP
    print(f"MEASURED example host: estimate {estimate['device_kv_tokens']:,}, calibrated "
          f"{calibrated['device_kv_tokens']:,}, real host 116,171 tokens per rank")


@pytest.mark.parametrize("mfs", ["0.80", "0.88", "0.90"])
def test_a_changed_mem_fraction_follows_sglangs_formula_from_the_measured_figures(tmp_path: Path, mfs: str) -> None:
    """SGLang 0.5.23 (kv_cache_configurator.py): the pool is (free after the weights - free before the load *
    (1 - mem_fraction_static) - the multimodal reserve, SGLANG_VLM_CACHE_SIZE_MB = 100 MiB for Kimi-K2.5's
    vision tower) / bytes per token. The bytes per token (the target's and the draft's) follow from the 0.85
    start's own figures and its logged pool; the plan for another fraction must agree."""
    other = plan_of(tmp_path, "-e", f"sglang_startup_log={REAL_HOST_LOG}", "-e", f"sglang_mem_fraction_static={mfs}")
    measured, reserve = other["measured"], 100 * 2**20
    pre, after = measured["pre_load_free_bytes"], measured["pre_load_free_bytes"] - measured["weights_bytes"]
    per_token = (after - pre * (1 - measured["mem_fraction_static"]) - reserve) / measured["kv_tokens"]
    expected = (after - pre * (1 - float(mfs)) - reserve) / per_token
    assert measured["mem_fraction_static"] == 0.85 and other["calibrated"]
    assert abs(other["device_kv_tokens"] - expected) <= 3, (other["device_kv_tokens"], expected)


def test_a_changed_hicache_ratio_scales_the_calibrated_pool(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "-e", f"sglang_startup_log={REAL_HOST_LOG}", "-e", "hicache_ratio=3.0")
    assert plan["device_kv_tokens"] == 116167 and plan["host_kv_tokens_per_rank"] == 3 * 116167 + 1  # + 1 page


RENDER_BOTH = """
- name: Render as the deploy writes the files, and as the restart decision compares them
  hosts: sglang_workers
  gather_facts: false
  vars:
    sglang_config_plan: advisory
  roles:
    - role: sglang_config
  tasks:
    - name: Write the files with the template action (what render.yml and the deploy write)
      ansible.builtin.include_role:
        name: sglang_service
        tasks_from: render.yml
        public: true
    - name: Keep what both lookups render for the same files
      ansible.builtin.copy:
        dest: "{{ render_dir }}/{{ inventory_hostname }}.lookups.json"
        content: "{{ {'rendered': query('sglang.deploy.rendered', *templates),
                      'template': query('ansible.builtin.template', *templates),
                      'names': __sglang_service_files | map(attribute='dest') | map('basename') | list} | to_json }}"
        mode: "0644"
      vars:
        templates: "{{ __sglang_service_files | map(attribute='template')
                       | map('regex_replace', '^', role_templates ~ '/') | list }}"
        role_templates: "{{ 'sglang_service' | sglang.deploy.role_dir }}/templates"
      delegate_to: localhost
"""


def test_the_restart_decision_renders_what_the_deploy_writes(tmp_path: Path) -> None:
    """sglang.deploy.rendered (the restart decision's lookup, without the builtin lookup's deep copy of every
    variable per file) gives the bytes the template action writes, and the builtin lookup's: were they to
    differ, every deploy would restart every server."""
    playbook = tmp_path / "both.yml"
    playbook.write_text(RENDER_BOTH)
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_ROLES_PATH=str(ROOT / "roles"))
    command = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    proc = subprocess.run([command, str(playbook), "-i", "inventory/example", "-e", f"render_dir={tmp_path}",
                           "-e", "hicache_ratio=2.0"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lookups = json.loads((tmp_path / "gpu-node-1.lookups.json").read_text())
    assert lookups["names"] == list(FILES)
    written = [(tmp_path / "gpu-node-1" / name).read_text() for name in FILES]
    assert lookups["rendered"] == written
    assert lookups["template"] == written


RESOLVE_ONLY = """
- name: Resolve as the named play does
  hosts: sglang_workers
  gather_facts: false
  roles:
    - role: sglang.deploy.sglang_config
  tasks:
    - name: Show the host memory the plan counted
      ansible.builtin.debug:
        msg: "HOSTMEM={{ sglang_config.checks.facts.host_mem_available_bytes | default('unset') }}"
"""


@pytest.mark.parametrize(("mode", "extra", "expected"), [
    ("optional", [], "unset"),                       # a deploy's resolve: the host is read later (assess.yml)
    ("required", [], "440000000000"),                # plan.yml: the example's offline figure
    ("advisory", [], "440000000000"),                # render.yml
    ("optional", ["-e", "sglang_host_memory_available_gb=300"], "300000000000"),  # a pinned figure wins everywhere
    ("required", ["-e", "sglang_host_memory_available_gb=300"], "300000000000"),
], ids=["deploy", "plan", "render", "pinned-deploy", "pinned-plan"])
def test_the_offline_host_memory_is_counted_by_offline_plans_only(tmp_path: Path, mode: str, extra: list[str],
                                                                  expected: str) -> None:
    playbook = tmp_path / "resolve.yml"
    playbook.write_text(RESOLVE_ONLY)
    proc = run_playbook(str(playbook), "-e", f"sglang_config_plan={mode}", *extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"HOSTMEM={expected}" in proc.stdout
