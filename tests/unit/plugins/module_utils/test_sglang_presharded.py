"""Presharded weights: the dump key, its paths and flags, the directory check, the disk plan, the host's read,
pruning, and the resolve/preflight integration (sglang_presharded)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_catalog, sglang_config, sglang_preflight
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_presharded as ps
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_quote import exec_argv, systemd_exec_line
from helpers import BASE, CATALOGS, ROOT, catalog_parser
from hypothesis import given, settings
from hypothesis import strategies as st

FIXTURE = ROOT / "tests/fixtures/sglang-engine/presharded-0.5.23-cpu.log"
WRITABLE = ["/var/lib/sglang"]
PROPERTY = settings(max_examples=80, deadline=None, derandomize=True)
CATALOG = sglang_catalog.load_catalog("0.5.23", str(CATALOGS))
PREFIX = ["/opt/sglang/0.5.23/venv/bin/python", "-m", "sglang.launch_server"]


def resolved(**changes: Any) -> dict[str, Any]:
    inputs = {**BASE, "sglang_presharded": True, "sglang_presharded_dir": "/var/lib/sglang/presharded",
              "presharded_writable": WRITABLE, **changes}
    return sglang_config.resolve(inputs, str(CATALOGS))


def host(tmp_path: Path, files: dict[str, bytes], draft: bool = True) -> dict[str, Any]:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    for name, data in files.items():
        (model / name).write_bytes(data)
    facts: dict[str, Any] = {"weights_fingerprint": ps.read_fingerprint(str(model)),
                             "weight_bytes_total": sum(len(d) for d in files.values()),
                             "presharded": ps.read_state(str(tmp_path / "dumps"))}
    if draft:
        facts["draft_weights_fingerprint"] = ps.fingerprint([("d.safetensors", 1, 1)])
    return facts


# What SGLang 0.5.23 logs when it dumps (first load) and when it loads a dump: the lines the engine scenario's
# drill 10 reads in the real server's journal.
FIRST_LOAD_RE = re.compile(r"No presharded checkpoint at (\S+); doing first-time load and dump\.")
FROM_DUMP_RE = re.compile(r"Loading from presharded checkpoint at (\S+)$", re.MULTILINE)


def test_the_real_servers_log_lines_are_recognised() -> None:
    text = FIXTURE.read_text()
    assert FIRST_LOAD_RE.search(text).group(1) == "/tmp/eng/presharded/TP-1-sig-cc57a4e2d0bc4ebb"
    assert FROM_DUMP_RE.search(text).group(1) == "/tmp/eng/presharded/TP-1-sig-cc57a4e2d0bc4ebb"


def test_the_key_changes_with_each_thing_it_covers() -> None:
    base = ("0.5.23", "m" * 64, None, 8, 1)
    key = ps.dump_key(*base)
    assert ps.KEY_RE.match(key)
    for index, other in enumerate(("0.5.24", "n" * 64, "d" * 64, 4, 2)):
        changed = list(base)
        changed[index] = other
        assert ps.dump_key(*changed) != key, index
    assert ps.dump_key(*base) == key


def test_the_fingerprint_sees_a_new_checkpoint_of_the_same_names(tmp_path: Path) -> None:
    (tmp_path / "a.safetensors").write_bytes(b"x" * 10)
    (tmp_path / "config.json").write_text("{}")
    first = ps.read_fingerprint(str(tmp_path))
    os.utime(tmp_path / "config.json", ns=(1, 1))
    assert ps.read_fingerprint(str(tmp_path)) == first  # only the safetensors count
    os.utime(tmp_path / "a.safetensors", ns=(5, 5))
    assert ps.read_fingerprint(str(tmp_path)) != first
    assert ps.read_fingerprint(str(tmp_path / "missing")) is None


@pytest.mark.parametrize(("directory", "fragment"), [
    ("/var/lib/sglang/presharded", None),
    ("/var/lib/sglang", None),
    ("/srv/dumps", "outside the paths the unit may write (/var/lib/sglang)"),
    ("/var/lib/sglangx/p", "outside the paths"),
    ("/var/lib/sglang/../etc", "not a usable directory"),
    ("relative/dir", "not a usable directory"),
    ("/var/lib/sglang/has space", "not a usable directory"),
    ("/var/lib/sglang/p/", "not a usable directory"),
])
def test_the_directory_must_be_one_the_unit_can_write(directory: str, fragment: str | None) -> None:
    problem = ps.dir_problem(directory, WRITABLE)
    assert (problem is None) if fragment is None else (fragment in str(problem))


@PROPERTY
@given(st.one_of(st.text(max_size=40), st.from_regex(r"\A[a-z0-9._/-]{1,30}\Z")), st.booleans())
def test_any_accepted_directory_reaches_sglang_as_itself(name: str, draft: bool) -> None:
    """For any user string as sglang_presharded_dir: resolve refuses it naming the variable, or the unit's
    ExecStart, unquoted as systemd does, parses (the catalog's parser) to a JSON whose roots are that directory plus
    the key, inside the writable root."""
    directory = "/var/lib/sglang/" + name
    config = resolved(sglang_presharded_dir=directory, sglang_speculative_algorithm="EAGLE3" if draft else None)
    if not config["ok"]:
        assert any(error.startswith("sglang_presharded_dir: ") for error in config["errors"])
        return
    read = {"weights_fingerprint": "f" * 64, "draft_weights_fingerprint": "d" * 64}
    config, _errors, _warnings = sglang_config.with_presharded(config, {}, read)
    key = config["presharded"]["key"]
    unit = "[Service]\nExecStart=" + systemd_exec_line(PREFIX, config["args"]) + "\n"
    argv = exec_argv(unit)
    assert argv == PREFIX + config["argv"]
    parsed = catalog_parser().build_parser(CATALOG).parse_args(argv[len(PREFIX):])
    assert parsed.load_format == "presharded"
    roots = json.loads(parsed.model_loader_extra_config)
    assert roots["presharded_path"] == f"{directory}/{key}"
    assert ("draft_presharded_path" in roots) is draft
    assert all(path.startswith("/var/lib/sglang/") and ".." not in path.split("/") for path in roots.values())


def test_resolve_refuses_what_conflicts_and_what_it_cannot_write() -> None:
    errors = " ".join(resolved(sglang_extra_args={"load-format": "safetensors"})["errors"])
    assert "sglang_extra_args['load-format']" in errors and "sglang_presharded" in errors
    errors = " ".join(resolved(sglang_extra_args={"model-loader-extra-config": "{}"})["errors"])
    assert "sglang_extra_args['model-loader-extra-config']" in errors
    errors = resolved(sglang_presharded_dir="/srv/dumps")["errors"]
    assert errors and errors[0].startswith("sglang_presharded_dir: /srv/dumps is outside")
    multinode = {"group": "g", "members": ["a", "b"], "host": "a", "first_host": "a", "port": 20000}
    assert any(e.startswith("sglang_presharded: is not supported with a multi-node")
               for e in resolved(multinode=multinode)["errors"])
    assert resolved(sglang_presharded=False, sglang_extra_args={"load-format": "safetensors"})["ok"]


def test_off_changes_nothing() -> None:
    off = resolved(sglang_presharded=False)
    config, errors, warnings = sglang_config.with_presharded(off, {}, {"weights_fingerprint": "f"})
    assert (config, errors, warnings) == (off, [], [])


def test_offline_there_are_no_flags_and_the_plan_says_what_the_dump_needs() -> None:
    config, errors, warnings = sglang_config.with_presharded(
        resolved(), {"weight_bytes_total": "547 GiB", "draft_weight_bytes_total": None}, None)
    assert "--load-format" not in config["argv"] and not errors
    assert "about 647.1 GB free" in warnings[0] and "/var/lib/sglang/presharded/<key>" in warnings[0]


def test_the_host_read_gives_the_key_the_flags_and_the_disk_check(tmp_path: Path) -> None:
    facts = host(tmp_path, {"a.safetensors": b"x" * 100})
    config, errors, _warnings = sglang_config.with_presharded(resolved(), {}, facts)
    dump = config["presharded"]
    key = dump["key"]
    assert config["argv"][-4:] == ["--load-format", "presharded", "--model-loader-extra-config",
                                   json.dumps({"draft_presharded_path": f"/var/lib/sglang/presharded/{key}-draft",
                                               "presharded_path": f"/var/lib/sglang/presharded/{key}"},
                                              separators=(",", ":"), sort_keys=True)]
    assert dump["ready"] is False and dump["need_bytes"] == ps.needed_bytes(100)
    assert not errors  # the temporary directory's filesystem has more than 1 GiB free
    again, _errors, _warnings = sglang_config.with_presharded(config, {}, facts)
    assert again["argv"] == config["argv"]  # idempotent: a second preflight does not add the flags twice
    short = {**facts, "presharded": {**facts["presharded"], "free_bytes": 10}}
    _config, errors, _warnings = sglang_config.with_presharded(resolved(), {}, short)
    assert errors[0].startswith("sglang_presharded_dir: the first start with sglang_presharded dumps about 1.1 GB")
    # A complete dump needs no space.
    for name in (key, key + "-draft"):
        (tmp_path / "dumps" / name / "TP-8-sig-0123456789abcdef").mkdir(parents=True)
        (tmp_path / "dumps" / name / "TP-8-sig-0123456789abcdef" / "READY").write_text("")
    ready = {**facts, "presharded": {**ps.read_state(str(tmp_path / "dumps")), "free_bytes": 10}}
    config, errors, _warnings = sglang_config.with_presharded(resolved(), {}, ready)
    assert not errors and config["presharded"]["ready"] and config["presharded"]["need_bytes"] == 0


def test_a_new_checkpoint_is_a_new_key(tmp_path: Path) -> None:
    first = sglang_config.with_presharded(resolved(), {}, host(tmp_path, {"a.safetensors": b"1"}))[0]
    second = sglang_config.with_presharded(resolved(), {}, host(tmp_path, {"a.safetensors": b"22"}))[0]
    assert first["presharded"]["key"] != second["presharded"]["key"]


def test_the_preflight_refuses_a_disk_too_small(tmp_path: Path) -> None:
    facts = host(tmp_path, {"a.safetensors": b"x"})
    facts["presharded"]["free_bytes"] = 0
    checks = sglang_preflight.apply(resolved(), {}, facts)["checks"]
    assert not checks["ok"] and checks["errors"][0].startswith("sglang_presharded_dir: the first start")


def test_pruning_keeps_the_key_and_the_newest_other_complete_dump() -> None:
    a, b, c, key = "a" * 16, "b" * 16, "c" * 16, "d" * 16
    state = {"dumps": {a: {"ready": True, "mtime": 1}, a + "-draft": {"ready": True, "mtime": 1},
                       b: {"ready": True, "mtime": 2}, c: {"ready": False, "mtime": 3},
                       key: {"ready": True, "mtime": 4}, key + "-draft": {"ready": True, "mtime": 4},
                       "lost+found": {"ready": False, "mtime": 0}}}
    state["dumps"] = {name: {**info, "marked": True} for name, info in state["dumps"].items()}
    # Only the deploy's: a root named as a key, with its marker (issue 49); "lost+found" is not one.
    assert ps.to_prune(state, key) == [a, a + "-draft", c]
    state["dumps"][c]["marked"] = False
    assert ps.to_prune(state, key) == [a, a + "-draft"]
    assert ps.to_prune({"dumps": {}}, key) == []
