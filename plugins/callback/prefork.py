# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load this collection's Jinja plugins and lookups, and each play's connection plugin, once in Ansible's main
process, so that the worker Ansible forks for every task and host inherits them instead of loading them again."""

from __future__ import annotations

DOCUMENTATION = r"""
name: prefork
type: aggregate
short_description: Load the collection's plugins once, before Ansible forks a worker per task and host
version_added: "2.0.0"
description:
  - Ansible runs every task on every host in a process forked from its main process. What that process has
    already loaded, the fork inherits; whatever a worker loads (a filter's Python module compiled from source,
    a connection plugin and the YAML of its documentation, the builtin Jinja tests) is lost when it exits, and
    the next task loads it again. On a no-op deploy that was about a third of the controller's CPU.
  - At the start of the run this callback loads, in the main process, every filter and lookup plugin of the
    collection it belongs to (and the Python modules they import), Ansible's builtin filters, tests and the
    lookups the roles use, and compiles one template (Jinja's lexer). At the start of each play it loads the
    connection plugin of the play's first host, with its configuration definitions.
  - A filter, test or lookup file of the collection may define C(before_fork()), which the callback calls once,
    after loading it, to read what every worker would otherwise read again (the roles' argument specs, the code
    that the install roles' stamps digest).
  - It changes no result and no output. A plugin it cannot load is left to the worker that needs it, as
    without this callback (the worker then reports the error).
  - It does nothing when the run turns the fast no-op layer off (C(-e sglang_fast_noop=false), or the variable
    in the first host's inventory; C(docs/fast-noop.md)). It does nothing either on an ansible-core release it
    was not tested with (C(TESTED_ANSIBLE_CORE)), and says so in one warning, because it reads ansible-core's
    loaders and one private attribute of its variable manager, which a release may change.
requirements:
  - enabled in ansible.cfg (callbacks_enabled = sglang.deploy.prefork)
author:
  - sglang-deploy contributors (@sglang-deploy)
"""

import importlib
import pkgutil
import sys
from typing import Any

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import connection_loader, filter_loader, lookup_loader, test_loader
from ansible.release import __version__ as ANSIBLE_CORE_VERSION

COLLECTION = "sglang.deploy"
# The ansible-core releases (major.minor) this callback was tested with: requirements.txt pins the controller's (2.19),
# requirements-core-2.20.txt and requirements-core-2.21.txt the two the tests also run it on.
TESTED_ANSIBLE_CORE = ("2.19", "2.20", "2.21")
SWITCH = "sglang_fast_noop"
# Builtin lookups the roles call (every other builtin is loaded by the worker that needs it).
BUILTIN_LOOKUPS = ("ansible.builtin.template", "ansible.builtin.file")


def plugin_files(collection: str, kind: str) -> list[str]:
    """The Python files of a collection's plugins of one kind (filter, test, lookup), by module name."""
    try:
        package = importlib.import_module(f"ansible_collections.{collection}.plugins.{kind}")
    except ImportError:
        return []
    return sorted(info.name for info in pkgutil.iter_modules(package.__path__) if not info.ispkg)


def jinja_plugin_name(collection: str, kind: str) -> str | None:
    """A fully-qualified name of one of the collection's filters or tests: resolving any of them makes the loader
    load every file of that kind, so one name loads them all."""
    for name in plugin_files(collection, kind):
        module = importlib.import_module(f"ansible_collections.{collection}.plugins.{kind}.{name}")
        holder = getattr(module, "FilterModule" if kind == "filter" else "TestModule", None)
        functions = getattr(holder(), "filters" if kind == "filter" else "tests")() if holder else {}
        if functions:
            return f"{collection}.{next(iter(functions))}"
    return None


def release_tested(version: str, releases: tuple[str, ...] = TESTED_ANSIBLE_CORE) -> bool:
    """Whether an ansible-core version (2.19.14, 2.20.0rc1) is of a release the callback was tested with."""
    return ".".join(version.split(".")[:2]) in releases


def switched_off(value: Any) -> bool:
    """Whether a value of sglang_fast_noop turns the layer off (unset: on; not a boolean: the variable check
    refuses it, and the callback leaves the layer on)."""
    try:
        return value is not None and not boolean(value, strict=True)
    except TypeError:
        return False


def collection_modules(collection: str) -> dict[str, Any]:
    """The collection's filter, test and lookup modules loaded so far, by module name."""
    prefix = f"ansible_collections.{collection}.plugins."
    return {name: module for name, module in list(sys.modules.items())
            if name.startswith(prefix) and name.split(".")[-2] in ("filter", "test", "lookup")}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sglang.deploy.prefork"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._connections: set[str] = set()
        self._decided = False  # whether the first play has decided if the callback works in this run
        self._active = False

    def _load(self, what: str, load: Any) -> None:
        try:
            load()
        except Exception as error:  # pylint: disable=broad-except; the worker that needs it reports it
            self._display.vvv(f"prefork: {what} not loaded before the fork ({error})")

    def v2_playbook_on_play_start(self, play: Any) -> None:
        """Before the first task of each play forks a worker. The first play decides for the run, once it can read
        the switch (-e, or the first host's inventory)."""
        if not self._decided:
            self._decided = True
            self._active = self._works(play)
            if self._active:
                self._load_plugins()
        if self._active:
            self._load("the play's connection plugin", lambda: self._load_connection(play))

    def _works(self, play: Any) -> bool:
        if not release_tested(ANSIBLE_CORE_VERSION):
            self._display.warning(f"sglang.deploy.prefork: not tested with ansible-core {ANSIBLE_CORE_VERSION} "
                                  f"(tested: {', '.join(TESTED_ANSIBLE_CORE)}), so it does nothing; the run is as "
                                  "without it, only slower (docs/fast-noop.md)")
            return False
        if switched_off(self._switch(play)):
            self._display.vvv(f"sglang.deploy.prefork: {SWITCH} is off, nothing loaded before the forks")
            return False
        return True

    @staticmethod
    def _switch(play: Any) -> Any:
        """sglang_fast_noop as -e gives it, else as the first host of the play has it (None: unset or unreadable)."""
        try:
            variables = play.get_variable_manager()
            value = variables.extra_vars.get(SWITCH)
            if value is not None:
                return value
            hosts = variables._inventory.get_hosts(play.hosts)  # pylint: disable=protected-access
            return variables.get_vars(play=play, host=hosts[0]).get(SWITCH) if hosts else None
        except Exception:  # pylint: disable=broad-except; an unreadable pattern leaves the layer on
            return None

    def _load_plugins(self) -> None:
        for loader, kind, builtin in ((filter_loader, "filter", "ansible.builtin.to_json"),
                                      (test_loader, "test", "ansible.builtin.match")):
            for name in (builtin, jinja_plugin_name(COLLECTION, kind)):
                if name:
                    self._load(name, lambda loader=loader, name=name: loader.get(name))
        lookups = [f"{COLLECTION}.{name}" for name in plugin_files(COLLECTION, "lookup")]
        for name in (*lookups, *BUILTIN_LOOKUPS):
            self._load(name, lambda name=name: lookup_loader.get(name))
        self._load("Jinja's lexer", compile_one_template)
        for name, module in sorted(collection_modules(COLLECTION).items()):
            if callable(getattr(module, "before_fork", None)):
                self._load(f"{name}.before_fork()", module.before_fork)

    def _load_connection(self, play: Any) -> None:
        """The connection plugin of the play's first host, as its variables name it (ansible_connection), with
        its configuration definitions; each name once per run."""
        variables = play.get_variable_manager()
        hosts = variables._inventory.get_hosts(play.hosts)  # pylint: disable=protected-access
        if not hosts:
            return
        name = str(variables.get_vars(play=play, host=hosts[0]).get("ansible_connection") or "ssh")
        if name not in self._connections:
            self._connections.add(name)
            connection_loader.get(name, class_only=True)


def compile_one_template() -> None:
    """Compile and render one template: Jinja's lexer is cached for the whole process (ansible-core notes it
    should be made before forking)."""
    from ansible.template import Templar, trust_as_template  # pylint: disable=import-outside-toplevel

    Templar(variables={}).template(trust_as_template("{{ 1 | string }}"))
