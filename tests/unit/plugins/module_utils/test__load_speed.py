"""The disk's sequential read rate and the load-speed advice (module_utils _load_speed), and module
sglang_disk_rate that measures once per host and keeps the record."""

from __future__ import annotations

import errno
import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.filter import load as load_filters
from ansible_collections.sglang.deploy.plugins.module_utils import _load_speed
from ansible_collections.sglang.deploy.plugins.modules import sglang_disk_rate
from hypothesis import given, settings
from hypothesis import strategies as st

MIB = 1 << 20
# The reference host: 547 GB of weights that SGLang read in 664 s (0.82 GB/s).
LOAD = {"total_s": 700.0, "weights_load_s": 664.0, "weights_bytes": 547_000_000_000, "read_gb_per_s": 0.824}


def ticking(step: float = 0.5) -> Callable[[], float]:
    """A clock that advances `step` seconds at each reading: the measurement's seconds do not depend on the
    machine."""
    counter = itertools.count()
    return lambda: next(counter) * step


def model(tmp_path: Path, sizes: dict[str, int]) -> Path:
    for name, size in sizes.items():
        with open(tmp_path / name, "wb") as handle:
            handle.truncate(size)
    return tmp_path


def test_the_largest_shard_is_read(tmp_path: Path) -> None:
    model(tmp_path, {"a.safetensors": MIB, "b.safetensors": 3 * MIB, "big.bin": 9 * MIB})
    assert _load_speed.largest_shard(str(tmp_path)) == str(tmp_path / "b.safetensors")
    assert _load_speed.largest_shard(str(tmp_path / "missing")) is None
    (tmp_path / "empty").mkdir()
    assert _load_speed.largest_shard(str(tmp_path / "empty")) is None


@pytest.mark.parametrize("direct", [True, False])
def test_the_read_is_bounded_and_timed(tmp_path: Path, direct: bool) -> None:
    shard = model(tmp_path, {"s.safetensors": 40 * MIB}) / "s.safetensors"
    found = _load_speed.measure(str(shard), limit=20 * MIB, direct=direct, clock=ticking())
    # Whole 16 MiB blocks, never more than asked: one block of the 20 MiB asked for.
    assert found["bytes"] == 16 * MIB and found["seconds"] == 0.5
    assert found["gb_per_s"] == round(16 * MIB / 1e9 / 0.5, 6)
    assert found["method"] in (_load_speed.DIRECT, _load_speed.FADVISE)
    if not direct:
        assert found["method"] == _load_speed.FADVISE
    whole = _load_speed.measure(str(shard), limit=10 * _load_speed.MAX_BYTES, clock=ticking())
    assert whole["bytes"] == 40 * MIB  # the file ends first; 1 GiB is the most ever read


def test_a_file_system_that_refuses_o_direct_is_read_after_dropping_its_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shard = model(tmp_path, {"s.safetensors": 16 * MIB}) / "s.safetensors"
    real_open = os.open

    def refusing(path: str, flags: int, *args: Any) -> int:
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing)
    dropped: list[int] = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, offset, length, advice: dropped.append(advice))
    found = _load_speed.measure(str(shard), clock=ticking())
    assert found["method"] == _load_speed.FADVISE and found["bytes"] == 16 * MIB
    assert dropped == [os.POSIX_FADV_DONTNEED]


