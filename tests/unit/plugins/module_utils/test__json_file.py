"""The JSON state files of the modules: read as an object or not at all, replaced atomically."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.module_utils._json_file import read_object, replace_atomically


def test_the_recorded_start_is_read_when_there_is_one(tmp_path: Path) -> None:
    record = tmp_path / "kimi.observed.json"
    assert read_object(str(record)) is None
    data = {"recorded_at": "2026-12-01T10:00:00Z", "startup": {"kv_tokens": 154998}}
    record.write_text(json.dumps(data))
    assert read_object(str(record)) == data
    record.write_text("[1, 2]")
    assert read_object(str(record)) is None
    record.write_text("{")
    assert read_object(str(record)) is None


def test_a_file_is_replaced_whole_with_its_mode_and_no_partial_file_is_left(tmp_path: Path) -> None:
    target = tmp_path / "state" / "kimi.observed.json"
    replace_atomically(str(target), {"a": 1}, mode=0o644)
    replace_atomically(str(target), {"b": 2}, mode=0o644)
    assert read_object(str(target)) == {"b": 2}
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in target.parent.iterdir()] == ["kimi.observed.json"]
