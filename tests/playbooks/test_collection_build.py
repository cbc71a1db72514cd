"""The built collection holds what its playbooks and roles use (issue 37), and works on its own (issue 52).

`ansible-galaxy collection build` leaves out what galaxy.yml's build_ignore names (extensions/, which holds
Molecule's scenarios, the molecule symlink to it, tests/, tools/, scripts/ and the sandbox's playbooks). A shipped
playbook that imports, includes, copies or templates a file the build leaves out works in this checkout and breaks
in the installed collection: playbooks/sandbox-prepare.yml imported molecule/resources/apt/prepare-repo.yml. This
builds the tarball, lists it, and resolves every file a shipped playbook or role task file names (import_playbook,
import_tasks/include_tasks, import_role/include_role with tasks_from, roles:, vars_files, and the src of
copy/template/script) inside it. A path with a variable the play does not define itself is checked up to that
variable (its directory must be shipped).

The tarball is also installed into an empty directory, and the installed sglang.deploy.check, plan and render run
against the installed inventory/example from outside the checkout, with nothing of it on any path: the example
names its model configs inside the collection (inventory/models), and the render gives the golden files."""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT

FQCN = "sglang.deploy."
TASK_LISTS = ("pre_tasks", "tasks", "post_tasks", "handlers", "block", "rescue", "always")
SRC_MODULES = ("copy", "template", "script")
JINJA = re.compile(r"\{\{\s*([\w.]+)\s*\}\}")


