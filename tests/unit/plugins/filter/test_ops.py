"""deploy.yml's serial: servers per batch, with a multi-node server always in one batch."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.filter.ops import rollout_batches as batches

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


@pytest.mark.parametrize("serial", [0, "-1", "0%", "150%", "half"])
def test_a_bad_serial_names_the_variable(serial: object) -> None:
    with pytest.raises(AnsibleFilterError, match="sglang_rolling_serial"):
        batches(SINGLES, serial)
