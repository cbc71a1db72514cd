"""deploy.yml's phase tags (--tags driver|stack|weights|probe|router|service) reach every task a phase runs.

Ansible's rule, checked here on the ansible-core this project pins: a tag given to an import reaches the tasks of
the files and roles included inside what it imports (their parent chain is static up to the import, so the include
passes it on); a tag given to an include itself does not reach the tasks it includes - that takes ``apply: {tags}``.
Source: ansible-core 2.19, lib/ansible/playbook/task.py, ``Task._get_parent_attribute``: "If parent is static, we can
grab attrs from the parent, otherwise, defer to the grandparent" - a task's dynamic include is skipped, not its
ancestors.
So the rolling play's ``import_role: sglang_rollout, tasks_from: rolling`` tagged ``service`` carries ``service``
down to sglang_service's restart, wait and smoke files, and every include written directly in a play of a playbook
must carry its tags in ``apply`` (the lease and record includes of deploy.yml do). The default scenario's drills
deploy changes with ``--tags service`` through all of it (the slow-stop and crash-loop drills).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from helpers import ROOT

INCLUDES = ("ansible.builtin.include_tasks", "ansible.builtin.include_role")

OUTER = """
- name: Include a file
  ansible.builtin.include_tasks: inner.yml
- name: Include the role's file as an entry point
  ansible.builtin.include_role:
    name: probe_role
    tasks_from: inner
"""
INNER = """
- name: Inner task
  ansible.builtin.debug:
    msg: INNER RAN
"""
PLAYBOOK = """
- name: Tags through an import, then through an include of its own
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Imported with a tag
      ansible.builtin.import_role:
        name: probe_role
        tasks_from: outer
      tags: [service]
    - name: Included with a tag and no apply
      ansible.builtin.include_tasks: roles/probe_role/tasks/inner.yml
      tags: [service]
"""


def test_a_tag_on_an_import_reaches_the_included_tasks_and_a_tag_on_an_include_does_not(tmp_path: Path) -> None:
    tasks = tmp_path / "roles/probe_role/tasks"
    tasks.mkdir(parents=True)
    (tasks / "outer.yml").write_text(OUTER)
    (tasks / "inner.yml").write_text(INNER)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")  # Ansible's defaults, not this checkout's callbacks
    command = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_LOCALHOST_WARNING="0")
    proc = subprocess.run([command, "play.yml", "--tags", "service", "-i", "localhost,"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Twice through the import (the include_tasks and the include_role inside it), never through the bare include.
    assert proc.stdout.count('"msg": "INNER RAN"') == 2, proc.stdout


def play_includes(plays: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Every include written directly in a play (pre_tasks, tasks, post_tasks, handlers), with its play's name."""
    found = []
    for play in plays:
        for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            for task in play.get(section) or []:
                if any(key in task for key in INCLUDES):
                    found.append((play.get("name", "?"), task))
    return found


def test_every_tagged_include_in_a_playbook_applies_its_tags_to_what_it_includes() -> None:
    checked = 0
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play_name, task in play_includes(yaml.safe_load(path.read_text()) or []):
            if not task.get("tags"):
                continue
            module = next(key for key in INCLUDES if key in task)
            applied = ((task[module] or {}).get("apply") or {}).get("tags") if isinstance(task[module], dict) else None
            assert applied == task["tags"], (
                f"{path.name}, play {play_name!r}, task {task.get('name')!r}: tags {task['tags']} without "
                f"apply: {{tags: {task['tags']}}} - the included tasks would not run under --tags")
            checked += 1
    assert checked >= 6, checked  # deploy.yml's lease takes, renewals, record and release
