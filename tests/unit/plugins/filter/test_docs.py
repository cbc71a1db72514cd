"""Every filter of the collection is documented in a sidecar file, plugins/filter/<filter>.yml, as ansible-core
2.19 finds it: for a filter or test, ansible-doc reads the DOCUMENTATION of the Python file that holds it first,
and only when that file has none the file named after the filter next to it (ansible/utils/plugin_docs.py,
get_plugin_docs and _find_adjacent; the list's short descriptions, ansible/cli/doc.py). So no filter file holds a
DOCUMENTATION, each filter has its sidecar, each sidecar names a filter, and its options are the filter's
parameters: `_input` the first, then the others by name, with the code's defaults."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.sglang.deploy.plugins import filter as filter_package
from helpers import ROOT

FILTER_DIR = ROOT / "plugins" / "filter"
COLLECTION = "sglang.deploy"


def exported() -> dict[str, tuple[str, Callable[..., Any]]]:
    """Filter name -> (its file's module name, its function), over every FilterModule of the collection; a name
    exported twice fails."""
    found: dict[str, tuple[str, Callable[..., Any]]] = {}
    for info in pkgutil.iter_modules(filter_package.__path__):
        module = importlib.import_module(f"{filter_package.__name__}.{info.name}")
        for name, function in module.FilterModule().filters().items():
            assert name not in found, f"{name} is exported by {found[name][0]}.py and {info.name}.py"
            found[name] = (info.name, function)
    return found


FILTERS = exported()


def sidecar(name: str) -> dict[str, Any]:
    return yaml.safe_load((FILTER_DIR / f"{name}.yml").read_text(encoding="utf-8"))


def test_every_filter_has_a_sidecar_and_every_sidecar_a_filter() -> None:
    sidecars = {path.stem for path in FILTER_DIR.glob("*.yml")} | {path.stem for path in FILTER_DIR.glob("*.yaml")}
    assert sorted(set(FILTERS) - sidecars) == [], "filters without a sidecar doc"
    assert sorted(sidecars - set(FILTERS)) == [], "sidecar docs of no filter"


def test_no_filter_file_holds_documentation_that_would_hide_the_sidecars() -> None:
    for path in sorted(FILTER_DIR.glob("*.py")):
        assigned = {target.id for node in ast.parse(path.read_text(encoding="utf-8")).body
                    if isinstance(node, ast.Assign) for target in node.targets if isinstance(target, ast.Name)}
        assert not assigned & {"DOCUMENTATION", "EXAMPLES", "RETURN"}, path.name


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_the_sidecar_is_complete(name: str) -> None:
    doc = sidecar(name)
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    documentation = doc["DOCUMENTATION"]
    assert documentation["name"] == name
    assert set(documentation) >= {"short_description", "version_added", "description", "options", "author"}
    assert str(documentation["version_added"]).count(".") == 2
    assert f"{COLLECTION}.{name}" in doc["EXAMPLES"]
    assert yaml.safe_load(doc["EXAMPLES"])
    assert set(doc["RETURN"]) == {"_value"} and doc["RETURN"]["_value"].get("type")


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_the_options_are_the_parameters(name: str) -> None:
    """`_input` is the first parameter, each other option a parameter by name and each parameter an option;
    required when the code has no default; a documented default is the code's (None, as none, or empty)."""
    options = dict(sidecar(name)["DOCUMENTATION"]["options"])
    parameters = list(inspect.signature(FILTERS[name][1]).parameters.values())
    assert options.pop("_input").get("required") is True
    assert sorted(options) == sorted(p.name for p in parameters[1:]), "options other than _input != parameters"
    for parameter in parameters[1:]:
        option = options[parameter.name]
        required = parameter.default is inspect.Parameter.empty
        assert bool(option.get("required")) is required, parameter.name
        if "default" in option:
            code = list(parameter.default) if isinstance(parameter.default, tuple) else parameter.default
            assert option["default"] == code or (code is None and option["default"] in ([], "", {})), parameter.name
        elif not required:
            assert parameter.default is None, f"{parameter.name}: the default {parameter.default!r} is not documented"
    positional = [word.strip() for word in str(sidecar(name)["DOCUMENTATION"].get("positional") or "").split(",")
                  if word.strip()]
    assert positional == [p.name for p in parameters[1:1 + len(positional)]], "positional: not the parameters' order"


def test_ansible_doc_lists_every_filter_with_its_short_description() -> None:
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".cache" / "collections"), ANSIBLE_NOCOLOR="1")
    listed = subprocess.run([sys.executable, "-m", "ansible", "doc", "-t", "filter", "-l", COLLECTION, "--json"],
                            check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    assert listed.stderr == ""
    descriptions = json.loads(listed.stdout)
    assert descriptions == {f"{COLLECTION}.{name}": sidecar(name)["DOCUMENTATION"]["short_description"]
                            for name in FILTERS}
    shown = subprocess.run([sys.executable, "-m", "ansible", "doc", "-t", "filter", "--json", *descriptions],
                           check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    assert shown.stderr == ""
    for fqcn, doc in json.loads(shown.stdout).items():
        assert Path(doc["doc"]["filename"]).name == f"{fqcn.rsplit('.', 1)[1]}.yml"
