"""The collection on the newer ansible-core releases meta/runtime.yml allows (>=2.19.0): 2.20 and 2.21, each in its
own pinned controller (requirements-core-2.20.txt, requirements-core-2.21.txt; tests/helpers.py, CONTROLLERS),
against 2.19, the release of requirements.txt that every other test runs on. Every playbook passes
``--syntax-check``; playbooks/render.yml and playbooks/plan.yml on inventory/example write the same bytes as on
2.19; and none of them prints a warning, among them the prefork callback's "not tested with ansible-core" (its
fence, TESTED_ANSIBLE_CORE). Kept cheap (one syntax check of all playbooks, one render and one plan per release):
the async jobs (test_async_job.py) and the prefork callback's worker (test_prefork_callback.py) are run on each
controller where they are tested."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import CONTROLLERS, ROOT, ansible_playbook, run_example

REFERENCE = "2.19"
NEWER = [release for release in CONTROLLERS if release != REFERENCE]
# What `make lint` checks the syntax of: deploy.yml and every playbook.
PLAYBOOKS = ["deploy.yml", *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "playbooks").glob("*.yml"))]
WARNINGS = ("[WARNING]", "[DEPRECATION WARNING]", "not tested with ansible-core")


@dataclass
class Example:
    output: str  # stdout and stderr of both runs
    render: dict[str, tuple[bytes, int]]  # every rendered file by its path under render_dir: its bytes and mode
    plan: Any  # plan.yml's plan_json


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(path.relative_to(root)): (path.read_bytes(), path.stat().st_mode)
            for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Example]:
    """render.yml and plan.yml on inventory/example on one release's controller, each release's once."""
    runs: dict[str, Example] = {}

    def run(release: str) -> Example:
        if release not in runs:
            out = tmp_path_factory.mktemp(f"core-{release}")
            render = run_example("playbooks/render.yml", "-e", f"render_dir={out / 'render'}", release=release)
            plan = run_example("playbooks/plan.yml", "-e", f"plan_json={out / 'plan.json'}", release=release)
            for done in (render, plan):
                assert done.returncode == 0, f"ansible-core {release}: {done.args}\n{done.stdout}{done.stderr}"
            runs[release] = Example(render.stdout + render.stderr + plan.stdout + plan.stderr, tree(out / "render"),
                                    json.loads((out / "plan.json").read_text()))
        return runs[release]

    return run


@pytest.mark.parametrize("release", NEWER)
def test_every_playbook_passes_the_syntax_check(release: str) -> None:
    done = ansible_playbook("--syntax-check", *PLAYBOOKS, release=release)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line for line in done.stdout.splitlines() if line.startswith("playbook: ")] == [
        f"playbook: {name}" for name in PLAYBOOKS]
    output = done.stdout + done.stderr
    assert not [word for word in WARNINGS if word in output], output


@pytest.mark.parametrize("release", NEWER)
def test_the_example_renders_and_plans_as_on_2_19_without_a_warning(
        example: Callable[[str], Example], release: str) -> None:
    reference, newer = example(REFERENCE), example(release)
    assert sorted(reference.render) == ["gpu-node-1/kimi.env", "gpu-node-1/sglang-kimi.service"]
    assert sorted(newer.render) == sorted(reference.render)
    differing = [name for name in reference.render if newer.render[name] != reference.render[name]]
    assert not differing, f"ansible-core {release} renders these otherwise than {REFERENCE}: {differing}"
    assert newer.plan == reference.plan
    assert not [word for word in WARNINGS if word in newer.output], newer.output
