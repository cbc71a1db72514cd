"""The install filters: the files of a controller directory that a host lacks."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.filter import install


def test_files_to_copy_lists_what_the_host_lacks_or_holds_otherwise(tmp_path: Path) -> None:
    files_to_copy = install.files_to_copy
    for name, content in (("a.whl", b"a"), ("b.whl", b"b"), ("c.whl", b"c")):
        (tmp_path / name).write_bytes(content)
    found = {"files": [{"path": "/opt/w/a.whl", "checksum": hashlib.sha1(b"a").hexdigest()},
                       {"path": "/opt/w/b.whl", "checksum": hashlib.sha1(b"old").hexdigest()},
                       {"path": "/opt/w/stale.whl", "checksum": "x"}]}
    assert [Path(p).name for p in files_to_copy(str(tmp_path), found)] == ["b.whl", "c.whl"]
    assert [Path(p).name for p in files_to_copy(str(tmp_path), {"files": []})] == ["a.whl", "b.whl", "c.whl"]
    all_there = {"files": [{"path": f"/w/{n}", "checksum": hashlib.sha1(n[0].encode()).hexdigest()}
                           for n in ("a.whl", "b.whl", "c.whl")]}
    assert files_to_copy(str(tmp_path), all_there) == []
