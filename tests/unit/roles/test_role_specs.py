"""Every role's meta/argument_specs.yml documents exactly the variables of its defaults/main.yml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import ROOT

ROLES = sorted(p for p in (ROOT / "roles").iterdir() if p.is_dir())


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_argument_specs_match_defaults(role: Path) -> None:
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    options = specs["main"]["options"]
    assert sorted(options) == sorted(defaults)
    for name, option in options.items():
        assert option.get("description"), f"{role.name}: {name} has no description"
        if "default" in option:
            assert option["default"] == defaults[name], f"{role.name}: {name} default differs"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_role_variables_carry_the_role_prefix(role: Path) -> None:
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    assert all(name.startswith(role.name + "_") for name in defaults), sorted(defaults)


@pytest.mark.parametrize("role", ROLES, ids=lambda role: role.name)
def test_every_declared_entry_point_has_its_task_file(role: Path) -> None:
    """An entry point the specs (and the generated README) declare must exist: sglang_service declared a
    `validate` whose task file was gone. `main` of a data-only role (sglang) has no tasks by design."""
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    missing = [name for name in specs if not (role / "tasks" / f"{name}.yml").exists()
               and not (name == "main" and not (role / "tasks").exists())]
    assert not missing, f"{role.name} declares entry points without a task file: {missing}"
