"""The router's launcher: keys from files into the router's flags in memory, servers registered with theirs."""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import ROOT, FakeClock, load_script

LAUNCHER = ROOT / "roles/sglang_router/files/sglang_router_launch.py"


@pytest.fixture(scope="module")
def launch() -> ModuleType:
    return load_script(LAUNCHER, "router_launch_under_test")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_command_line_names_the_files_then_the_router_flags(launch: ModuleType) -> None:
    assert launch.parse(["--workers", "/w.json", "--key", "/k", "--admin-key", "/a", "--", "--port", "1"]) == (
        launch.Files(Path("/w.json"), Path("/k"), Path("/a")), ["--port", "1"])
    assert launch.parse(["--workers", "/w.json", "--"]) == (launch.Files(Path("/w.json")), [])
    assert launch.parse(["--admin-key", "/a", "--workers", "/w.json", "--"])[0] == launch.Files(
        Path("/w.json"), None, Path("/a"))
    for bad in (["--workers", "/w"], ["--key", "/k", "--"], ["--workers", "/w", "--other", "x", "--"],
                ["--workers", "/w", "--workers", "/v", "--"], ["--workers", "--"],
                ["--workers", "/w", "--admin-key", "/a", "--admin-key", "/b", "--"]):
        with pytest.raises(launch.LaunchError):
            launch.parse(bad)


def test_the_keys_go_into_the_flags_and_a_key_on_the_command_line_is_refused(launch: ModuleType) -> None:
    assert launch.with_keys(["--port", "30080"], "k3y") == ["--port", "30080", "--api-key", "k3y"]
    assert launch.with_keys(["--port", "30080"], None) == ["--port", "30080"]
    # The admin key becomes the deploy's control-plane key, sglang-router's id:name:role:key.
    assert launch.with_keys(["--port", "1"], "k3y", "adm:n") == [
        "--port", "1", "--api-key", "k3y", "--control-plane-api-keys", "deploy:sglang-deploy:admin:adm:n"]
    assert launch.with_keys([], None, "adm") == ["--control-plane-api-keys", "deploy:sglang-deploy:admin:adm"]
    for flags in (["--api-key", "x"], ["--api-key=x"], ["--worker-urls", "http://a:1"],
                  ["--control-plane-api-keys", "a:b:admin:c"], ["--control-plane-api-keys=a:b:admin:c"]):
        with pytest.raises(launch.LaunchError, match="belongs in the key or workers file"):
            launch.with_keys(flags, None)


def test_the_admin_key_must_not_be_the_clients_key(launch: ModuleType) -> None:
    with pytest.raises(launch.LaunchError, match="needs a key of its own") as caught:
        launch.with_keys([], "same-key", "same-key")
    assert "same-key" not in str(caught.value)


def test_the_key_file_is_one_word_and_never_empty(launch: ModuleType, tmp_path: Path) -> None:
    assert launch.read_key(write(tmp_path, "k", "s3cr3t\n")) == "s3cr3t"
    for text, why in (("", "is empty"), ("\n", "is empty"), ("two words\n", "printable ASCII"),
                      ("a\nb\n", "printable ASCII")):
        with pytest.raises(launch.LaunchError, match=why) as caught:
            launch.read_key(write(tmp_path, "k", text))
        assert "two words" not in str(caught.value)  # the value is never shown
    with pytest.raises(launch.LaunchError, match="cannot read"):
        launch.read_key(tmp_path / "missing")


def test_the_workers_file_maps_each_server_to_its_key(launch: ModuleType, tmp_path: Path) -> None:
    path = write(tmp_path, "w.json", json.dumps({"workers": {"http://a:30000/": "ka", "http://b:30000": ""}}))
    assert launch.read_workers(path) == [("http://a:30000", "ka"), ("http://b:30000", None)]
    assert launch.read_workers(write(tmp_path, "e.json", '{"workers": {}}')) == []
    for text in ("[]", '{"workers": []}', '{"workers": {"a:1": ""}}', '{"workers": {"http://a:1": 5}}', "{"):
        with pytest.raises(launch.LaunchError):
            launch.read_workers(write(tmp_path, "bad.json", text))


