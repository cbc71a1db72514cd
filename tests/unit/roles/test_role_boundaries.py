"""Roles talk through documented inputs and outputs only.

No playbook and no other role reads or sets a role's private (`__<role>_*`) variables, and every entry point
is called by its argument-spec name (`tasks_from: name`, never `name.yml`): with the suffix, Ansible looks up
no spec and validates nothing (ansible/ansible#75456), so the spec would be documentation only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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


ROLE_CALLS = ("ansible.builtin.import_role", "ansible.builtin.include_role")


def role_call_tasks(node: object) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(the task, its import_role/include_role arguments) of every role call in a parsed task file or playbook,
    blocks and plays included."""
    found: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ROLE_CALLS and isinstance(value, dict):
                found.append((node, value))
            else:
                found += role_call_tasks(value)
    elif isinstance(node, list):
        for item in node:
            found += role_call_tasks(item)
    return found


def calls(path: Path) -> list[tuple[str, str]]:
    """(role, tasks_from) of every import_role/include_role with tasks_from in a task file or playbook."""
    return [(str(args["name"]), str(args["tasks_from"])) for _task, args in role_call_tasks(yaml.safe_load(
        path.read_text())) if "tasks_from" in args]


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


# --- no cycle between roles (issue 50): a role's callers are above it, so each can be read, changed and tested
# without the others that sit below it. Role sglang_rollout owns the drain path and calls sglang_maintenance, which
# reboots hosts and never calls back.

def role_targets(node: object) -> list[str]:
    """The roles a parsed task file's import_role/include_role (with or without tasks_from) names."""
    return [str(args["name"]) for _task, args in role_call_tasks(node)]


def role_graph() -> dict[str, set[str]]:
    """role -> the other roles it calls (its task files and handlers) or depends on (meta/main.yml)."""
    graph: dict[str, set[str]] = {role: set() for role in ROLES}
    for role in ROLES:
        for path in sorted((ROOT / "roles" / role).glob("*/*.yml")):
            if path.parent.name in ("tasks", "handlers"):
                graph[role] |= set(role_targets(yaml.safe_load(path.read_text())))
        meta = yaml.safe_load((ROOT / "roles" / role / "meta" / "main.yml").read_text()) or {}
        graph[role] |= {str(d["role"] if isinstance(d, dict) else d) for d in meta.get("dependencies") or []}
        graph[role].discard(role)
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of the graph (its roles, the first repeated at the end), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_no_role_calls_back_a_role_that_calls_it() -> None:
    graph = role_graph()
    assert graph["sglang_rollout"] >= {"sglang_maintenance", "sglang_service"}, graph  # the graph is read at all
    assert cycle(graph) == [], f"a cycle between roles: {' -> '.join(cycle(graph))}"


def test_the_cycle_check_finds_the_cycle_there_was() -> None:
    """sglang_maintenance's reboot drained through sglang_rollout, whose rolling batch reboots through it."""
    before = {**role_graph(), "sglang_maintenance": {"nvidia_driver", "sglang_service", "sglang_rollout"}}
    assert cycle(before) in (["sglang_maintenance", "sglang_rollout", "sglang_maintenance"],
                             ["sglang_rollout", "sglang_maintenance", "sglang_rollout"])
    assert cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert role_targets([{"block": [{"ansible.builtin.include_role": {"name": "x"}}]}]) == ["x"]


def calls_with_vars(node: object) -> list[tuple[str, str, set[str]]]:
    """(role, entry point, the names its `vars:` pass) of every role call in a parsed task file or playbook."""
    return [(str(args["name"]), str(args.get("tasks_from", "main")), set(task.get("vars") or {}))
            for task, args in role_call_tasks(node)]


def entry_options(role: str, entry: str) -> set[str] | None:
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    return set(specs[entry].get("options") or {}) if entry in specs else None


@pytest.mark.parametrize("path", [path for path in SOURCES if path.suffix in (".yml", ".yaml")],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_input_a_caller_passes_is_declared_by_the_entry_point(path: Path) -> None:
    """A role's own variables that a call passes (`vars:` beside import_role/include_role) are options of the entry
    point it calls, so Ansible validates them; an entry point whose spec lists nothing would take anything."""
    for role, entry, given in calls_with_vars(yaml.safe_load(path.read_text())):
        options = entry_options(role, entry)
        if options is None or role == "sglang" or (role, entry) in UNVALIDATED:
            continue  # no spec: test_entry_points_are_called_by_their_spec_name
        ours = {name for name in given if name.startswith(role + "_")}
        assert ours <= options, (f"{path.relative_to(ROOT)}: {role} entry point {entry} is passed "
                                 f"{sorted(ours - options)} but its argument spec does not declare them")


# Entry points whose spec cannot declare their inputs, each with the reason (the spec says it too).
UNVALIDATED = {
    ("sglang_config", "assess"): "Ansible's validation templates every declared input before the entry point's first "
                                 "task, and deploy.yml's sglang_config_deployed_files names the unit the entry point "
                                 "itself resolves (sglang_config.unit)",
}


def test_no_entry_point_has_an_empty_spec() -> None:
    empty = {(role, entry) for role in ROLES
             for entry, spec in yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
             ["argument_specs"].items() if not spec.get("options")}
    assert empty == set(UNVALIDATED), f"entry points that would accept anything: {sorted(empty - set(UNVALIDATED))}"
