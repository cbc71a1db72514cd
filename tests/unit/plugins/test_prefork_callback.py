"""The prefork callback: what Ansible's main process has loaded before it forks a worker, the worker does not
load again. Each case runs in a fresh interpreter (pytest's own has long imported the collection), forks there
as Ansible does for every task and host, and lists the modules the child still had to import."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from helpers import CONTROLLERS, ROOT, controller_python

COLLECTIONS = ROOT / ".cache" / "collections"

# A worker's first use of the collection's plugins, as templating a task's arguments makes it.
SCRIPT = textwrap.dedent("""
    import json, os, sys
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader([sys.argv[1]])
    from ansible.plugins.loader import connection_loader, filter_loader, lookup_loader, test_loader
    from ansible_collections.sglang.deploy.plugins.callback.prefork import CallbackModule

    class Inventory:
        def get_hosts(self, pattern):
            return ["bench-1"]

    class Variables:
        _inventory = Inventory()
        extra_vars = {"sglang_fast_noop": "false"} if sys.argv[2] == "off" else {}
        def get_vars(self, play, host):
            return {"ansible_connection": "community.docker.docker"}

    class Play:
        hosts = "sglang_workers"
        def get_variable_manager(self):
            return Variables()

    from ansible_collections.sglang.deploy.plugins.callback import prefork
    if sys.argv[2] == "untested":
        prefork.ANSIBLE_CORE_VERSION = "2.99.0"
    callback = CallbackModule()  # loading the callback (Ansible does it at start) loads nothing else
    warnings = []
    callback._display.warning = warnings.append
    if sys.argv[2] != "cold":
        callback.v2_playbook_on_start(None)
        callback.v2_playbook_on_play_start(Play())
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        before = set(sys.modules)
        filter_loader.get("sglang.deploy.preflight")
        lookup_loader.get("sglang.deploy.variable_problems")
        test_loader.get("ansible.builtin.match")
        connection_loader.get("community.docker.docker", class_only=True)
        imported = sorted(set(sys.modules) - before)
        # What every host's stamps decision and variable check read: the role's code and the argument specs.
        from ansible_collections.sglang.deploy.plugins.filter import stamp
        from ansible_collections.sglang.deploy.plugins.lookup import variable_problems
        opened = []
        sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
        stamp.stamp_digest({}, [stamp.role_dir("nvidia_driver"), stamp.role_dir("nvidia_driver") + "/../../plugins"])
        variable_problems._specs(variable_problems.ROLES)
        os.write(write, json.dumps({"imported": imported, "opened": opened, "warnings": warnings}).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:  # to the end first: a child writing more than a pipe holds never blocks
        print(pipe.read().decode())
    os.waitpid(child, 0)
""")


def the_worker(mode: str, release: str = "2.19") -> dict[str, list[str]]:
    """What the forked worker imported to resolve the plugins, and the files it opened to digest a role's code
    and to read the argument specs, on the controller of an ansible-core release (tests/helpers.py)."""
    out = subprocess.run([controller_python(release), "-c", SCRIPT, str(COLLECTIONS), mode], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_without_it_every_worker_imports_the_collections_plugins_and_reads_their_files_again() -> None:
    worker = the_worker("cold")
    assert "ansible_collections.sglang.deploy.plugins.filter.plan" in worker["imported"]
    assert "ansible_collections.sglang.deploy.plugins.lookup.variable_problems" in worker["imported"]
    assert "ansible_collections.community.docker.plugins.connection.docker" in worker["imported"]
    opened = [Path(path).name for path in worker["opened"]]
    assert "preflight_host.yml" in opened and "stamp.py" in opened  # the driver role's code and the plugins, digested
    assert "argument_specs.yml" in opened


@pytest.mark.parametrize("release", CONTROLLERS)
def test_with_it_a_worker_imports_nothing_and_reads_no_file_of_the_collection(release: str) -> None:
    assert the_worker("warm", release) == {"imported": [], "opened": [], "warnings": []}


@pytest.mark.parametrize("release", CONTROLLERS)
def test_the_switch_and_an_untested_ansible_core_leave_every_worker_as_without_it(release: str) -> None:
    """-e sglang_fast_noop=false turns it off quietly; an ansible-core release it was not tested with, with a
    warning that names the release. Either way the worker loads what it would without the callback (on each
    controller: what the warm worker is spared is there to spare)."""
    def collections(worker: dict[str, list[str]]) -> list[str]:
        return [name for name in worker["imported"] if name.startswith("ansible_collections.")]

    cold = the_worker("cold", release)
    off = the_worker("off", release)
    assert collections(off) == collections(cold) and off["opened"] == cold["opened"] and off["warnings"] == []
    assert "ansible_collections.sglang.deploy.plugins.lookup.variable_problems" in collections(off)
    untested = the_worker("untested", release)
    assert collections(untested) == collections(cold) and untested["opened"] == cold["opened"]
    assert len(untested["warnings"]) == 1 and "not tested with ansible-core 2.99.0" in untested["warnings"][0]


def test_which_releases_and_values_count() -> None:
    from ansible_collections.sglang.deploy.plugins.callback.prefork import release_tested, switched_off

    assert [release_tested(v) for v in ("2.19.14", "2.19.0rc1", "2.20.10", "2.21.5", "2.22.0", "2.1.9", "2.2.0")] == [
        True, True, True, True, False, False, False]
    assert [switched_off(v) for v in (None, True, "true", "yes", False, "false", "no", 0, "maybe")] == [
        False, False, False, False, True, True, True, True, False]


def test_a_plugin_it_cannot_load_is_left_to_the_worker() -> None:
    from ansible_collections.sglang.deploy.plugins.callback.prefork import CallbackModule

    class Broken:
        hosts = "all"

        def get_variable_manager(self) -> None:
            raise RuntimeError("no inventory")

    CallbackModule().v2_playbook_on_play_start(Broken())  # no exception: the run goes on as without it
