"""deploy.yml's one refusal per host (issue 14): the settings checks of an install role still as it last left
the host are not made again (its last converge ran them with the same inputs and code, both part of its
stamp), those of any other role are, and a stamp that was not decided (a tag left it out) checks.

The expression is deploy.yml's own, templated by Ansible in a child process (Ansible's collection loader
resolves the vars lookup). A check that must not run is a variable whose template fails when it is
templated, so taking the wrong branch fails these cases. (That the checks are named through the vars lookup
is for the task's cost, not its result: in a task, Ansible templated the role variables the expression names
even in the branch not taken, which a Templar alone does not show; docs/tests.md gives the measured cost.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import yaml
from helpers import ROOT

TASK = "Collect what the plan and the roles' settings checks refuse on each host"
ROLES = ("nvidia_driver", "sglang_stack", "sglang_weights")
POISON = "{{ this_check_must_not_run }}"

CHILD = """
import json, sys
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[sys.argv[1]])._install()
case = json.load(sys.stdin)
variables = {name: trust_as_template(value) if isinstance(value, str) else value
             for name, value in case["variables"].items()}
try:
    print(json.dumps({"refusals": Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template(case["expression"]))}))
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
"""


def refusals_expression() -> str:
    plays = yaml.safe_load((ROOT / "playbooks/deploy.yml").read_text())
    tasks = [task for play in plays for task in play.get("tasks", []) if task.get("name") == TASK]
    assert len(tasks) == 1, f"deploy.yml has no single task {TASK!r}"
    return tasks[0]["vars"]["sglang_config_refusals"]


def refusals(stamps: dict[str, bool | None], errors: dict[str, Any],
             driver_preflight: list[str] | None = None) -> dict[str, Any]:
    variables: dict[str, Any] = {f"{role}_settings_errors": errors[role] for role in ROLES}
    if driver_preflight is not None:  # the driver's preflight ran (tag driver, the driver not as it left the host)
        variables["nvidia_driver_refusals"] = driver_preflight
    state = {role: {"converged": converged, "digest": "d", "why": ""}
             for role, converged in stamps.items() if converged is not None}
    if state:  # deploy.yml's sglang_install_state, from each role's <role>_stamp_state
        variables["sglang_install_state"] = state
    child = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / ".cache/collections")], check=True, text=True,
                           capture_output=True, input=json.dumps({"expression": refusals_expression(),
                                                                  "variables": variables}))
    return json.loads(child.stdout)


ALL_BAD = {role: [f"{role}_setting is bad"] for role in ROLES}


def test_a_role_still_as_it_last_left_the_host_is_not_checked_again() -> None:
    assert refusals(dict.fromkeys(ROLES, True), dict.fromkeys(ROLES, POISON)) == {"refusals": []}


@pytest.mark.parametrize("changed", ROLES)
def test_a_role_that_will_change_is_checked_and_only_it(changed: str) -> None:
    stamps = {role: role != changed for role in ROLES}
    errors = {role: ALL_BAD[role] if role == changed else POISON for role in ROLES}
    assert refusals(stamps, errors) == {"refusals": ALL_BAD[changed]}


def test_stamps_not_decided_check_every_role_in_order() -> None:
    assert refusals(dict.fromkeys(ROLES), ALL_BAD) == {"refusals": [msg for role in ROLES for msg in ALL_BAD[role]]}
    assert refusals({"nvidia_driver": True}, {**ALL_BAD, "nvidia_driver": POISON}) == {
        "refusals": ALL_BAD["sglang_stack"] + ALL_BAD["sglang_weights"]}


def test_the_poison_would_be_seen() -> None:
    """The cases above prove something only if templating a check that must not run fails."""
    found = refusals(dict.fromkeys(ROLES, False), dict.fromkeys(ROLES, POISON))
    assert "this_check_must_not_run" in found.get("error", ""), found


def test_the_driver_preflights_refusals_replace_its_settings_checks_when_it_ran() -> None:
    """The preflight's nvidia_driver_refusals start with the driver's settings errors (then the platform, an
    undeclared container, Secure Boot): when it ran, they are the driver's part, and its settings are not checked
    a second time."""
    host = ["gpu-node-1 looks like a container (docker): it cannot load a kernel module or reboot."]
    errors = {**ALL_BAD, "nvidia_driver": POISON}
    assert refusals(dict.fromkeys(ROLES, False), errors, host) == {
        "refusals": host + ALL_BAD["sglang_stack"] + ALL_BAD["sglang_weights"]}
    assert refusals(dict.fromkeys(ROLES, True), dict.fromkeys(ROLES, POISON), []) == {"refusals": []}
