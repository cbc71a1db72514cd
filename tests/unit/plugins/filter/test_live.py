"""Live changes: a change of the settings SGLang 0.5.23 takes at runtime (POST /set_internal_state) is applied
without a restart; anything else, or anything the decision cannot prove, restarts as before."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.filter import live, restart
from ansible_collections.sglang.deploy.plugins.module_utils import _live
from hypothesis import given
from hypothesis import strategies as st

HEAD = "[Unit]\nDescription=SGLang server kimi\n\n[Service]\nType=simple\n"
PYTHON = ["/opt/sglang/0.5.23/venv/bin/python", "-m", "sglang.launch_server"]
BASE = ["--model-path", "/models/kimi-k2.5", "--hicache-ratio", "2.0"]
FILES = [{"dest": "/etc/systemd/system/sglang-kimi.service", "template": "sglang.service.j2"},
         {"dest": "/etc/sglang/kimi.env", "template": "sglang.env.j2"}]
ENV = 'CUDA_DEVICE_ORDER="PCI_BUS_ID"\n'
SINGLE = "--speculative-accept-threshold-single"


def unit(*extra: str, tail: str = "KillMode=mixed\n") -> str:
    words = PYTHON + BASE + list(extra)
    return HEAD + "ExecStart=" + " \\\n    ".join(words) + "\n" + tail


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def host(unit_text: str, argv: list[str], held: Any = None, listening: Any = True, env: str = ENV,
         after_start: tuple[str, ...] = ()) -> dict[str, Any]:
    """What sglang_host_facts reads of a serving host: its files, unit, running server and the live values."""
    return {"files": {FILES[0]["dest"]: sha1(unit_text), FILES[1]["dest"]: sha1(env)},
            "unit": {"ActiveState": "active"}, "reboot": {"required": False},
            "unit_file": _live.unit_summary(unit_text),
            "running": {"pid": 4242, "argv": argv, "started": 1.0, "need_daemon_reload": False,
                        "changed_after_start": list(after_start), "listening": listening, "live": held}}


DEFAULTS = {"speculative_accept_threshold_single": 1.0, "speculative_accept_threshold_acc": 1.0}


def decide(rendered: str, deployed: dict[str, Any], env: str = ENV) -> dict[str, Any]:
    return restart.restart_decision([rendered, env], FILES, deployed)


def test_a_threshold_change_alone_is_live_and_rewrites_the_unit() -> None:
    old = unit()
    plan = decide(unit(SINGLE, "0.7"), host(old, PYTHON + BASE, DEFAULTS))
    assert plan["restart"] is False
    assert plan["live"] == {"changes": {"speculative_accept_threshold_single": 0.7}, "unit": True,
                            "path": FILES[0]["dest"]}
    assert plan["files"] == [FILES[0]["dest"]]  # status shows the unit as drifted until it is rewritten
    assert plan["why"] == ["live: speculative_accept_threshold_single 1.0 -> 0.7 through POST /set_internal_state, "
                           "read back from /server_info; sglang-kimi.service rewritten; no restart"]


def test_after_the_live_change_a_rerun_does_nothing() -> None:
    """The unit says 0.7, the process was launched without it, the server holds 0.7: nothing to do, and the unit's
    change after the start (the live change wrote it) is no reason to restart."""
    new = unit(SINGLE, "0.7")
    held = dict(DEFAULTS, speculative_accept_threshold_single=0.7)
    plan = decide(new, host(new, PYTHON + BASE, held, after_start=(FILES[0]["dest"],)))
    assert (plan["restart"], plan["live"], plan["why"], plan["stale"]) == (False, None, [], [])


def test_a_killed_run_between_the_api_and_the_unit_only_rewrites_the_unit() -> None:
    held = dict(DEFAULTS, speculative_accept_threshold_single=0.7)
    plan = decide(unit(SINGLE, "0.7"), host(unit(), PYTHON + BASE, held))
    assert plan["restart"] is False and plan["live"]["changes"] == {} and plan["live"]["unit"] is True
    assert plan["why"] == ["live: the unit catches up with the server; sglang-kimi.service rewritten; no restart"]


def test_a_server_that_lost_the_live_value_gets_it_again() -> None:
    """The unit says 0.7 and the server holds 1.0 (the API call of a killed run never reached it): set again."""
    new = unit(SINGLE, "0.7")
    plan = decide(new, host(new, PYTHON + BASE, DEFAULTS, after_start=(FILES[0]["dest"],)))
    assert plan["restart"] is False and plan["live"]["changes"] == {"speculative_accept_threshold_single": 0.7}
    assert plan["live"]["unit"] is False


def test_removing_the_flag_returns_the_server_to_sglangs_default() -> None:
    old = unit(SINGLE, "0.7")
    held = dict(DEFAULTS, speculative_accept_threshold_single=0.7)
    plan = decide(unit(), host(old, PYTHON + BASE + [SINGLE, "0.7"], held))
    assert plan["live"]["changes"] == {"speculative_accept_threshold_single": 1.0} and not plan["restart"]


@pytest.mark.parametrize(("rendered", "deployed", "why"), [
    # A live and a restart setting together: one restart applies both.
    (unit(SINGLE, "0.7", "--page-size", "64"), host(unit(), PYTHON + BASE, DEFAULTS), "new sglang-kimi.service"),
    # Another line of the unit changed too.
    (unit(SINGLE, "0.7", tail="KillMode=mixed\nNice=5\n"), host(unit(), PYTHON + BASE, DEFAULTS),
     "new sglang-kimi.service"),
    # The process runs something else than its unit (an older launch): stale, whatever the live values.
    (unit(SINGLE, "0.7"), host(unit(), PYTHON + ["--model-path", "/models/other"], DEFAULTS),
     "new sglang-kimi.service"),
    # Still loading (its port is not open): it cannot take a change.
    (unit(SINGLE, "0.7"), host(unit(), PYTHON + BASE, None, listening=False), "new sglang-kimi.service"),
    # A multi-node server: only node 0 serves HTTP.
    (unit(SINGLE, "0.7", "--nnodes", "2"), host(unit("--nnodes", "2"), PYTHON + BASE + ["--nnodes", "2"], DEFAULTS),
     "new sglang-kimi.service"),
    # A value SGLang could not parse is no live change.
    (unit(SINGLE, "x"), host(unit(), PYTHON + BASE, DEFAULTS), "new sglang-kimi.service"),
])
def test_anything_else_restarts(rendered: str, deployed: dict[str, Any], why: str) -> None:
    plan = decide(rendered, deployed)
    assert plan["restart"] is True and plan["live"] is None and plan["why"][0] == why


def test_another_file_changing_restarts() -> None:
    plan = decide(unit(SINGLE, "0.7"), host(unit(), PYTHON + BASE, DEFAULTS), env=ENV + 'X="1"\n')
    assert plan["restart"] is True and plan["live"] is None


def test_a_server_that_does_not_answer_server_info_is_set_again() -> None:
    """Unread values (None): set whatever the unit says; the read-back after the change decides."""
    plan = decide(unit(SINGLE, "0.7"), host(unit(), PYTHON + BASE, None))
    assert plan["live"]["changes"] == {"speculative_accept_threshold_single": 0.7, "speculative_accept_threshold_acc":
                                       1.0}
    in_sync = decide(unit(), host(unit(), PYTHON + BASE, None))
    assert (in_sync["restart"], in_sync["live"]) == (False, None)


def test_a_stopped_unit_starts_whatever_changed() -> None:
    deployed = host(unit(), PYTHON + BASE, DEFAULTS)
    deployed["unit"] = {"ActiveState": "inactive"}
    plan = decide(unit(SINGLE, "0.7"), deployed)
    assert plan["restart"] is True and plan["live"] is None


def test_split_live_reads_both_spellings() -> None:
    argv = PYTHON + [SINGLE, "0.5", "--speculative-accept-threshold-acc=0.9", "--port", "30000"]
    values = {"speculative_accept_threshold_single": "0.5", "speculative_accept_threshold_acc": "0.9"}
    assert _live.split_live(argv) == (PYTHON + ["--port", "30000"], values)
    assert _live.live_values(PYTHON) == DEFAULTS


def test_unit_rest_ignores_only_the_exec_line_and_its_continuations() -> None:
    assert _live.unit_rest(unit()) == _live.unit_rest(unit(SINGLE, "0.7"))
    assert _live.unit_rest(unit()) != _live.unit_rest(unit(tail="KillMode=control-group\n"))
    assert _live.unit_summary(None) is None


INFO = {"version": "0.5.23", "speculative_accept_threshold_single": 1.0,
        "internal_states": [{"speculative_accept_threshold_single": 0.7, "speculative_accept_threshold_acc": 1.0}]}


def test_the_read_back_uses_the_internal_states_not_the_launch_values() -> None:
    """0.5.23's /server_info as the real server answered it after POST /set_internal_state (an engine run on this
    machine's CPU, 2026-12-05): the top level keeps the launch's 1.0, internal_states hold the override."""
    assert live.live_readback(INFO, {"speculative_accept_threshold_single": 0.7}) == []
    assert live.live_readback(INFO, {"speculative_accept_threshold_single": 0.5}) == [
        "speculative_accept_threshold_single: holds 0.7, wanted 0.5"]
    # Two data-parallel ranks that disagree hold nothing readable.
    split = dict(INFO, internal_states=[INFO["internal_states"][0], DEFAULTS])
    assert _live.server_values(split) is None
    assert live.live_readback({}, {"speculative_accept_threshold_acc": 1.0}) == [
        "speculative_accept_threshold_acc: holds nothing readable, wanted 1.0"]


@given(st.lists(st.text(min_size=0, max_size=12), max_size=12),
       st.sampled_from(["0.5", "1", "1.0", "0.25"]))
def test_split_live_never_loses_or_invents_a_word(words: list[str], value: str) -> None:
    """Whatever the other words are, splitting out the live flags keeps every other word in order, and putting a
    live flag in changes nothing else."""
    rest, _values = _live.split_live(words)
    rest_with, values_with = _live.split_live([*words, SINGLE, value]) if words[-1:] not in (
        [SINGLE], ["--speculative-accept-threshold-acc"]) else (rest, {})
    if values_with:
        assert rest_with == rest and values_with["speculative_accept_threshold_single"] == value
    assert all(word in words for word in rest)


@pytest.mark.parametrize(("bind", "port", "url"), [
    ("0.0.0.0", 30000, "http://127.0.0.1:30000"), ("::", "30000", "http://127.0.0.1:30000"),
    ("", 8, "http://127.0.0.1:8"), ("localhost", 8, "http://127.0.0.1:8"), (None, 8, "http://127.0.0.1:8"),
    ("10.0.0.5", 30000, "http://10.0.0.5:30000"), ("fd00::5", 30000, "http://[fd00::5]:30000"),
    ("::1", 30000, "http://[::1]:30000"),
])
def test_server_url_is_where_this_host_reaches_its_own_server(bind: object, port: object, url: str) -> None:
    """One rule for the role's calls (sglang_service_base_url) and sglang_host_facts' /server_info read."""
    assert live.server_url(bind, port) == url
