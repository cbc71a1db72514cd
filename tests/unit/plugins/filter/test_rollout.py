"""The rollout filters: deploy.yml's serial (servers per batch, a multi-node server always in one batch) and
the plan the rolling play prints before it drains any server."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.filter import rollout
from ansible_collections.sglang.deploy.plugins.filter.rollout import rollout_batches as batches

SINGLES = {"sglang_workers": ["w1", "w2", "w3"]}


@pytest.mark.parametrize(("serial", "expected"), [
    (1, [1, 1, 1]), ("1", [1, 1, 1]), (2, [2, 1]), (5, [3]), ("34%", [1, 1, 1]), ("67%", [2, 1]), ("100%", [3]),
])
def test_count_or_percentage_of_servers(serial: object, expected: list[int]) -> None:
    assert batches(SINGLES, serial) == expected


def test_a_multinode_server_is_one_unit() -> None:
    groups = {"sglang_workers": ["a0", "a1", "w1", "w2"], "sglang_multinode_big": ["a0", "a1"]}
    assert batches(groups, 1) == [2, 1, 1]
    assert batches(groups, 2) == [3, 1]


def test_members_apart_in_the_order_are_refused() -> None:
    groups = {"sglang_workers": ["a0", "w1", "a1"], "sglang_multinode_big": ["a0", "a1"]}
    with pytest.raises(AnsibleFilterError, match="next to each other"):
        batches(groups, 1)


FLEET = {"sglang_workers": ["a0", "a1", "w1", "w2", "w3", "w4"], "sglang_multinode_big": ["a0", "a1"]}


def test_only_the_servers_that_restart_are_batched() -> None:
    groups = dict(FLEET, sglang_rollout_restart=["w3", "a1", "a0"], sglang_rollout_keep=["w1", "w2", "w4"])
    assert batches(groups, 1, "sglang_rollout_restart") == [2, 1]  # the multi-node server, then w3
    # A percentage is of the whole fleet's units (5): 40 % = 2 units per batch, whatever restarts.
    assert batches(groups, "40%", "sglang_rollout_restart") == [3]
    assert batches(groups, 1, "sglang_rollout_restart", parallel=True) == [3]
    assert batches(dict(FLEET, sglang_rollout_restart=[]), 1, "sglang_rollout_restart") == [1]


def test_a_multinode_server_restarts_whole_or_not_at_all() -> None:
    with pytest.raises(AnsibleFilterError, match="as one unit"):
        batches(dict(FLEET, sglang_rollout_restart=["a0", "w1"]), 1, "sglang_rollout_restart")


def test_the_rollout_plan_names_each_batch_and_the_servers_left_alone() -> None:
    groups = dict(FLEET, sglang_rollout_restart=["w3", "a0", "a1"], sglang_rollout_keep=["w1", "w2", "w4"])
    assert rollout.rollout_plan(groups, 1) == (
        "ROLLOUT PLAN: 3 servers restart in 2 batches (sglang_rolling_serial 1), each drained, restarted and back "
        "before the next: batch 1: a0, a1; batch 2: w3. Unchanged and serving, not drained: w1, w2, w4.")
    assert rollout.rollout_plan(groups, 1, True) == (
        "ROLLOUT PLAN: first install, no server runs yet: a0, a1, w3 start together. Unchanged and serving, not "
        "drained: w1, w2, w4.")
    nothing = dict(FLEET, sglang_rollout_keep=FLEET["sglang_workers"])
    assert rollout.rollout_plan(nothing, 1) == ("ROLLOUT PLAN: no server restarts. Unchanged and serving, not drained: "
                                                "a0, a1, w1, w2, w3, w4.")


def test_the_reboot_plan_reads_the_reboot_groups() -> None:
    groups = dict(FLEET, sglang_reboot=["w4", "w1"], sglang_reboot_not=["a0", "a1", "w2", "w3"],
                  sglang_rollout_restart=["w2"])
    assert rollout.rollout_plan(groups, 1, False, "reboot") == (
        "REBOOT PLAN: 2 servers reboot in 2 batches (sglang_rolling_serial 1), each drained, rebooted and back "
        "before the next: batch 1: w1; batch 2: w4. No reboot pending, not drained: a0, a1, w2, w3.")
    assert rollout.rollout_plan(dict(FLEET, sglang_reboot_not=["w1"]), 1, False, "reboot") == (
        "REBOOT PLAN: no server reboots. No reboot pending, not drained: w1.")
    with pytest.raises(AnsibleFilterError, match="action 'drain'; allowed: restart, reboot"):
        rollout.rollout_plan(groups, 1, False, "drain")


@pytest.mark.parametrize("serial", [0, "-1", "0%", "150%", "half"])
def test_a_bad_serial_names_the_variable(serial: object) -> None:
    with pytest.raises(AnsibleFilterError, match="sglang_rolling_serial"):
        batches(SINGLES, serial)


def test_the_plan_says_what_changes_on_each_host() -> None:
    groups = dict(FLEET, sglang_rollout_restart=["w1", "w3"], sglang_rollout_keep=["a0", "a1", "w2", "w4"])
    why = {"w1": ["driver 580.95.05 -> 580.105.08", "REBOOTS"], "w3": ["new sglang-kimi.service"], "w2": [],
           "w4": ["reboot pending (/run/reboot-required): left for playbooks/reboot.yml"]}
    assert rollout.rollout_plan(groups, 1, False, "restart", why) == (
        "ROLLOUT PLAN: 2 servers restart in 2 batches (sglang_rolling_serial 1), each drained, restarted and back "
        "before the next: batch 1: w1 (driver 580.95.05 -> 580.105.08; REBOOTS); batch 2: w3 (new "
        "sglang-kimi.service). Unchanged and serving, not drained: a0, a1, w2, w4 (reboot pending "
        "(/run/reboot-required): left for playbooks/reboot.yml).")


MULTI = {"sglang_workers": ["a", "b", "c", "d", "e"], "sglang_multinode_x": ["c", "d"]}


@pytest.mark.parametrize(("serial", "restarting", "parallel", "numbers"), [
    (1, ["b", "d"], False, {"b": 1, "c": 2, "d": 2}),               # a multi-node server restarts whole
    ("50%", ["a", "b", "c", "e"], False, {"a": 1, "b": 1, "c": 2, "d": 2, "e": 2}),
    (1, ["a", "e"], True, {"a": 1, "e": 1}),                        # a first install: one batch
    (1, [], False, {}),
])
def test_batch_numbers_are_the_rolling_plays_batches(serial: object, restarting: list[str], parallel: bool,
                                                     numbers: dict[str, int]) -> None:
    assert rollout.rollout_batch_numbers(MULTI, serial, restarting, parallel) == numbers
    members = {**MULTI, "sglang_rollout_restart": sorted(numbers)}
    sizes = batches(members, serial, "sglang_rollout_restart", parallel) if numbers else []
    assert [list(numbers.values()).count(n) for n in range(1, len(sizes) + 1)] == sizes


def test_the_plan_gives_each_batchs_expected_downtime_and_the_rolls() -> None:
    groups = {"sglang_workers": ["a", "b", "c"], "sglang_rollout_restart": ["a", "c"], "sglang_rollout_keep": ["b"]}
    both = rollout.rollout_plan(groups, 1, False, "restart", {}, {"a": 70.0, "b": None, "c": 80.4})
    assert ("Expected downtime per batch (its slowest host's last load, drain not counted): batch 1: 70 s, "
            "batch 2: 80 s; the roll at least 2.5 min. Unchanged") in both
    one = rollout.rollout_plan(groups, 1, False, "restart", {}, {"a": 70.0, "c": None})
    assert "batch 1: 70 s, batch 2: unknown; the roll at least 1.2 min (no load recorded yet: c). " in one
    assert "unknown (no load recorded on these hosts yet)" in rollout.rollout_plan(groups, 2, False, "restart", {}, {})
    first = rollout.rollout_plan(groups, 1, True, "restart", {}, {"a": 70.0, "c": 80.0})
    assert "start together. Expected time until they serve (the slowest host's last load): batch 1: 80 s" in first
    assert "Expected" not in rollout.rollout_plan(groups, 1)


def test_the_plan_gives_each_restarting_hosts_load_speed_advice() -> None:
    groups = {"sglang_workers": ["a", "b", "c"], "sglang_rollout_restart": ["a", "c"], "sglang_rollout_keep": ["b"]}
    advice = {"a": "lever: presharded, up to 564 s faster (why)", "b": "not shown: b does not restart", "c": None}
    plan = rollout.rollout_plan(groups, 1, False, "restart", {}, {"a": 700.0}, advice)
    assert ("the roll at least 11.7 min (no load recorded yet: c). "
            "Load speed on a: lever: presharded, up to 564 s faster (why). Unchanged and serving") in plan
    assert "Load speed on b" not in plan and "Load speed on c" not in plan
    first = rollout.rollout_plan(groups, 1, True, "restart", {}, None, advice)
    assert "start together. Load speed on a: lever: presharded" in first
    assert "Load speed" not in rollout.rollout_plan(groups, 1, False, "restart", {}, {"a": 700.0})


def test_the_plan_names_the_refused_hosts_first_and_what_the_others_would_have_done() -> None:
    """deploy.yml prints the whole plan before it refuses: the refused hosts (group sglang_rollout_refused, in no
    batch and not left alone) with every reason, in inventory order, then the plan of the others."""
    groups = dict(FLEET, sglang_rollout_restart=["w3"], sglang_rollout_keep=["a0", "a1", "w1"],
                  sglang_rollout_refused=["w4", "w2"])
    refusals = {"a0": [], "w4": ["sglang_hicache_ratio: 9.0 needs 1.9 TiB of host memory; 1.0 TiB is free"],
                "w2": ["the NVIDIA driver: nvidia_driver_version 'x' is not a version", "second reason"], "w3": []}
    assert rollout.rollout_plan(groups, 1, False, "restart", {"w3": ["new sglang-kimi.service"]}, None, None,
                                refusals) == (
        "REFUSED, so nothing changes on any host: w2 (the NVIDIA driver: nvidia_driver_version 'x' is not a "
        "version; second reason); w4 (sglang_hicache_ratio: 9.0 needs 1.9 TiB of host memory; 1.0 TiB is free). "
        "Had they not been: ROLLOUT PLAN: 1 server restarts in 1 batch (sglang_rolling_serial 1), each drained, "
        "restarted and back before the next: batch 1: w3 (new sglang-kimi.service). Unchanged and serving, not "
        "drained: a0, a1, w1.")
    # Nobody refused (every list empty, or no refusals given): the plan alone, as before.
    assert rollout.rollout_plan(groups, 1, False, "restart", None, None, None, {"w3": []}) == rollout.rollout_plan(
        groups, 1)
