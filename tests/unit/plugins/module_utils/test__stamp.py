"""_stamp: what a role left on a host, observed, recorded and compared (real command output as fixtures)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import _stamp
from helpers import ROOT

FIXTURES = ROOT / "tests/fixtures/host-commands"
DPKG = (FIXTURES / "dpkg-query-status.txt").read_text()
UNITS = (FIXTURES / "systemctl-show-units.txt").read_text()


def fake_run(outputs: dict[str, tuple[int, str]]) -> _stamp.Run:
    def run(argv: list[str]) -> tuple[int, str]:
        return outputs[argv[0]]
    return run


RUN = fake_run({"dpkg-query": (1, DPKG), "systemctl": (0, UNITS), "nvidia-smi": (0, "0, GPU\n")})


def test_dpkg_query_output_of_debian_12() -> None:
    assert _stamp.parse_dpkg(DPKG) == {"nvidia-driver-cuda": "580.95.05-1 hi", "nvidia-modprobe": "580.95.05-1 hi",
                                       "python3-venv": "3.11.2-1+b1 ii"}


def test_packages_in_the_order_asked_and_unknown_ones_absent() -> None:
    states = _stamp.package_states(["python3-venv", "no-such-package", "nvidia-modprobe"], RUN)
    assert states == {"python3-venv": "3.11.2-1+b1 ii", "no-such-package": "absent",
                      "nvidia-modprobe": "580.95.05-1 hi"}


def test_systemctl_show_of_several_units_of_systemd_252() -> None:
    assert _stamp.parse_units(UNITS) == {"nvidia-persistenced.service": "enabled/active",
                                         "nvidia-device-nodes.service": "enabled/active",
                                         "no-such-unit.service": "-/inactive"}


def test_nothing_to_ask_runs_nothing() -> None:
    def refuse(argv: list[str]) -> tuple[int, str]:
        raise AssertionError(argv)
    assert _stamp.package_states([], refuse) == {} and _stamp.unit_states([], refuse) == {}


def test_path_states(tmp_path: Path) -> None:
    file = tmp_path / "f"
    file.write_text("one")
    file.chmod(0o640)
    (tmp_path / "link").symlink_to("f")
    uid, gid = os.getuid(), os.getgid()
    assert _stamp.path_state(str(file)).startswith(f"file 0640 {uid}:{gid} sha256:7692c3ad")
    assert _stamp.path_state(str(tmp_path)).startswith("dir ")
    assert _stamp.path_state(str(tmp_path / "link")).endswith("-> f")
    assert _stamp.path_state(str(tmp_path / "missing")) == "absent"
    assert _stamp.path_state("/dev/null").startswith("chr 0666")


def test_listing_and_tree(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a").write_text("a")
    listing, tree = _stamp.listing_state(str(tmp_path)), _stamp.tree_state(str(tmp_path))
    assert listing.startswith("1 entries") and tree.startswith("1 files")
    os.utime(tmp_path / "sub" / "a", ns=(1, 1))  # a rewritten shard: same name, another time
    assert _stamp.listing_state(str(tmp_path)) == listing and _stamp.tree_state(str(tmp_path)) != tree
    (tmp_path / "b").write_text("b")
    assert _stamp.listing_state(str(tmp_path)) != listing
    assert _stamp.tree_state(str(tmp_path / "missing")) == "absent"
    assert _stamp.tree_state(str(tmp_path / "b")) == "not a directory"


def test_manifest_is_normalized_and_unknown_kinds_refused() -> None:
    manifest = _stamp.normalized({"paths": ["/b", "/a", "/a", ""], "commands": [["nvidia-smi", "-L"]]})
    assert manifest["paths"] == ["/a", "/b"] and manifest["commands"] == [["nvidia-smi", "-L"]]
    assert manifest["units"] == []
    with pytest.raises(ValueError, match="unknown manifest kinds \\['files'\\]"):
        _stamp.normalized({"files": ["/a"]})


def record(tmp_path: Path, manifest: dict[str, list[str]], run: _stamp.Run = RUN) -> str:
    path = _stamp.stamp_path(str(tmp_path / "stamps"), "role")
    normal = _stamp.normalized(manifest)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Path(path).write_text(json.dumps({"version": _stamp.VERSION, "digest": "d1", "manifest": normal,
                                      "observed": _stamp.observe(normal, run)}))
    return path


def test_no_drift_until_something_moves(tmp_path: Path) -> None:
    managed = tmp_path / "pin"
    managed.write_text("Pin: version 580.95.05-*\n")
    path = record(tmp_path, {"paths": [str(managed)], "packages": ["nvidia-modprobe"],
                             "units": ["nvidia-persistenced.service"], "commands": [["nvidia-smi", "-L"]]})
    assert _stamp.read(path, RUN) == {"found": True, "digest": "d1", "recorded_at": None, "drift": []}
    managed.write_text("edited by hand\n")
    unheld = fake_run({"dpkg-query": (0, DPKG.replace("nvidia-modprobe\t580.95.05-1\thi",
                                                      "nvidia-modprobe\t580.95.05-1\tii")),
                       "systemctl": (0, UNITS.replace("ActiveState=active\nUnitFileState=enabled\n\nId=nvidia-device",
                                                      "ActiveState=failed\nUnitFileState=enabled\n\nId=nvidia-device")),
                       "nvidia-smi": (9, "")})
    drift = _stamp.read(path, unheld)["drift"]
    assert len(drift) == 4
    assert drift[0].startswith(f"path {managed}: file ") and "sha256:" in drift[0]
    assert drift[1] == "package nvidia-modprobe: 580.95.05-1 hi -> 580.95.05-1 ii"
    assert drift[2] == "unit nvidia-persistenced.service: enabled/active -> enabled/failed"
    assert drift[3].startswith("command nvidia-smi -L: exit 0 ") and " -> exit 9 " in drift[3]


def test_missing_and_foreign_stamps(tmp_path: Path) -> None:
    missing = _stamp.read(str(tmp_path / "none.json"), RUN)
    assert missing["found"] is False and missing["digest"] is None and "no stamp" in missing["drift"][0]
    other = tmp_path / "old.json"
    other.write_text(json.dumps({"version": 0}))
    assert "another stamp format" in _stamp.read(str(other), RUN)["drift"][0]
    other.write_text("{")
    assert _stamp.read(str(other), RUN)["found"] is False


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden"])
def test_stamp_names_are_plain_file_names(name: str) -> None:
    with pytest.raises(ValueError, match="plain file name"):
        _stamp.stamp_path("/var/lib/x", name)


def test_several_stamps_are_read_with_one_dpkg_query_and_one_systemctl(tmp_path: Path) -> None:
    """deploy.yml reads three stamps per host: their packages and units are asked for together, and each stamp
    sees what it would have seen alone."""
    calls: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str]:
        calls.append(list(argv))
        return RUN(argv)

    stamps = tmp_path / "stamps"
    stamps.mkdir()
    manifests = {"driver": {"packages": ["nvidia-modprobe", "nvidia-driver-cuda"],
                            "units": ["nvidia-persistenced.service", "nvidia-device-nodes.service"]},
                 "stack": {"packages": ["python3-venv", "nvidia-modprobe"], "units": ["no-such-unit.service"]},
                 "weights": {"paths": [str(tmp_path)]}}
    for name, manifest in manifests.items():
        normal = _stamp.normalized(manifest)
        (stamps / f"{name}.json").write_text(json.dumps({"version": _stamp.VERSION, "digest": name, "manifest": normal,
                                                         "observed": _stamp.observe(normal, RUN)}))
    read = _stamp.read_many(["driver", "stack", "weights", "router"], str(stamps), run)
    assert [call[0] for call in calls] == ["dpkg-query", "systemctl"]
    assert calls[0][-3:] == ["nvidia-driver-cuda", "nvidia-modprobe", "python3-venv"]
    assert calls[1][-3:] == ["no-such-unit.service", "nvidia-device-nodes.service", "nvidia-persistenced.service"]
    assert read == {name: _stamp.read(str(stamps / f"{name}.json"), RUN) for name in ["driver", "stack", "weights"]} | {
        "router": _stamp.read(str(stamps / "router.json"), RUN)}
    assert all(read[name]["found"] and read[name]["drift"] == [] for name in manifests)
    assert read["router"]["found"] is False