def _tool(name: str) -> str:
    return shutil.which(name) or str(Path(sys.executable).parent / name)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("collection")
    build = subprocess.run([_tool("ansible-galaxy"), "collection", "build", "--output-path", str(out), str(ROOT)],
                           capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    (built,) = out.glob("sglang-deploy-*.tar.gz")
    return built


@pytest.fixture(scope="module")
def shipped(tarball: Path) -> set[str]:
    with tarfile.open(tarball) as archive:
        return {posixpath.normpath(name) for name in archive.getnames()}


def _short(name: str) -> str:
    for prefix in ("ansible.builtin.", "ansible.legacy.", FQCN):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _render(text: str, variables: dict[str, Any], here: str) -> str:
    """Substitute playbook_dir and the play's own plain variables, repeatedly; leave anything else as it is."""
    for _round in range(5):
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name == "playbook_dir":
                return here
            found = variables.get(name)
            return found if isinstance(found, str) else match.group(0)
        rendered = JINJA.sub(value, text)
        if rendered == text:
            break
        text = rendered
    return text


def _static_part(path: str) -> str:
    """The path up to its first remaining template expression, cut back to a whole directory."""
    if "{{" not in path and "{%" not in path:
        return path
    head = re.split(r"\{[{%]", path, maxsplit=1)[0]
    return head.rsplit("/", 1)[0] if "/" in head else ""


class References:
    """Walks playbooks and task files, collecting (where, what, path relative to the collection root)."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str, str]] = []

    def add(self, where: str, what: str, path: str) -> None:
        self.found.append((where, what, "|".join(posixpath.normpath(p) for p in path.split("|"))))

    def playbook(self, rel: str, plays: Any) -> None:
        here = posixpath.dirname(rel)
        for play in plays or []:
            variables = play.get("vars") or {}
            for key in ("import_playbook", "ansible.builtin.import_playbook"):
                if key in play:
                    target = str(play[key])
                    if target.startswith(FQCN):
                        self.add(rel, key, f"playbooks/{target[len(FQCN):]}.yml")
                    else:
                        self.add(rel, key, posixpath.join(here, _static_part(_render(target, variables, here))))
            for name in play.get("vars_files") or []:
                self.add(rel, "vars_files", posixpath.join(here, _static_part(_render(str(name), variables, here))))
            for role in play.get("roles") or []:
                self.role(rel, role["role"] if isinstance(role, dict) else role, None)
            for key in TASK_LISTS:
                self.tasks(rel, play.get(key), here, variables)

    def role(self, where: str, name: str, tasks_from: str | None) -> None:
        role = _short(str(name))
        self.add(where, f"role {role}", f"roles/{role}/tasks/{tasks_from or 'main'}")

    def tasks(self, rel: str, tasks: Any, here: str, variables: dict[str, Any]) -> None:
        for task in tasks or []:
            if not isinstance(task, dict):
                continue
            scope = {**variables, **(task.get("vars") or {})}
            for key in TASK_LISTS:
                self.tasks(rel, task.get(key), here, scope)
            for key, args in task.items():
                action = _short(key)
                if action in ("import_tasks", "include_tasks"):
                    target = _static_part(_render(str(args.get("file") if isinstance(args, dict) else args),
                                                  scope, here))
                    # In a role (its handlers too), relative to the including file or to the role's tasks/.
                    tasks_dir = "/".join(rel.split("/")[:2]) + "/tasks" if rel.startswith("roles/") else here
                    self.add(rel, action, posixpath.join(here, target) + "|" + posixpath.join(tasks_dir, target))
                elif action in ("import_role", "include_role") and isinstance(args, dict):
                    if "{{" not in str(args.get("name")):
                        self.role(rel, args["name"], args.get("tasks_from"))
                elif action in SRC_MODULES and isinstance(args, dict):
                    source = args.get("src") if action != "script" else args.get("cmd", "").split(" ")[0]
                    if source and not args.get("remote_src"):
                        self.source(rel, action, _render(str(source), scope, here), here)

    def source(self, rel: str, action: str, source: str, here: str) -> None:
        if source.startswith("/"):  # absolute once rendered: playbook_dir and the play's variables
            return
        # A playbook's src is relative to the playbook's directory, or to its files/ or templates/; a role's
        # task file's to its role's files/ or templates/.
        base = here.rsplit("/tasks", 1)[0] if "/tasks" in here and here.startswith("roles/") else here
        folder = "templates" if action == "template" else "files"
        self.add(rel, action, posixpath.join(base, folder, _static_part(source)) + "|" +
                 posixpath.join(base, _static_part(source)))


def _shipped_file(path: str, files: set[str]) -> bool:
    """A path (or any of its |-separated candidates) that is a shipped file, a shipped directory, or a task file
    named without its .yml."""
    for written in path.split("|"):
        candidate = posixpath.normpath(written)
        if candidate.startswith(".."):
            continue
        if candidate in ("", ".") or candidate in files or f"{candidate}.yml" in files or f"{candidate}.yaml" in files:
            return True
    return False


def unresolved(files: set[str], read: Any) -> list[str]:
    """Every reference of the shipped playbooks and role task files that the listing does not hold."""
    refs = References()
    for rel in sorted(files):
        if rel.endswith(".yml") and (rel.startswith("playbooks/") or "/" not in rel):
            content = yaml.safe_load(read(rel))
            if isinstance(content, list) and all(isinstance(p, dict) for p in content) and \
                    any({"hosts", "import_playbook", "ansible.builtin.import_playbook"} & set(p) for p in content):
                refs.playbook(rel, content)
        elif re.match(r"roles/[^/]+/(tasks|handlers)/.*\.ya?ml$", rel):
            refs.tasks(rel, yaml.safe_load(read(rel)), posixpath.dirname(rel), {})
    return [f"{where}: {what} {path}" for where, what, path in refs.found if not _shipped_file(path, files)]


def _from_checkout(rel: str) -> str:
    return (ROOT / rel).read_text()


def test_every_file_a_shipped_playbook_or_role_names_is_in_the_built_collection(shipped: set[str]) -> None:
    assert "playbooks/deploy.yml" in shipped and "roles/sglang_service/tasks/main.yml" in shipped
    missing = unresolved(shipped, _from_checkout)
    assert not missing, f"the built collection lacks what these name: {missing}"


def test_the_sandbox_playbooks_and_test_resources_are_not_shipped(shipped: set[str]) -> None:
    test_only = ("molecule", "extensions", "tests", "tools", "scripts", "playbooks/sandbox", ".")
    leaked = sorted(name for name in shipped if name.startswith(test_only))
    assert not leaked, leaked


def test_nothing_that_works_only_from_a_checkout_is_shipped(shipped: set[str]) -> None:
    """The checkout's ansible.cfg (its paths under .cache, the sandbox as default inventory), the collections it pins
    for the sandbox and Molecule, and the sandbox's inventory (paths into extensions/molecule) stay out."""
    checkout_only = ("ansible.cfg", "requirements.yml", "requirements-release.txt", "requirements-core-",
                     "inventory/sandbox")
    leaked = sorted(name for name in shipped if name.startswith(checkout_only))
    assert not leaked, leaked
    assert "inventory/example/hosts.yml" in shipped and "inventory/models/kimi-k2.5/config.json" in shipped


def test_no_shipped_yaml_outside_playbooks_is_named_like_a_playbook(shipped: set[str]) -> None:
    """ansible-lint takes any *playbook*.yml for a playbook (its kinds), and Galaxy's importer runs it on the
    tarball, where no .ansible-lint excludes changelogs/fragments: a fragment so named was 3 import warnings."""
    named = sorted(name for name in shipped if "playbook" in posixpath.basename(name)
                   and name.endswith((".yml", ".yaml")) and not name.startswith("playbooks/"))
    assert not named, named


def test_the_example_plans_the_model_the_sandbox_stages() -> None:
    """inventory/models holds copies of the sandbox's model configs (extensions/molecule, not shipped): the same
    bytes, so the example and the sandbox plan the same Kimi-K2.5 and EAGLE-3 draft."""
    for model in ("kimi-k2.5", "kimi-k2.5-eagle3"):
        shipped_copy = ROOT / "inventory" / "models" / model / "config.json"
        sandbox = ROOT / "extensions" / "molecule" / "resources" / "models" / model / "config.json"
        assert shipped_copy.read_bytes() == sandbox.read_bytes(), model


@pytest.fixture(scope="module")
def installed(tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The tarball installed into an empty collections path outside the checkout, and an environment with nothing of
    the checkout: no ANSIBLE_* variable (ANSIBLE_CONFIG, this checkout's collections path), only that install on
    the collections path; run from an empty directory outside the checkout (no ansible.cfg there)."""
    base = tmp_path_factory.mktemp("installed")
    collections, cwd = base / "collections", base / "run"
    cwd.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_HOME=str(base / "home"))
    install = subprocess.run([_tool("ansible-galaxy"), "collection", "install", "--offline", "-p", str(collections),
                              str(tarball)], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert install.returncode == 0, install.stdout + install.stderr
    assert not ROOT.resolve().is_relative_to(base.resolve()) and not base.resolve().is_relative_to(ROOT.resolve())
    return collections / "ansible_collections" / "sglang" / "deploy", env


def _installed_playbook(installed: tuple[Path, dict[str, str]], name: str, *extra: str) -> str:
    root, env = installed
    cwd = root.parents[3] / "run"  # <base>/collections/ansible_collections/sglang/deploy
    argv = [_tool("ansible-playbook"), f"sglang.deploy.{name}", "-i", str(root / "inventory" / "example"), *extra]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert str(ROOT) not in output, f"the run reached the checkout: {output}"
    return output


@pytest.mark.parametrize("name", ["check", "plan"])
def test_the_installed_example_checks_and_plans_on_its_own(installed: tuple[Path, dict[str, str]], name: str) -> None:
    output = _installed_playbook(installed, name)
    assert "gpu-node-1" in output and "failed=0" in output, output


def test_the_installed_example_renders_the_golden_files(installed: tuple[Path, dict[str, str]]) -> None:
    out = installed[0].parents[3] / "render"
    _installed_playbook(installed, "render", "-e", f"render_dir={out}", "-e", "hicache_ratio=2.0")
    golden = ROOT / "tests" / "golden" / "example"
    for name in sorted(path.name for path in golden.iterdir()):
        assert (out / "gpu-node-1" / name).read_text() == (golden / name).read_text(), name


def test_the_check_finds_an_import_the_build_leaves_out(shipped: set[str]) -> None:
    """The check itself: shipped again, playbooks/sandbox-prepare.yml imports a playbook of
    extensions/molecule/resources (its files come in one tarball that a command packs, which the check does not
    read)."""
    with_sandbox = shipped | {"playbooks/sandbox-prepare.yml"}
    missing = unresolved(with_sandbox, _from_checkout)
    assert any("extensions/molecule/resources/apt/prepare-repo.yml" in line for line in missing), missing
