"""The action plugin sglang_ready gives the module's poll the async_dir ansible-core configured, as the async_status
action plugin gets it (``get_shell_option('async_dir', default='~/.ansible_async')``), from a real shell plugin
whose options are set the way the task executor sets them (TaskExecutor._set_plugin_options: the variables the
shell plugin names, then ansible.cfg and the environment)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from ansible.plugins.loader import shell_loader
from ansible_collections.sglang.deploy.plugins.action.sglang_ready import ActionModule

POLL = {"unit": "sglang-kimi.service", "jid": "j123456789.4242", "status_file": "/run/x.ready.json"}


def action(args: dict[str, Any], async_val: int = 0, variables: dict[str, Any] | None = None) -> ActionModule:
    """The plugin for a task with these args, over a connection whose sh shell has the variables' options."""
    shell = shell_loader.get("sh")  # as ConnectionBase loads its shell (get_shell_plugin)
    shell.set_options(var_options=variables or {})
    connection = SimpleNamespace(_shell=shell, become=None)  # no has_native_async: the plugin reads none
    task = SimpleNamespace(args=args, async_val=async_val, check_mode=False, action="sglang.deploy.sglang_ready")
    return ActionModule(task, connection, play_context=None, loader=None, templar=None)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def no_configured_async_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANSIBLE_ASYNC_DIR", raising=False)


def test_without_configuration_the_poll_gets_ansibles_default() -> None:
    assert action(POLL).module_args() == dict(POLL, async_dir="~/.ansible_async")


def test_the_poll_gets_the_async_dir_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANSIBLE_ASYNC_DIR", "/srv/ansible-jobs")
    assert action(POLL).module_args()["async_dir"] == "/srv/ansible-jobs"


def test_the_poll_gets_the_async_dir_of_the_hosts_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANSIBLE_ASYNC_DIR", "/srv/ansible-jobs")
    assert action(POLL, variables={"ansible_async_dir": "/var/tmp/jobs"}).module_args()["async_dir"] == "/var/tmp/jobs"


def test_an_async_dir_the_task_sets_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANSIBLE_ASYNC_DIR", "/srv/ansible-jobs")
    assert action(dict(POLL, async_dir="/elsewhere")).module_args()["async_dir"] == "/elsewhere"


def test_the_wait_itself_gets_no_async_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANSIBLE_ASYNC_DIR", "/srv/ansible-jobs")
    wait = {"unit": "sglang-kimi.service", "url": "http://127.0.0.1:30000/health_generate"}
    assert action(wait, async_val=1590).module_args() == wait


@pytest.mark.parametrize(("args", "async_val"), [(POLL, 0), ({"unit": "u", "url": "http://h/health_generate"}, 1590)])
def test_run_executes_the_module_with_those_args_async_when_the_task_is(
        monkeypatch: pytest.MonkeyPatch, args: dict[str, Any], async_val: int) -> None:
    monkeypatch.setenv("ANSIBLE_ASYNC_DIR", "/srv/ansible-jobs")
    plugin = action(args, async_val=async_val)
    calls: list[dict[str, Any]] = []
    removed: list[Any] = []
    monkeypatch.setattr(plugin, "_execute_module", lambda **kwargs: calls.append(kwargs) or {"finished": False})
    monkeypatch.setattr(plugin, "_remove_tmp_path", removed.append)
    assert plugin.run(task_vars={"inventory_hostname": "h"}) == {"finished": False}
    assert calls == [{"module_args": plugin.module_args(), "task_vars": {"inventory_hostname": "h"},
                      "wrap_async": bool(async_val)}]
    assert calls[0]["module_args"].get("async_dir") == ("/srv/ansible-jobs" if "jid" in args else None)
    assert len(removed) == (0 if async_val else 1)  # an async job's wrapper removes its own tmp dir
