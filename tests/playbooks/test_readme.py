"""The README is the short way in, and the docs and role READMEs behind it must tell the truth: every link
resolves, every playbook, make target, tag and extra variable they name exists, and the roles' variable
tables are the ones their argument specs generate."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, run_example

README = ROOT / "README.md"
README_MAX_LINES = 200
README_MAX_WIDTH = 120  # prose lines; a table row may be longer, its cells not (README_MAX_CELL)
README_MAX_CELL = 120
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "roles").glob("*/README.md"))]
PAGE_IDS = [str(p.relative_to(ROOT)) for p in PAGES]

FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
ANSIBLE_TAGS = {"always", "never", "all", "tagged", "untagged"}


def prose(page: Path) -> str:
    return FENCE.sub("", page.read_text())


def code(page: Path) -> list[str]:
    """Every command-like text of a page: the lines of its fenced blocks and its inline code spans."""
    text = page.read_text()
    blocks = [line for block in FENCE.findall(text) for line in block.splitlines()[1:-1]]
    return blocks + INLINE_CODE.findall(FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", prose(page), re.MULTILINE)}


def local_links(page: Path) -> Iterator[tuple[str, Path, str]]:
    """(link as written, file it points at, anchor or '') for every link that is not a URL."""
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _sep, anchor = target.partition("#")
        yield target, (page.parent / path).resolve() if path else page, anchor


def _walk_tags(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "tags":
                yield from [value] if isinstance(value, str) else value
            else:
                yield from _walk_tags(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk_tags(item)


def defined_tags() -> set[str]:
    files = [ROOT / "deploy.yml", *(ROOT / "playbooks").glob("*.yml"), *(ROOT / "roles").glob("*/tasks/*.yml")]
    return {tag for f in files for tag in _walk_tags(yaml.safe_load(f.read_text()))} | ANSIBLE_TAGS


def test_every_role_readme_has_its_current_variable_tables() -> None:
    """A role with argument specs and no README, or a stale table, fails here."""
    proc = subprocess.run([sys.executable, "tools/role_docs.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_the_readme_stays_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/ (at most {README_MAX_LINES})"


def test_the_readmes_lines_and_table_cells_stay_narrow() -> None:
    """Issue 37: one README line was 630 characters, a benchmark table's cells chained six commits of figures."""
    wide, cells, chains = [], [], []
    for number, line in enumerate(prose(README).splitlines(), 1):
        if line.startswith("|"):
            cells += [f"{number}: {cell.strip()[:60]}" for cell in line.strip("|").split("|")
                      if len(cell.strip()) > README_MAX_CELL]
            chains += [f"{number}: {cell.strip()[:60]}" for cell in line.strip("|").split("|") if "→" in cell]
        elif len(line) > README_MAX_WIDTH:
            wide.append(f"{number}: {len(line)} characters")
    assert not wide, f"README.md lines wider than {README_MAX_WIDTH} (outside code blocks and tables): {wide}"
    assert not cells, f"README.md table cells longer than {README_MAX_CELL}: {cells}"
    assert not chains, f"README.md table cells with a history (a → b): move it to docs/benchmarks.md: {chains}"


def test_the_readmes_benchmark_names_one_commit() -> None:
    """One current table, measured at one commit; earlier commits live in docs/benchmarks.md."""
    section = prose(README).split("## Benchmarks", 1)[1].split("\n## ", 1)[0]
    assert len(set(COMMIT.findall(section))) == 1, COMMIT.findall(section)
    assert "docs/benchmarks.md" in section


def test_the_readme_links_every_doc_and_role_readme() -> None:
    linked = {path for _target, path, _anchor in local_links(README)}
    unlinked = [str(p.relative_to(ROOT)) for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"README.md does not link {unlinked}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_links_resolve(page: Path) -> None:
    broken = []
    for target, path, anchor in local_links(page):
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, broken


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_named_playbooks_exist(page: Path) -> None:
    named = set()
    for line in code(page):
        for command in re.findall(r"ansible-playbook\s+(.*)", line):
            named |= {w for w in command.split() if w.endswith((".yml", ".yaml")) and not w.startswith("-")}
            named |= {f"playbooks/{n}.yml" for n in re.findall(r"\bsglang\.deploy\.(\w+)", command)}
    missing = sorted(n for n in named if not (ROOT / n).is_file())
    assert not missing, f"{page.relative_to(ROOT)} runs playbooks that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_named_make_targets_exist(page: Path) -> None:
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    named = {t for line in code(page) for t in re.findall(r"(?:^|\s)make ([a-z][\w-]*)", line)}
    assert named <= targets, f"{page.relative_to(ROOT)} names make targets that do not exist: {named - targets}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_named_tags_exist(page: Path) -> None:
    named = {tag for line in code(page) for group in re.findall(r"--tags[ =]([\w|,\\]+)", line)
             for tag in re.split(r"[|,]", group.replace("\\", "")) if tag}
    missing = named - defined_tags()
    assert not missing, f"{page.relative_to(ROOT)} names tags no play or task carries: {sorted(missing)}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_extra_vars_are_read_somewhere(page: Path) -> None:
    sources = [ROOT / "deploy.yml", *(ROOT / "playbooks").glob("*.yml"), *(ROOT / "roles").rglob("*.yml"),
               *(ROOT / "roles").rglob("*.j2"), *(ROOT / "plugins").rglob("*.py")]
    text = "\n".join(f.read_text() for f in sources)
    named = {v for line in code(page) for v in re.findall(r"-e\s+(\w+)=", line)}
    unread = sorted(v for v in named if not re.search(rf"\b{v}\b", text))
    assert not unread, f"{page.relative_to(ROOT)} passes extra vars nothing reads: {unread}"


def test_ci_runs_the_readme_test_command() -> None:
    assert any(line.startswith("make test") for line in code(README)), "README.md must show `make test`"
    assert "exec make test" in (ROOT / ".ci" / "run").read_text()


def test_the_readmes_plan_figures_are_what_their_sources_give(tmp_path: Path) -> None:
    """The README's three KV-pool figures and where each comes from: the plan of the example inventory, the plan
    calibrated from the simulator's log of that configuration, and the operator's report, which the log fixture's
    README records (no log of that start exists). Issue 39: no simulator figure called real."""
    text = " ".join(README.read_text().split())
    estimate = run_example("playbooks/plan.yml", "-e", f"plan_json={tmp_path}/estimate.json")
    log = "tests/fixtures/sglang-logs/real-host-config-0.5.23.log"
    calibrated = run_example("playbooks/plan.yml", "-e", f"sglang_startup_log={log}",
                             "-e", f"plan_json={tmp_path}/calibrated.json")
    assert estimate.returncode == 0 and calibrated.returncode == 0, estimate.stdout[-2000:] + calibrated.stdout[-2000:]
    tokens = {name: yaml.safe_load((tmp_path / f"{name}.json").read_text())["gpu-node-1"]["device_kv_tokens"]
              for name in ("estimate", "calibrated")}
    assert f"predicts a GPU KV pool of {tokens['estimate']:,} tokens per rank from the inventory alone" in text
    assert f"{tokens['calibrated']:,} from a simulator log of that configuration" in text
    fixture = " ".join((ROOT / "tests/fixtures/sglang-logs/README.md").read_text().split())
    assert "which allocated **116,171** tokens per rank" in fixture and "No log of that host is public" in fixture
    assert "reports that a real start of that host allocated 116,171; no log of it exists" in text
    assert "A real start allocated" not in text
