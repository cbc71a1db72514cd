"""Roles talk through documented inputs and outputs only.

No playbook and no other role reads or sets a role's private (`__<role>_*`) variables, and every entry point
is called by its argument-spec name (`tasks_from: name`, never `name.yml`): with the suffix, Ansible looks up
no spec and validates nothing (ansible/ansible#75456), so the spec would be documentation only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from helpers import ROOT

ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
# Longest first: __sglang_stack_x belongs to sglang_stack, not to the role sglang.
PRIVATE = re.compile(r"\b__(" + "|".join(sorted(ROLES, key=len, reverse=True)) + r")_\w+")
SOURCES = [path for top in ("playbooks", "roles") for path in sorted((ROOT / top).rglob("*"))
           if path.is_file() and path.suffix in (".yml", ".yaml", ".j2")] + [ROOT / "deploy.yml"]
TASKS_FROM = re.compile(r"^\s*tasks_from:\s*(\S+)\s*$", re.MULTILINE)


def owner(path: Path) -> str | None:
    """The role a file belongs to, or None for a playbook."""
    parts = path.relative_to(ROOT).parts
    return parts[1] if parts[0] == "roles" else None


def foreign_privates(path: Path) -> list[str]:
    return sorted({match.group(0) for match in PRIVATE.finditer(path.read_text())
                   if match.group(1) != owner(path)})


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_touches_another_roles_private_variables(path: Path) -> None:
    found = foreign_privates(path)
    assert not found, (f"{path.relative_to(ROOT)} reads or sets another role's private variables {found}: "
                       "use that role's documented inputs and outputs (its README) instead")


def calls(path: Path) -> list[tuple[str, str]]:
    """(role, tasks_from) of every import_role/include_role in a task file or playbook."""
    found: list[tuple[str, str]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("ansible.builtin.import_role", "ansible.builtin.include_role") and "tasks_from" in value:
                    found.append((str(value["name"]), str(value["tasks_from"])))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(yaml.safe_load(path.read_text()))
    return found


CALLERS = [path for path in SOURCES if path.suffix in (".yml", ".yaml") and TASKS_FROM.search(path.read_text())]


@pytest.mark.parametrize("path", CALLERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_entry_points_are_called_by_their_spec_name(path: Path) -> None:
    """Without the suffix, and declared in the role's argument specs: Ansible then validates the call."""
    assert calls(path), f"{path}: tasks_from found by text but not in a role call"
    for role, entry in calls(path):
        assert not entry.endswith((".yml", ".yaml")), (
            f"{path.relative_to(ROOT)}: tasks_from: {entry} - write `{Path(entry).stem}`, or Ansible skips the "
            "argument-spec check of the entry point")
        specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
        assert entry in specs["argument_specs"], (
            f"{path.relative_to(ROOT)}: {role} entry point {entry} has no argument spec, so nothing validates it")


def test_the_checks_find_what_they_forbid(tmp_path: Path) -> None:
    """The two checks above fail on the patterns that were in the project before they existed."""
    play = tmp_path / "playbooks" / "bad.yml"
    play.parent.mkdir()
    play.write_text("- hosts: all\n  tasks:\n    - ansible.builtin.import_role:\n        name: sglang_config\n"
                    "        tasks_from: assess.yml\n      when: __sglang_service_plan.driver\n")
    rel = Path(*play.relative_to(tmp_path).parts)
    assert PRIVATE.findall(play.read_text()) == ["sglang_service"]
    assert rel.parts[0] == "playbooks"
    assert calls(play) == [("sglang_config", "assess.yml")]
    task = ROOT / "roles" / "sglang_stack" / "tasks" / "stamp.yml"
    assert owner(task) == "sglang_stack" and not foreign_privates(task)
    assert PRIVATE.search("__sglang_stack_stamp").group(1) == "sglang_stack"


def spec_options(role: str) -> set[str]:
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    return {name for entry in specs.values() for name in (entry.get("options") or {})}


def outputs_section(role: str) -> str:
    text = (ROOT / "roles" / role / "README.md").read_text()
    start = text.find("\n## Outputs")
    return text[start:text.find("\n## ", start + 1)] if start >= 0 else ""


@pytest.mark.parametrize("role", [role for role in ROLES if role != "sglang"])
def test_what_others_read_of_a_role_is_a_documented_output(role: str) -> None:
    """A name of the role's (`<role>_*`) that a playbook or another role uses is one of its inputs (argument
    specs) or one of the outputs its README lists under "Outputs"."""
    public = re.compile(rf"(?<!\w)(?<!sglang\.deploy\.){role}_[a-z0-9_]+")
    inputs = spec_options(role)
    documented = outputs_section(role)
    used = {name for path in SOURCES if owner(path) != role for name in public.findall(path.read_text())}
    # Longer role names sharing the prefix (sglang_service_... is not a name of a role sglang_serv) are not ours.
    used = {name for name in used if not any(name.startswith(other + "_") and other != role and len(other) > len(role)
                                             for other in ROLES) and name not in ROLES}
    undocumented = sorted(name for name in used - inputs if f"`{name}`" not in documented)
    assert not undocumented, f"{role}: used outside the role, neither an input nor a documented output: {undocumented}"
