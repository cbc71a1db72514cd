"""The secrets file, rendered by role sglang_service's own template, through SGLang's own --config merger.

SGLang 0.5.23 reads the file with ``ConfigArgumentMerger`` (srt/utils/server_args_config_parser.py), which turns
each key into ``--<key>`` verbatim, and then parses the result with its argparse parser. The merger's source is taken
from the pinned wheel itself (the engine scenario's wheelhouse when it is there, else ``pip download`` into a cache
outside the clone) and run here (it needs only the standard library and PyYAML); the parser is the pinned flag
catalog's (roles/sglang_config/files/catalogs/sglang-0.5.23.json, built by the simulator's ``argparser``). The
template is rendered by Ansible's template module, as the deploy renders it. The old snake_case keys are shown to
fail the same way, so this test fails if the template goes back to them.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import random
import re
import shutil
import string
import subprocess
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import CATALOGS, ROOT, catalog_parser

VERSION = "0.5.23"
MERGER = "sglang/srt/utils/server_args_config_parser.py"
TEMPLATE = ROOT / "roles/sglang_service/templates/sglang.secrets.yaml.j2"
# Where the wheel may already be (scripts/engine-wheelhouse.sh), and where this test downloads it otherwise: caches
# outside the clone, shared by every checkout on the machine.
CACHES = [Path(os.environ.get("SGLANG_DEPLOY_ENGINE_WHEELHOUSE", "/var/cache/sglang-deploy/engine-wheelhouse")),
          Path("/var/cache/sglang-deploy/sglang-wheel")]
# Keys as an inventory may give them (one word of printable ASCII, not starting with '-': sglang_inputs), the
# characters YAML and the shell care about included.
SPECIAL = ["eng-CLIENT-5b7e1d0c", "k", "with:colon", "hash#inside", "'single'", '"double"', "back\\slash", "{brace}",
           "[list]", "yes", "null", "0x1F", "1e3", "*star", "&anchor", "!tag", "%percent", "@at", "`tick`", "a,b",
           "~", "trailing:", "?q", "|pipe", ">gt"]
_RANDOM = random.Random(48)
PRINTABLE = [c for c in string.printable if "!" <= c <= "~"]
KEYS = SPECIAL + ["".join(_RANDOM.choice(PRINTABLE) for _position in range(_RANDOM.randint(1, 64))).lstrip("-")
                  or "x" for _key in range(40)]


def _wheel() -> Path:
    for cache in CACHES:
        found = sorted(glob.glob(str(cache / f"sglang-{VERSION}-*.whl")))
        if found:
            return Path(found[0])
    CACHES[-1].mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check",
                    "-d", str(CACHES[-1]), f"sglang=={VERSION}"], check=True, timeout=900)
    return Path(sorted(glob.glob(str(CACHES[-1] / f"sglang-{VERSION}-*.whl")))[0])


@pytest.fixture(scope="module")
def merger_source() -> str:
    with zipfile.ZipFile(_wheel()) as wheel:
        return wheel.read(MERGER).decode()


@pytest.fixture(scope="module")
def merger(merger_source: str) -> types.ModuleType:
    module = types.ModuleType("sglang_0_5_23_server_args_config_parser")
    module.__file__ = MERGER
    exec(compile(merger_source, MERGER, "exec"), module.__dict__)  # the pinned wheel's own source
    return module


@pytest.fixture(scope="module")
def parser() -> Any:
    catalog = json.loads((CATALOGS / f"sglang-{VERSION}.json").read_text())
    return catalog_parser().build_parser(catalog)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The template rendered by ansible.builtin.template for every key of KEYS (the client key, and its reverse as
    the admin key), in one playbook run."""
    out = tmp_path_factory.mktemp("secrets")
    cases = [{"api": key, "admin": key[::-1].lstrip("-") or "y", "dest": str(out / f"{i}.secrets.yaml")}
             for i, key in enumerate(KEYS)]
    (out / "cases.json").write_text(json.dumps(cases))
    playbook = out / "render.yml"
    # The template lookup renders with the template module's engine and variables (ansible_managed included), on
    # the controller: one task per key without a module run each, then one file with every rendering.
    render = ("{{ texts | default([]) + [lookup('ansible.builtin.template', '" + str(TEMPLATE) + "', template_vars="
              "{'sglang_api_key': item.api, 'sglang_admin_api_key': item.admin})] }}")
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False, "connection": "local",
        "vars": {"sglang_config": {"unit": "sglang-kimi.service"},
                 "ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "tasks": [
            {"name": "Render the secrets file", "no_log": True,
             "ansible.builtin.set_fact": {"texts": render},
             "loop": "{{ lookup('ansible.builtin.file', '" + str(out / "cases.json") + "') | from_json }}"},
            {"name": "Write them", "no_log": True,
             "ansible.builtin.copy": {"content": "{{ texts | to_json }}", "dest": str(out / "rendered.json"),
                                      "mode": "0600"}}],
    }]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    binary = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    run = subprocess.run([binary, str(playbook), "-i", "localhost,"], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=False, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for case, text in zip(cases, json.loads((out / "rendered.json").read_text()), strict=True):
        Path(case["dest"]).write_text(text)
    return [Path(case["dest"]) for case in cases]


def merged(merger: types.ModuleType, parser: Any, path: Path) -> list[str]:
    argv = ["--model-path", "/models/m", "--config", str(path), "--port", "30000"]
    return list(merger.ConfigArgumentMerger(parser).merge_config_with_args(argv))


def test_the_merger_of_the_pinned_wheel_needs_only_the_standard_library_and_yaml(merger_source: str) -> None:
    imported = set()
    for node in ast.walk(ast.parse(merger_source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {*sys.stdlib_module_names, "yaml"}, imported


@pytest.mark.network
def test_sglangs_own_merger_and_the_catalogs_parser_take_the_rendered_keys(
        merger: types.ModuleType, parser: Any, rendered: list[Path]) -> None:
    for key, path in zip(KEYS, rendered, strict=True):
        admin = key[::-1].lstrip("-") or "y"
        argv = merged(merger, parser, path)
        assert argv[argv.index("--api-key") + 1] == key and argv[argv.index("--admin-api-key") + 1] == admin, argv
        assert "--config" not in argv
        values = parser.parse_args(argv)
        assert (values.api_key, values.admin_api_key, int(values.port)) == (key, admin, 30000)


@pytest.mark.network
def test_the_old_snake_case_keys_make_the_real_server_exit_2(
        merger: types.ModuleType, parser: Any, rendered: list[Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """What the template wrote before (issue 48): SGLang's merger passes --api_key, its parser does not know it."""
    old = tmp_path / "old.secrets.yaml"
    old.write_text(re.sub(r"^(admin-)?api-key:", lambda m: m.group(0).replace("-", "_"), rendered[0].read_text(),
                          flags=re.M))
    assert "admin_api_key:" in old.read_text()
    argv = merged(merger, parser, old)
    assert argv[:2] == ["--api_key", KEYS[0]], argv
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(argv)
    assert exited.value.code == 2
    assert f"unrecognized arguments: --api_key {KEYS[0]} --admin_api_key" in capsys.readouterr().err
