"""The stamp filters: the digest of a role's inputs and code, the role's directory and the stamp's verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.filter import stamp as stamp_filter
from helpers import ROOT


def test_stamp_digest_covers_the_inputs_and_the_code(tmp_path: Path) -> None:
    role = tmp_path / "role"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text("---\n")
    base = stamp_filter.stamp_digest({"b": 1, "a": [1, 2]}, [str(role)])
    assert base == stamp_filter.stamp_digest({"a": [1, 2], "b": 1}, [str(role)])  # key order does not matter
    assert base != stamp_filter.stamp_digest({"a": [2, 1], "b": 1}, [str(role)])
    (role / "__pycache__").mkdir()
    (role / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (role / "tasks" / "y.pyc").write_bytes(b"\0")
    assert stamp_filter.stamp_digest({"b": 1, "a": [1, 2]}, [str(role)]) == base  # byte-code caches do not count
    (role / "tasks" / "main.yml").write_text("---\n# changed\n")
    assert stamp_filter.stamp_digest({"b": 1, "a": [1, 2]}, [str(role)]) != base
    with pytest.raises(AnsibleFilterError, match="is not a directory"):
        stamp_filter.stamp_digest({}, [str(tmp_path / "missing")])


def test_stamp_digest_of_the_trees_read_before_the_fork_is_the_streamed_one(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """before_fork (the prefork callback) keeps the collection's trees in memory: the digest is the same as when
    each worker reads them, and it is what the run started with."""
    monkeypatch.setattr(stamp_filter, "_TREES", {})
    (tmp_path / "plugins" / "filter").mkdir(parents=True)
    (tmp_path / "plugins" / "filter" / "f.py").write_text("x = 1\n")
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text("---\n")
    paths = [str(tmp_path / "roles" / "r"), str(tmp_path / "roles" / "r" / ".." / ".." / "plugins")]
    streamed = stamp_filter.stamp_digest({"a": 1}, paths)
    stamp_filter.before_fork(str(tmp_path))
    assert stamp_filter.stamp_digest({"a": 1}, paths) == streamed
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text("---\n# changed during the run\n")
    assert stamp_filter.stamp_digest({"a": 1}, paths) == streamed


@pytest.mark.parametrize("role", ["nvidia_driver", "sglang_stack", "sglang_weights"])
def test_role_dir_is_the_role_that_runs_and_keeps_the_stamps_digest(role: str) -> None:
    """role_dir replaced role_path in the install roles' code paths (deploy.yml decides their stamps outside
    them): it must name the same files, so that a host stamped before still converges (the same digest)."""
    assert Path(stamp_filter.role_dir(role)).samefile(ROOT / "roles" / role)
    before = [str(ROOT / "roles" / role), str(ROOT / "roles" / role / ".." / ".." / "plugins")]
    after = [stamp_filter.role_dir(role), stamp_filter.role_dir(role) + "/../../plugins"]
    assert stamp_filter.stamp_digest({"a": 1}, after) == stamp_filter.stamp_digest({"a": 1}, before)


@pytest.mark.parametrize("name", ["sglang_stak", "../roles/sglang_stack", ""])
def test_role_dir_refuses_a_role_the_collection_lacks(name: str) -> None:
    with pytest.raises(AnsibleFilterError, match=r"has no role .*it has .*sglang_stack"):
        stamp_filter.role_dir(name)


@pytest.mark.parametrize(("stamp", "enabled", "converged", "why"), [
    ({"found": True, "digest": "d", "drift": []}, True, True, ""),
    ({"found": True, "digest": "d", "drift": []}, False, False, "not trusted"),
    ({"found": False, "digest": None, "drift": ["no stamp: the role has not converged"]}, True, False, "no stamp"),
    (None, True, False, "no stamp was read"),
    ({"found": True, "digest": "old", "drift": []}, True, False, "its inputs changed"),
    ({"found": True, "digest": "d", "drift": ["path /a: x -> absent", "unit u: y -> z"]}, True, False,
     "the host moved since it last converged here: path /a: x -> absent; unit u: y -> z"),
])
def test_stamp_state(stamp: object, enabled: bool, converged: bool, why: str) -> None:
    state = stamp_filter.stamp_state(stamp, "d", enabled)
    assert state["converged"] is converged and state["digest"] == "d" and why in state["why"]
    assert bool(state["why"]) is not converged
