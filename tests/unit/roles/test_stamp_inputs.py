"""A role skipped by its stamp must not miss a change: every variable of another role that it reads is
one of its stamp's inputs (its own role_* variables all are, by name)."""

from __future__ import annotations

import re

import pytest
import yaml
from helpers import ROOT

ROLES = ROOT / "roles"
STAMPED = ["nvidia_driver", "sglang_stack", "sglang_weights"]
NAME = re.compile(r"\b[a-z][a-z0-9_]*\b")
# Read only to decide whether the stamp is trusted at all (docs/fast-noop.md), not what the role converges: in the
# digest, a run with the layer off would record stamps that the next run, with it on, would not trust.
TRUST_ONLY = {"sglang_fast_noop"}


def public_variables() -> set[str]:
    """Every role variable of the collection: the defaults and argument specs of every role, and the
    published fact sglang_config."""
    names = {"sglang_config"}
    for role in ROLES.iterdir():
        defaults = role / "defaults/main.yml"
        if defaults.exists():
            names |= set(yaml.safe_load(defaults.read_text()) or {})
        specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]
        for entry in specs.values():
            names |= set(entry.get("options") or {})
    return names


def referenced(role: str) -> set[str]:
    """The names in the role's tasks, handlers, templates and vars, comment lines left out."""
    found: set[str] = set()
    for folder in ("tasks", "handlers", "templates", "vars"):
        for path in (ROLES / role / folder).glob("*"):
            for line in path.read_text().splitlines():
                if not line.strip().startswith("#"):
                    found |= set(NAME.findall(line))
    return found


def stamp_inputs(role: str) -> set[str]:
    """The names the role's vars/main.yml puts in its stamp beside its own role_* variables."""
    text = (ROLES / role / "vars/main.yml").read_text()
    block = re.search(rf"^__{role}_input_names:.*?(?=^__{role}_inputs:)", text, re.S | re.M)
    combined = re.search(rf"^__{role}_inputs:.*?(?=^__{role}_code:)", text, re.S | re.M)
    assert block and combined, f"{role}: no __{role}_input_names / __{role}_inputs in vars/main.yml"
    return set(re.findall(r"'([a-z][a-z0-9_.]*)'", block.group(0) + combined.group(0)))


def foreign(role: str) -> set[str]:
    return {name for name in referenced(role) & public_variables() - TRUST_ONLY if not name.startswith(f"{role}_")}


@pytest.mark.parametrize("role", STAMPED)
def test_every_foreign_variable_read_is_a_stamp_input(role: str) -> None:
    inputs = stamp_inputs(role)
    missing = sorted(name for name in foreign(role)
                     if name not in inputs and not any(i.startswith(f"{name}.") for i in inputs))
    assert missing == [], f"{role} reads {missing} but its stamp does not include them (vars/main.yml)"


@pytest.mark.parametrize("role", STAMPED)
def test_the_own_variables_are_found_by_prefix(role: str) -> None:
    text = (ROLES / role / "vars/main.yml").read_text()
    assert f"query('ansible.builtin.varnames', '^{role}_')" in text
    assert f"{role}_skip_when_converged" in yaml.safe_load((ROLES / role / "defaults/main.yml").read_text())


def test_the_check_sees_what_the_roles_read() -> None:
    """The first test can fail: these are read, so leaving one out of the inputs fails it."""
    assert {"sglang_version", "sglang_venv_dir", "sglang_user", "sglang_config"} <= foreign("sglang_stack")
    assert {"sglang_model_path", "sglang_speculative_draft_model_path"} <= foreign("sglang_weights")
