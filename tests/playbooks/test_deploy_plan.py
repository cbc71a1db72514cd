"""The deploy plan (sglang_service_deploy_plan): the one fact per host that deploy.yml's later plays read, published
by role sglang_service's restart_plan entry point from documented inputs (docs/maintenance.md, "The deploy plan").

Runs the entry point as deploy.yml does, on four hosts of the example inventory and offline: the deployed state,
the install roles' states and the batch size are given, nothing is read from a host.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, run_example

HOSTS = ["gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4"]
CONVERGED = {"converged": True, "why": "", "digest": "d"}
MOVED = {"converged": False, "why": "the host moved since it last converged here", "digest": "d"}

PLAY = """
- name: Plan as deploy.yml's validation play does
  hosts: sglang_workers
  gather_facts: false
  vars:
    sglang_config_plan: advisory
  roles:
    - role: sglang_config
  tasks:
    - name: Decide as deploy.yml does
      ansible.builtin.import_role:
        name: sglang_service
        tasks_from: restart_plan
      vars:
        sglang_service_deployed_state: "{{ test_deployed }}"
        sglang_service_install_state: "{{ test_install }}"
        sglang_service_rolling_serial: "{{ test_serial }}"
        sglang_service_refusals: "{{ (test_refusals | default({}))[inventory_hostname] | default([]) }}"
    - name: Keep the plan
      ansible.builtin.copy:
        dest: "{{ test_out }}/{{ inventory_hostname }}.json"
        content: "{{ sglang_service_deploy_plan | to_json }}"
        mode: "0600"
      delegate_to: localhost
"""


def plans(tmp_path: Path, states: dict[str, str], serial: Any = 1,
          install: dict[str, Any] | None = None, **more: Any) -> dict[str, dict[str, Any]]:
    """Each host's deploy plan, given the unit's ActiveState per host (its files are never on the host yet, so a
    serving host restarts for its new files)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"sglang_workers": {"hosts": {
        host: {"ansible_connection": "local",
               "test_deployed": {"files": {}, "unit": {"ActiveState": states[host]}, "reboot": {}}}
        for host in HOSTS}}}}}))
    playbook = tmp_path / "plan.yml"
    playbook.write_text(PLAY)
    models = ROOT / "extensions/molecule/resources/models"  # the example inventory names them relative to its directory
    extra = {"test_out": str(tmp_path), "test_serial": serial, "hicache_ratio": 2.0,
             "test_install": install if install is not None else {},
             "sglang_model_config_file": str(models / "kimi-k2.5/config.json"),
             "sglang_draft_config_file": str(models / "kimi-k2.5-eagle3/config.json"), **more}
    proc = run_example(str(playbook), "-i", str(inventory), "-e", json.dumps(extra))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return {host: json.loads((tmp_path / f"{host}.json").read_text()) for host in HOSTS}


def test_a_serving_fleet_restarts_one_batch_at_a_time(tmp_path: Path) -> None:
    found = plans(tmp_path, dict.fromkeys(HOSTS, "active") | {"gpu-node-3": "failed"})
    assert [found[host]["apply"] for host in HOSTS] == ["restart"] * 4
    assert [found[host]["batch"] for host in HOSTS] == [1, 2, 3, 4]
    assert [found[host]["serving"] for host in HOSTS] == [True, True, False, True]
    assert "failed: will be started" in found["gpu-node-3"]["why"]
    assert all(why.startswith("new ") for why in found["gpu-node-1"]["why"])
    plan = found["gpu-node-1"]
    assert plan["config"]["unit"] == "sglang-kimi.service" and "--hicache-ratio" in plan["config"]["argv"]
    assert plan["config"]["argv"][plan["config"]["argv"].index("--hicache-ratio") + 1] == "2.0"
    assert plan["driver_in_batch"] is False
    # No load recorded on these hosts (the record is read on the host): the restart's cost is unknown, and says so.
    assert plan["downtime"] == {"expected_s": None, "source": "no load recorded on this host yet"}
    # Nor is the disk measured (that is the deploy's read of the host): which lever would help is unknown too.
    assert plan["load_advice"]["bound"] == "unknown" and plan["load_advice"]["lever"] == "none", plan["load_advice"]
    # No install role's state given (a tag left them out): the install play takes the host.
    assert plan["install"] == {} and plan["install_pending"] is True