@pytest.mark.parametrize(("host", "url"), [("0.0.0.0", "http://127.0.0.1:30080"), ("::", "http://[::1]:30080"),
                                           ("10.0.0.5", "http://10.0.0.5:30080"), ("fd00::5", "http://[fd00::5]:30080")])
def test_the_launcher_reaches_the_router_where_it_binds(launch: ModuleType, host: str, url: str) -> None:
    assert launch.local_url(host, 30080) == url


def test_registration_waits_for_the_router_then_adds_each_server_with_its_key(launch: ModuleType) -> None:
    calls: list[tuple[str, Any, Any]] = []
    answers = iter([urllib.error.URLError("refused"), 503, 200])

    def call(url: str, key: str | None, body: dict[str, Any] | None = None) -> int:
        calls.append((url, key, body))
        if url.endswith("/liveness"):
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer
        if body and body["url"] == "http://b:1":
            raise urllib.error.HTTPError(url, 401, "Unauthorized", None, None)  # type: ignore[arg-type]
        return 202

    lines: list[str] = []
    added = launch.register("http://127.0.0.1:30080", "ROUTER-KEY-7", [("http://a:1", "KEY-A-9"), ("http://b:1", None)],
                            clock=FakeClock(), call=call, log=lines.append)
    assert added == ["http://a:1"]
    assert [c for c in calls if c[0].endswith("/workers")] == [
        ("http://127.0.0.1:30080/workers", "ROUTER-KEY-7", {"url": "http://a:1", "api_key": "KEY-A-9"}),
        ("http://127.0.0.1:30080/workers", "ROUTER-KEY-7", {"url": "http://b:1"})]
    assert [c for c in calls if c[0].endswith("/liveness")] == [("http://127.0.0.1:30080/liveness", None, None)] * 3
    assert lines[0] == "sglang_router_launch: registered http://a:1 (with a worker key)"
    assert lines[1].startswith("sglang_router_launch: could not register http://b:1: 401")
    assert not [line for line in lines if "KEY-A-9" in line or "ROUTER-KEY-7" in line]


def test_registration_gives_up_after_its_budget_and_says_so(launch: ModuleType) -> None:
    def call(url: str, key: str | None, body: dict[str, Any] | None = None) -> int:
        raise urllib.error.URLError("refused")

    lines: list[str] = []
    assert launch.register("http://r:1", None, [("http://a:1", None)], clock=FakeClock(), call=call,
                           log=lines.append) == []
    assert lines == ["sglang_router_launch: the router at http://r:1 did not answer within 300 s; no worker "
                     "registered (the deploy registers them)"]


def test_a_bad_file_stops_the_start_with_status_2_before_the_router_is_imported(
        launch: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workers = write(tmp_path, "w.json", '{"workers": {}}')
    assert launch.main(["--workers", str(workers), "--key", str(tmp_path / "none"), "--", "--port", "1"]) == 2
    assert "cannot read the router's key file" in capsys.readouterr().err
    empty = write(tmp_path, "admin", "\n")
    assert launch.main(["--workers", str(workers), "--admin-key", str(empty), "--", "--port", "1"]) == 2
    assert "is empty" in capsys.readouterr().err


def test_registration_runs_in_a_detached_process_that_the_launcher_need_not_reap(
        launch: ModuleType, tmp_path: Path) -> None:
    """A thread would never run beside the router's Rust core, which holds the interpreter lock."""
    import os
    import time

    done = tmp_path / "done"

    def work(path: Path, text: str) -> None:
        path.write_text(f"{text} {os.getpid()} {os.getppid()}")

    launch.detached(work, done, text="ran")
    for _attempt in range(200):  # the grandchild writes once it runs; wait on that, not on time
        if done.exists() and done.read_text().count(" ") == 2:
            break
        time.sleep(0.05)
    text, pid, _parent = done.read_text().split()
    assert text == "ran" and int(pid) != os.getpid()
    zombies = []  # children of this process that exited and wait to be reaped
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            zombies.append(stat.parent.name)
    assert zombies == []