def test_an_unreadable_file_is_an_error_not_a_fallback(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _load_speed.measure(str(tmp_path / "gone.safetensors"))


def test_a_record_is_measured_again_only_when_it_does_not_hold() -> None:
    record = {"model_path": "/models/k", "gb_per_s": 5.5}
    assert _load_speed.stale(record, "/models/k") == ""
    assert "asked" in _load_speed.stale(record, "/models/k", remeasure=True)
    assert "not of '/models/other'" in _load_speed.stale(record, "/models/other")
    assert "no measurement" in _load_speed.stale(None, "/models/k")
    assert "no rate" in _load_speed.stale({"model_path": "/models/k", "gb_per_s": None}, "/models/k")


def test_a_load_far_below_the_disk_rate_points_to_presharded() -> None:
    advice = _load_speed.advise(LOAD, {"gb_per_s": 5.5})
    assert advice["bound"] == "processing" and advice["lever"] == "presharded"
    assert advice["floor_s"] == 99.5 and advice["expected_gain_s"] == 564.5
    assert advice["read_gb_per_s"] == 0.824 and advice["disk_gb_per_s"] == 5.5
    assert "564 s" in advice["why"]


def test_with_presharded_on_the_lever_is_threads() -> None:
    advice = _load_speed.advise(LOAD, {"gb_per_s": 5.5}, presharded=True)
    assert advice["lever"] == "threads" and advice["expected_gain_s"] == 564.5
    assert "default 8" in advice["why"]
    assert "now 16" in _load_speed.advise(LOAD, {"gb_per_s": 5.5}, presharded=True, threads=16)["why"]


def test_a_load_at_the_disk_rate_is_disk_bound_and_no_loader_lever_helps() -> None:
    # The reference host's 0.8 GB/s disk: the load read at 103 % of it (the page cache helped a little).
    advice = _load_speed.advise(LOAD, {"gb_per_s": 0.8})
    assert advice["bound"] == "disk" and advice["lever"] == "storage" and advice["expected_gain_s"] is None
    assert advice["floor_s"] == 683.8 and "no loader setting helps" in advice["why"]
    # 80 % of the disk's rate is disk-bound, just under it is not.
    assert _load_speed.advise(LOAD, {"gb_per_s": 0.824 / 0.8})["bound"] == "disk"
    assert _load_speed.advise(LOAD, {"gb_per_s": 0.824 / 0.79})["bound"] == "processing"


@pytest.mark.parametrize(("load", "disk", "why"), [
    (None, {"gb_per_s": 5.5}, "no weight load recorded"),
    ({"total_s": 10, "weights_load_s": None, "weights_bytes": 5}, {"gb_per_s": 5.5}, "no weight load recorded"),
    (LOAD, None, "not measured"),
    (LOAD, {"gb_per_s": None}, "not measured"),
    (LOAD, {"gb_per_s": "fast"}, "not measured"),
])
def test_without_a_load_or_a_disk_rate_the_advice_is_unknown(load: Any, disk: Any, why: str) -> None:
    advice = _load_speed.advise(load, disk)
    assert advice["bound"] == "unknown" and advice["lever"] == "none" and advice["expected_gain_s"] is None
    assert why in advice["why"]
    assert _load_speed.line(advice).startswith("unknown: ")


def test_the_next_loads_weights_size_is_used_when_given() -> None:
    advice = _load_speed.advise(LOAD, {"gb_per_s": 5.5}, weights_bytes=110_000_000_000)
    assert advice["floor_s"] == 20.0 and advice["read_gb_per_s"] == round(110 / 664, 3)


@settings(max_examples=200, deadline=None)
@given(load_s=st.floats(min_value=0.1, max_value=1e5), size=st.integers(min_value=1, max_value=10**13),
       disk=st.floats(min_value=0.001, max_value=100), presharded=st.booleans())
def test_the_gain_never_promises_a_load_faster_than_the_disk(load_s: float, size: int, disk: float,
                                                             presharded: bool) -> None:
    advice = _load_speed.advise({"weights_load_s": load_s, "weights_bytes": size}, {"gb_per_s": disk},
                                presharded=presharded)
    assert advice["bound"] in ("disk", "processing")
    if advice["bound"] == "processing":
        assert advice["lever"] == ("threads" if presharded else "presharded")
        assert 0 <= advice["expected_gain_s"] <= round(load_s, 1) + 0.1
        assert advice["floor_s"] + advice["expected_gain_s"] <= round(load_s, 1) + 0.1
    else:
        assert advice["lever"] == "storage" and advice["expected_gain_s"] is None


@settings(max_examples=200, deadline=None)
@given(record=st.one_of(st.none(), st.text(), st.dictionaries(st.text(), st.one_of(st.none(), st.text(), st.floats())),
                        st.fixed_dictionaries({"load": st.dictionaries(
                            st.sampled_from(["weights_load_s", "weights_bytes"]),
                            st.one_of(st.none(), st.text(), st.floats(), st.integers()))})),
       disk=st.one_of(st.none(), st.text(), st.dictionaries(st.just("gb_per_s"),
                                                            st.one_of(st.none(), st.text(), st.floats()))),
       presharded=st.one_of(st.booleans(), st.text()), threads=st.one_of(st.none(), st.text(), st.integers()))
def test_the_filter_takes_whatever_a_host_or_an_inventory_holds(record: Any, disk: Any, presharded: Any,
                                                                threads: Any) -> None:
    advice = load_filters.load_advice(record, disk, presharded, threads)
    assert advice["lever"] in ("none", "presharded", "threads", "storage")
    assert advice["bound"] in ("unknown", "disk", "processing") and isinstance(advice["text"], str)


def test_the_filter_reads_the_waiters_record() -> None:
    advice = load_filters.load_advice({"load": LOAD}, {"gb_per_s": 5.5}, "True", "16")
    assert advice["lever"] == "threads" and "now 16" in advice["text"]
    assert advice["text"].startswith("lever: threads, up to 564 s faster (")
    storage = load_filters.load_advice({"load": LOAD}, {"gb_per_s": 0.8})
    assert storage["text"].startswith("disk-bound, lever: storage (")


def test_the_module_measures_once_and_keeps_the_record(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    weights = model(tmp_path / "m", {"a.safetensors": 16 * MIB, "b.safetensors": 32 * MIB})
    record = tmp_path / "kimi.disk.json"
    params = {"model_path": str(weights), "record": str(record), "max_bytes": 16 * MIB, "remeasure": False}
    checked = sglang_disk_rate.run(params, check_mode=True)
    assert checked["measured"] and not record.exists()  # check mode measures, and writes nothing
    first = sglang_disk_rate.run(params, check_mode=False)
    assert first["measured"] and first["why"] == "no measurement recorded on this host yet"
    kept = json.loads(record.read_text())
    assert kept == first["record"] and kept["path"] == str(weights / "b.safetensors") and kept["bytes"] == 16 * MIB
    assert kept["model_path"] == str(weights) and kept["measured_at"].endswith("Z")
    assert oct(record.stat().st_mode & 0o777) == "0o644"
    again = sglang_disk_rate.run(params, check_mode=False)
    assert not again["measured"] and again["record"] == kept and again["why"] == ""
    assert sglang_disk_rate.run(dict(params, remeasure=True), check_mode=False)["measured"]
    assert not any(result["changed"] for result in (checked, first, again))


def test_the_module_says_when_there_is_nothing_to_measure(tmp_path: Path) -> None:
    params = {"model_path": str(tmp_path), "record": str(tmp_path / "d.json"), "max_bytes": MIB, "remeasure": False}
    result = sglang_disk_rate.run(params, check_mode=False)
    assert result["record"] is None and not result["measured"] and "no .safetensors file" in result["why"]
    assert not (tmp_path / "d.json").exists()


def test_the_module_creates_no_directory(tmp_path: Path) -> None:
    model(tmp_path, {"a.safetensors": 16 * MIB})
    params = {"model_path": str(tmp_path), "record": str(tmp_path / "home" / "d.json"), "max_bytes": MIB,
              "remeasure": False}
    result = sglang_disk_rate.run(params, check_mode=False)
    assert result["measured"] and result["record"]["bytes"] == 16 * MIB and "not kept" in result["why"]
    assert not (tmp_path / "home").exists()


def test_a_measurement_made_in_check_mode_is_kept_later_without_measuring_again(tmp_path: Path) -> None:
    """deploy.yml measures while it assesses the host (nothing may change before the refusals) and keeps the
    measurement once no host is refused (role sglang_config, refuse_host): the record is written as measured."""
    weights = model(tmp_path, {"a.safetensors": 16 * MIB})
    record = tmp_path / "kimi.disk.json"
    params = {"model_path": str(weights), "record": str(record), "max_bytes": 16 * MIB, "remeasure": False,
              "keep": None}
    measured = sglang_disk_rate.run(params, check_mode=True)
    assert measured["measured"] and not record.exists()
    kept = sglang_disk_rate.run(dict(params, keep=measured["record"]), check_mode=False)
    assert (kept["why"], kept["measured"], json.loads(record.read_text())) == ("kept", False, measured["record"])
    other = sglang_disk_rate.run(dict(params, model_path="/elsewhere", keep=measured["record"]), check_mode=False)
    assert other["why"].startswith("not kept: no rate measured for /elsewhere")
    record.unlink()
    assert sglang_disk_rate.run(dict(params, keep=measured["record"]), check_mode=True)["why"] == "kept"
    assert not record.exists()  # check mode keeps nothing
    nowhere = dict(params, record=str(tmp_path / "home" / "d.json"), keep=measured["record"])
    assert sglang_disk_rate.run(nowhere, check_mode=False)["why"].startswith("not kept:")
