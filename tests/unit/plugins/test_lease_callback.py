"""The lease callback: a run that took the rollout lease and ended before its own release gives it back, against
the lease host with the run's inventories and extra variables; a released lease, or another's, is left alone."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from ansible import context
from ansible_collections.sglang.deploy.plugins.callback import lease as lease_callback
from ansible_collections.sglang.deploy.plugins.callback.lease import CallbackModule

LEASE = "sglang.deploy.rollout_lease"


class Named:
    def __init__(self, name: str, action: str = LEASE) -> None:
        self.name, self.action = name, action

    def get_name(self) -> str:
        return self.name


class Result:
    def __init__(self, state: str, holder: str, host: str = "router-1", **result: Any) -> None:
        self.host, self.task = Named("gpu-node-1"), Named("Take the rollout lease")
        args = {"state": state, "path": "/var/lib/sglang-deploy/rollout-lease.json", "holder": {"id": holder}}
        self.result = {"invocation": {"module_args": args}, "host": host, "lease": {"id": holder}, **result}


class Display:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def display(self, line: str, **_kwargs: Any) -> None:
        self.lines.append(line)


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def run(argv: list[str], **_kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "router-1 | CHANGED", "")

    monkeypatch.setattr(lease_callback.subprocess, "run", run)
    monkeypatch.setattr(context, "CLIARGS", {"inventory": ("inventory/example",), "extra_vars": ("hicache_ratio=3.0",)})
    return calls


def plugin() -> tuple[CallbackModule, Display]:
    callback = CallbackModule()
    callback._display = Display()  # type: ignore[assignment]
    return callback, callback._display  # type: ignore[return-value]


def test_a_run_that_ends_holding_the_lease_gives_it_back(ran: list[list[str]]) -> None:
    callback, display = plugin()
    callback.v2_runner_on_ok(Result("held", "run-a"))
    callback.v2_playbook_on_stats(None)
    (argv,) = ran
    assert argv[argv.index("ansible.cli.adhoc") + 1] == "router-1"
    assert json.loads(argv[argv.index("-a") + 1]) == {"state": "released", "holder": {"id": "run-a"},
                                                      "path": "/var/lib/sglang-deploy/rollout-lease.json"}
    assert argv[argv.index("-i") + 1] == "inventory/example" and argv[argv.index("-e") + 1] == "hicache_ratio=3.0"
    assert display.lines[0].startswith("ROLLOUT LEASE given back on router-1")


def test_a_run_that_released_it_or_never_held_it_does_nothing(ran: list[list[str]]) -> None:
    callback, _display = plugin()
    callback.v2_runner_on_ok(Result("held", "run-a"))
    callback.v2_runner_on_ok(Result("released", "run-a"))
    callback.v2_playbook_on_stats(None)
    refused, _display = plugin()  # a second operator's run, refused: the module failed, nothing was held
    refused.v2_runner_on_ok(Result("read", "run-b"))
    refused.v2_playbook_on_stats(None)
    checked, _display = plugin()
    checked.v2_runner_on_ok(Result("held", "run-c", _ansible_check_mode=True))
    checked.v2_playbook_on_stats(None)
    assert ran == []


def test_a_release_that_fails_says_how_to_take_the_lease_over(monkeypatch: pytest.MonkeyPatch,
                                                              ran: list[list[str]]) -> None:
    monkeypatch.setattr(lease_callback.subprocess, "run", lambda argv, **_kwargs: subprocess.CompletedProcess(
        argv, 4, "", "router-1 | UNREACHABLE!"))
    callback, display = plugin()
    callback.v2_runner_on_ok(Result("held", "run-a"))
    callback.v2_playbook_on_stats(None)
    assert "ROLLOUT LEASE NOT given back on router-1" in display.lines[0]
    assert display.lines[0].endswith("-e sglang_rollout_lease_takeover=run-a.")
