"""A start the deploy chooses is never refused as a crash loop: the restart's steps, run against how each
supported systemd counts starts (tests/fixtures/systemd/start-limit.yml, read from systemd's source)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from helpers import ROOT

TASKS = ROOT / "roles/sglang_service/tasks"
FIXTURE = yaml.safe_load((ROOT / "tests/fixtures/systemd/start-limit.yml").read_text())
FACTS = FIXTURE["versions"]
BURST = 3  # sglang_service_start_limit_burst


def tasks(name: str) -> list[dict[str, Any]]:
    return yaml.safe_load((TASKS / name).read_text())


def is_reset(task: dict[str, Any]) -> bool:
    return (task.get("ansible.builtin.command") or {}).get("argv", [])[:2] == ["systemctl", "reset-failed"]


def steps(restart: list[dict[str, Any]], reload: bool) -> list[str]:
    """What restart.yml asks of systemd, in order, on a host whose unit is loaded (not check mode)."""
    found = []
    for task in restart:
        service = task.get("ansible.builtin.systemd_service") or {}
        if is_reset(task):
            found.append("reset-failed")
        elif service.get("state") == "restarted":
            found += (["daemon-reload"] if reload else []) + ["start"]
    return found


def started(facts: dict[str, bool], sequence: list[str], used: int = BURST) -> bool:
    """Whether the start in `sequence` is let through when `used` starts already count in the interval."""
    count = used
    for step in sequence:
        cleared = {"reset-failed": facts["reset_failed_clears_count"],
                   "daemon-reload": not facts["daemon_reload_keeps_count"]}
        if cleared.get(step):
            count = 0
        elif step == "start":
            if facts["manual_starts_count"] and count >= BURST:
                return False
            count += 1
    return True


@pytest.mark.parametrize("version", sorted(FACTS))
@pytest.mark.parametrize("reload", [True, False])
def test_a_restart_after_the_limit_was_used_up_is_let_through(version: str, reload: bool) -> None:
    sequence = steps(tasks("restart.yml"), reload)
    assert sequence.count("start") == 1 and sequence.index("reset-failed") < sequence.index("start"), sequence
    assert started(FACTS[version], sequence)


def test_without_reset_failed_systemd_255_refuses_it_even_after_a_daemon_reload() -> None:
    """Why the step is there: the sequence the role had before, daemon-reload then restart."""
    assert not started(FACTS["255"], ["daemon-reload", "start"])
    assert started(FACTS["252"], ["daemon-reload", "start"])  # why the sandbox never showed it
    assert not started(FACTS["252"], ["start"])  # a start of an unchanged unit, which is not reloaded


def reset_task() -> dict[str, Any]:
    return next(task for task in tasks("restart.yml") if is_reset(task))


def test_reset_failed_runs_whenever_the_restart_does() -> None:
    """Both skip in check mode and after a boot that started the server, and on nothing else: LoadState cannot
    tell whether systemd holds the unit (`systemctl show` loads it for the call), so it is not a condition."""
    assert reset_task()["when"] == "not ansible_check_mode and not __sglang_service_started_at_boot | default(false)"


@pytest.mark.parametrize(("case", "fails"), [("reset_failed_of_an_unloaded_unit", False),
                                             ("reset_failed_other_failure", True)])
def test_reset_failed_of_a_unit_systemd_does_not_hold_is_not_a_failure(case: str, fails: bool) -> None:
    """A first install, or a unit collected while stopped, has no count: systemd's own answer (captured from
    systemd 252) passes; any other error of reset-failed still fails the task."""
    task = reset_task()
    result = {"rc": FIXTURE[case]["rc"], "stderr": FIXTURE[case]["stderr"]}
    failed_when = jinja2.Environment().compile_expression(task["failed_when"])
    assert bool(failed_when(**{task["register"]: result})) is fails
    assert not failed_when(**{task["register"]: {"rc": 0, "stderr": ""}})


def test_every_start_of_the_server_goes_through_restart_yml() -> None:
    """run.yml (a changed, stopped or stale server) and the start entry point (role sglang_rollout's rollback) include
    restart.yml; no other task of the service, rollout or maintenance roles starts or restarts the unit, and no
    handler restarts it (handlers appended by every include_role of the role would restart it as many times:
    ansible-core 2.19, lib/ansible/playbook/role_include.py, IncludeRole.get_block_list, `myplay.handlers =
    myplay.handlers + handlers`)."""
    for role in ("sglang_service", "sglang_rollout", "sglang_maintenance"):
        for path in sorted((ROOT / "roles" / role / "tasks").glob("*.yml")):
            if path.name == "restart.yml":
                continue
            text = path.read_text()
            assert "state: restarted" not in text and "state: started" not in text, path
            assert "notify: sglang_service restart" not in text, path
    # No role has handlers to restart or reload the server: a live change's unit is reloaded by a task (live.yml).
    assert not any((ROOT / "roles" / role / "handlers").exists()
                   for role in ("sglang_service", "sglang_rollout", "sglang_maintenance"))
    for entry in ("run.yml", "start.yml"):
        assert any(task.get("ansible.builtin.include_tasks") == "restart.yml" for task in tasks(entry)), entry
    rollback = yaml.safe_load((ROOT / "roles/sglang_rollout/tasks/rollback.yml").read_text())
    assert any(task.get("ansible.builtin.include_role") == {"name": "sglang_service", "tasks_from": "start"}
               for task in rollback)


def test_the_fixture_covers_the_distributions_the_roles_support() -> None:
    meta = yaml.safe_load((ROOT / "roles/sglang_service/meta/main.yml").read_text())
    releases = {version for platform in meta["galaxy_info"]["platforms"] for version in platform["versions"]}
    systemd = {"bookworm": "252", "jammy": "249", "noble": "255"}  # the distributions' own systemd
    assert releases <= set(systemd) and {systemd[release] for release in releases} <= set(FACTS)


def test_the_readme_names_the_fixture_sources() -> None:
    readme = (ROOT / "tests/fixtures/systemd/README.md").read_text()
    for name in (path.name for path in Path(ROOT / "tests/fixtures/systemd").iterdir() if path.name != "README.md"):
        assert f"`{name}`" in readme, name
