"""Every plugin's documentation says in which release it came (antsibull-docs shows it; issue 52): the release whose
changelogs/changelog.yaml lists it as new (a module or plugin entry, or, for a filter, which antsibull-changelog does
not list one by one, its name in ``double backquotes`` in that release's changes), else the release being prepared
(galaxy.yml's version)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from helpers import ROOT

KINDS = {"modules": "*.py", "lookup": "*.py", "callback": "*.py", "filter": "*.yml"}


def _documentation(path: Path) -> dict:
    if path.suffix == ".yml":
        return yaml.safe_load(path.read_text())["DOCUMENTATION"]
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["DOCUMENTATION"]:
            return yaml.safe_load(ast.literal_eval(node.value))
    raise AssertionError(f"{path}: no DOCUMENTATION")


def _plugins() -> list[tuple[str, str]]:
    return [(kind, path.stem) for kind, pattern in KINDS.items()
            for path in sorted((ROOT / "plugins" / kind).glob(pattern)) if not path.stem.startswith("_")]


def _released() -> dict[tuple[str, str], str]:
    """(kind, name) -> the release that first listed it, from changelogs/changelog.yaml."""
    releases = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())["releases"]
    first: dict[tuple[str, str], str] = {}
    for version in sorted(releases, key=lambda v: tuple(int(x) for x in v.split("."))):
        release = releases[version]
        for module in release.get("modules") or []:
            first.setdefault(("modules", module["name"]), version)
        for kind, plugins in (release.get("plugins") or {}).items():
            for plugin in plugins:
                first.setdefault((kind, plugin["name"]), version)
        changes = yaml.safe_dump(release.get("changes") or {}, width=10**6)
        for path in (ROOT / "plugins" / "filter").glob("*.yml"):
            if f"``{path.stem}``" in changes:
                first.setdefault(("filter", path.stem), version)
    return first


@pytest.mark.parametrize(("kind", "name"), _plugins())
def test_each_plugin_says_the_release_that_first_had_it(kind: str, name: str) -> None:
    path = next((ROOT / "plugins" / kind).glob(f"{name}.*"))
    preparing = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    expected = _released().get((kind, name), preparing)
    assert str(_documentation(path).get("version_added")) == expected, f"{path}: version_added should be {expected}"


def test_the_plugins_are_found() -> None:
    found = set(_plugins())
    assert {("modules", "sglang_ready"), ("lookup", "controller"), ("callback", "prefork"),
            ("filter", "resolve")} <= found, found
    released = _released()
    assert released[("callback", "sglang_progress")] == released[("filter", "resolve")] == "1.0.0", released
    assert ("filter", "files_to_copy") not in released  # came on 2026-12-01, after 1.0.0 (2026-11-30)