@pytest.mark.parametrize(("serial", "batches"), [(2, [1, 1, 2, 2]), ("50%", [1, 1, 2, 2]), ("75%", [1, 1, 1, 2])])
def test_the_batch_follows_sglang_rolling_serial(tmp_path: Path, serial: Any, batches: list[int]) -> None:
    found = plans(tmp_path, dict.fromkeys(HOSTS, "active"), serial=serial)
    assert [found[host]["batch"] for host in HOSTS] == batches


def test_a_first_install_starts_every_server_in_one_batch(tmp_path: Path) -> None:
    found = plans(tmp_path, dict.fromkeys(HOSTS, "inactive"))
    assert [(found[host]["apply"], found[host]["batch"], found[host]["serving"]) for host in HOSTS] == [
        ("restart", 1, False)] * 4


def test_the_install_is_pending_unless_every_install_role_converged(tmp_path: Path) -> None:
    converged = {"nvidia_driver": CONVERGED, "sglang_stack": CONVERGED, "sglang_weights": CONVERGED}
    assert plans(tmp_path, dict.fromkeys(HOSTS, "active"), install=converged)["gpu-node-2"]["install_pending"] is False
    moved = plans(tmp_path, dict.fromkeys(HOSTS, "active"), install=converged | {"sglang_weights": MOVED})
    assert moved["gpu-node-2"]["install_pending"] is True
    assert moved["gpu-node-2"]["install"]["sglang_weights"]["why"] == MOVED["why"]


def test_the_plan_says_whether_presharded_weights_are_on(tmp_path: Path) -> None:
    """Off by default; on, the dump's directory, and its key and readiness as the preflight's read of the host gives
    them (none here: this plan reads no host, so the key is not known and the command line has no --load-format)."""
    off = plans(tmp_path, dict.fromkeys(HOSTS, "active"))
    assert {plan["presharded"]["enabled"] for plan in off.values()} == {False}
    on = plans(tmp_path, dict.fromkeys(HOSTS, "active"), sglang_presharded=True)
    assert on["gpu-node-1"]["presharded"] == {"enabled": True, "key": None, "dir": "/var/lib/sglang/presharded",
                                              "ready": None}
    assert "--load-format" not in on["gpu-node-1"]["config"]["argv"]


def test_a_refused_host_is_planned_as_refused_in_no_batch_with_its_reasons(tmp_path: Path) -> None:
    """deploy.yml passes sglang_config_refused: the refused host does nothing in any batch, keeps what would have
    changed (its why), and the batches of the others are cut without it. deploy.yml then prints the whole plan and
    refuses it (tests/unit/plugins/filter/test_rollout.py, the drills of the default scenario)."""
    reasons = ["sglang_hicache_ratio: refused by the plan", "sglang_stack_version: refused by the stack's check"]
    found = plans(tmp_path, dict.fromkeys(HOSTS, "active"), test_refusals={"gpu-node-2": reasons})
    refused = found["gpu-node-2"]
    assert (refused["apply"], refused["batch"], refused["refusals"]) == ("refused", None, reasons)
    assert refused["why"] and all(why.startswith("new ") for why in refused["why"]), refused["why"]
    assert refused["downtime"] is None and refused["live"] is None and refused["driver_in_batch"] is False
    assert [found[host]["batch"] for host in HOSTS] == [1, None, 2, 3]
    assert [found[host]["refusals"] for host in HOSTS if host != "gpu-node-2"] == [[], [], []]
