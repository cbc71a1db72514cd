"""The sglang_progress callback: where a rollout stopped when a host became unreachable during its turn."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.callback.sglang_progress import CallbackModule


class Named:
    def __init__(self, name: str, action: str = "ansible.builtin.uri") -> None:
        self.name, self.action = name, action

    def get_name(self) -> str:
        return self.name


class Play:
    def __init__(self, variables: dict[str, Any]) -> None:
        self.variables = variables

    def get_vars(self) -> dict[str, Any]:
        return self.variables


class Result:
    def __init__(self, host: str, task: Named, result: dict[str, Any]) -> None:
        self.host, self.task, self.result = Named(host), task, result


class Display:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def display(self, line: str, **_kwargs: Any) -> None:
        self.lines.append(line)


def callback() -> tuple[CallbackModule, Display]:
    plugin = CallbackModule()
    plugin._display = Display()  # type: ignore[assignment]
    return plugin, plugin._display  # type: ignore[return-value]


ROUTERS = Named("Set this server in the routers to absent", "sglang.deploy.sglang_router_workers")


def routers(state: str) -> dict[str, Any]:
    """What routers.yml's loop over the routers returns."""
    return {"results": [{"invocation": {"module_args": {"state": state, "api_key": "VALUE_SPECIFIED_IN_NO_LOG"}}}]}


def test_a_host_unreachable_in_its_turn_is_named_with_whether_it_left_the_routers() -> None:
    plugin, display = callback()
    plugin.v2_playbook_on_play_start(Play({"sglang_rollout_play": "rollout"}))
    plugin.v2_runner_on_ok(Result("w1", ROUTERS, routers("absent")))
    plugin.v2_runner_on_ok(Result("w1", ROUTERS, routers("present")))  # w1 rolled and came back
    plugin.v2_runner_on_ok(Result("w2", ROUTERS, routers("absent")))
    plugin.v2_runner_on_unreachable(Result("w2", Named("Wait until in-flight and queued requests reach zero"),
                                           {"msg": "Failed to create temporary directory"}))
    plugin.v2_playbook_on_stats(None)
    assert display.lines == [
        "ROLLOUT STOPPED at w2: it became unreachable during its turn (Wait until in-flight and queued requests "
        "reach zero: Failed to create temporary directory). It had left the routers and stays out of them: a "
        "rerun puts it back once it serves again. Hosts after it were not touched. Once it answers again, run "
        "the playbook again."]


def test_outside_a_rolling_play_nothing_is_said() -> None:
    plugin, display = callback()
    plugin.v2_playbook_on_play_start(Play({}))
    plugin.v2_runner_on_unreachable(Result("w1", Named("Read the host"), {"msg": "unreachable"}))
    plugin.v2_playbook_on_play_start(Play({"sglang_rollout_play": "reboots"}))
    plugin.v2_runner_on_unreachable(Result("w2", Named("Wait until the host answers again"), {"msg": "timed out"}))
    plugin.v2_playbook_on_stats(None)
    assert len(display.lines) == 1 and display.lines[0].startswith("REBOOTS STOPPED at w2: ")
    assert "It had not left the routers." in display.lines[0]


def test_a_wait_that_ends_ready_says_so_once_even_without_a_retry() -> None:
    """A load that ended before the first poll (or between two) still shows how it ended and how long it
    took; a started async job, a still-running poll and a failure print nothing here."""
    plugin, display = callback()
    task = Named("Wait for a real generation", "sglang.deploy.sglang_ready")
    plugin.v2_runner_on_ok(Result("w1", task, {"started": 1, "finished": 0}))
    plugin.v2_runner_on_ok(Result("w1", task, {"finished": False, "sglang_progress": {"describe": "loading"}}))
    plugin.v2_runner_on_ok(Result("w1", task, {"finished": True, "ready": False}))
    assert display.lines == []
    ready = {"finished": True, "ready": True, "unit": "sglang-kimi.service", "describe": "fired up",
             "elapsed_s": 41.6, "health": "HTTP 200"}
    plugin.v2_runner_on_ok(Result("w1", task, ready))
    assert display.lines == ["  [w1] sglang-kimi.service: fired up, 42 s, health HTTP 200"]
