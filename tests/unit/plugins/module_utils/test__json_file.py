"""The JSON state files of the modules: read as an object or not at all, replaced atomically."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

import pytest
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


def _outside(tmp_path: Path) -> Path:
    """A file outside the records' directory that a planted link points at: its content and mode must not change."""
    outside = tmp_path / "etc-shadow"
    outside.write_text("root:secret\n")
    outside.chmod(0o600)
    return outside


def test_a_link_planted_at_the_record_is_replaced_not_followed(tmp_path: Path) -> None:
    """The service user owned the directory the records used to live in: a link at the record's name, or at the
    temporary name the old writer used (<record>.<pid>.tmp), must not make root write or chmod what it points to."""
    outside = _outside(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    record = home / "kimi.observed.json"
    record.symlink_to(outside)
    (home / f"kimi.observed.json.{os.getpid()}.tmp").symlink_to(outside)
    replace_atomically(str(record), {"startup": {"kv_tokens": 1}}, mode=0o644)
    assert outside.read_text() == "root:secret\n" and stat.S_IMODE(outside.stat().st_mode) == 0o600
    assert not record.is_symlink() and json.loads(record.read_text()) == {"startup": {"kv_tokens": 1}}
    assert stat.S_IMODE(record.stat().st_mode) == 0o644 and record.stat().st_uid == os.geteuid()
    assert sorted(p.name for p in home.iterdir()) == ["kimi.observed.json", f"kimi.observed.json.{os.getpid()}.tmp"]


def test_the_temporary_name_is_private_and_cannot_be_planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's temporary file is created exclusively (mkstemp: O_EXCL, O_NOFOLLOW): a link planted at the name
    it draws is not opened; it draws another name, and what the link points to is untouched."""
    outside = _outside(tmp_path)
    names = iter(["planted", "fresh"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    (tmp_path / ".kimi.disk.json.planted.tmp").symlink_to(outside)
    replace_atomically(str(tmp_path / "kimi.disk.json"), {"gb_per_s": 5.5}, mode=0o644)
    assert outside.read_text() == "root:secret\n" and stat.S_IMODE(outside.stat().st_mode) == 0o600
    assert read_object(str(tmp_path / "kimi.disk.json")) == {"gb_per_s": 5.5}
    assert (tmp_path / ".kimi.disk.json.planted.tmp").is_symlink()


def test_a_missing_records_directory_is_created_private(tmp_path: Path) -> None:
    target = tmp_path / "sglang-deploy" / "records" / "kimi.disk.json"
    replace_atomically(str(target), {"a": 1})
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(target.parent.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_record_another_user_wrote_or_linked_is_not_read(tmp_path: Path) -> None:
    """What the service user (uid 65534 here) could forge is not trusted: its own file, a link to a root file, a
    hard link to one; root's own regular file is read."""
    data = {"startup": {"kv_tokens": 154998}}
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    os.chown(forged, 65534, 65534)
    assert read_object(str(forged)) is None
    real = tmp_path / "real.json"
    real.write_text(json.dumps(data))
    assert read_object(str(real)) == data
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert read_object(str(link)) is None
    os.link(real, tmp_path / "hard.json")
    assert read_object(str(tmp_path / "hard.json")) is None and read_object(str(real)) is None
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert read_object(str(fifo)) is None  # not opened for a blocking read: not a regular file
