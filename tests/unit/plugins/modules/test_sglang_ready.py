"""Module sglang_ready: both modes through main(), the poll of the waiter's async job in the directory it is
given, and the host's commands through the module. The waiter itself: module_utils/test_sglang_waiter.py; the
async job: module_utils/test__async_job.py; the action plugin: plugins/action/test_action_sglang_ready.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import _async_job, sglang_waiter
from ansible_collections.sglang.deploy.plugins.modules import sglang_ready
from helpers import ROOT, fake_proc
from host_commands import Commands

# ---- poll mode: the detached waiter's async job --------------------------------------------------

JID = "j123456789.4242"
STATUS = {"unit": "sglang-kimi.service", "phase": "loading weights", "describe": "loading weights 45% (29/64 shards)",
          "elapsed_s": 131.0, "health": "[Errno 111] Connection refused"}
WRAPPER_ARGV = (ROOT / "tests/fixtures/ansible/async-wrapper-cmdline.txt").read_text().splitlines()


@pytest.fixture
def wrapper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """wrapper(running): a process table where the async wrapper of JID runs (the captured argv) or none does."""
    def use(running: bool) -> None:
        argv = [*WRAPPER_ARGV[:2], JID.rsplit(".", 1)[0], *WRAPPER_ARGV[3:]]
        root = tmp_path / ("proc-running" if running else "proc-none")
        if not root.exists():
            fake_proc(root, {"77": argv} if running else {"500": ["/usr/bin/python3", "AnsiballZ_sglang_ready.py"]})
        monkeypatch.setattr(_async_job, "PROC", str(root))
    return use


@pytest.fixture
def poll(tmp_path: Path, run_module: Any, wrapper: Any) -> Any:
    """poll(job, running=True) writes the async job file (text or a dict, None for none) in the job directory
    tmp_path/async, sets whether the job's wrapper runs, and polls the job with jid and that async_dir."""
    (tmp_path / "status.json").write_text(json.dumps(STATUS))
    async_dir = tmp_path / "async"
    async_dir.mkdir()

    def run(job: Any, running: bool = True) -> dict[str, Any]:
        wrapper(running)
        if job is not None:
            (async_dir / JID).write_text(job if isinstance(job, str) else json.dumps(job))
        return run_module(sglang_ready.main, {"unit": "sglang-kimi.service", "jid": JID, "async_dir": str(async_dir),
                                              "status_file": str(tmp_path / "status.json")})
    return run


STARTED = {"started": True, "finished": False, "ansible_job_id": JID}


@pytest.mark.parametrize("job", [STARTED, ""], ids=["started", "being-written"])
def test_a_running_waiter_reports_its_progress_once(poll: Any, tmp_path: Path, job: Any) -> None:
    result = poll(job)
    assert result["finished"] is False and result["changed"] is False
    assert result["sglang_progress"] == STATUS  # what the sglang_progress callback prints
    assert not set(STATUS) & set(result)  # the status is not repeated at the top level
    assert (tmp_path / "async" / JID).exists()


def test_an_ended_waiter_returns_its_own_result_and_the_job_is_collected(poll: Any, tmp_path: Path) -> None:
    waiter = {"ready": True, "finished": True, "changed": False, "elapsed_s": 412.3, "invocation_id": "new",
              "main_pid": 42, "n_restarts": 0, "invocation": {"module_args": {"url": "http://127.0.0.1:30000/x"}}}
    result = poll(waiter, running=False)
    assert result["ready"] is True and result["finished"] is True and not result.get("failed")
    assert (result["invocation_id"], result["main_pid"], result["elapsed_s"]) == ("new", 42, 412.3)
    assert result["invocation"]["module_args"]["jid"] == JID  # the poll's own arguments, not the waiter's
    assert "sglang_progress" not in result and not (tmp_path / "async" / JID).exists()


@pytest.mark.parametrize(("job", "message"), [
    ({"failed": True, "ready": False, "finished": True, "msg": "sglang-kimi.service crashed during start"},
     "crashed during start"),
    ({"failed": True, "msg": "Timeout exceeded", "child_pid": 77}, "Timeout exceeded"),  # the async wrapper's own
])
def test_a_failed_waiter_fails_the_poll(poll: Any, tmp_path: Path, job: dict[str, Any], message: str) -> None:
    result = poll(job, running=False)
    assert result["failed"] is True and result["finished"] is True and message in result["msg"]
    assert not (tmp_path / "async" / JID).exists()


# SGLang 0.5.23 prints its keys itself: its startup line (repr of each value, so a backslash is doubled) and argparse's
# refusal of an unknown flag. A key with a backslash: Ansible's own no_log masking sees only the exact value.
CLIENT, ADMIN = "cl\\ient-K3y", "adm-K3y"
JOURNAL = (f"server_args=ServerArgs(model_path='/models/m', api_key={CLIENT!r}, admin_api_key={ADMIN!r}, port=30000)\n"
           f"launch_server.py: error: unrecognized arguments: --api_key {CLIENT} --admin_api_key {ADMIN}")


def test_the_keys_sglang_prints_come_out_masked_in_a_failure_and_in_the_progress(
        poll: Any, tmp_path: Path, run_module: Any, wrapper: Any) -> None:
    assert "cl\\\\ient" in JOURNAL  # the startup line's form of the key is not the key itself
    job = {"failed": True, "ready": False, "finished": True, "last_progress_line": JOURNAL.splitlines()[0],
           "msg": f"sglang-kimi.service exited after 6 s\n--- journal of the invocation ---\n{JOURNAL}"}
    (tmp_path / "async" / JID).write_text(json.dumps(job))
    wrapper(False)
    args = {"unit": "sglang-kimi.service", "jid": JID, "async_dir": str(tmp_path / "async"),
            "status_file": str(tmp_path / "status.json"), "secrets": [CLIENT, ADMIN, ""]}
    result = run_module(sglang_ready.main, args)
    text = json.dumps(result)
    assert result["failed"] is True and "ient-K3y" not in text and ADMIN not in text, text
    assert "api_key='********', admin_api_key='********', port=30000" in result["msg"]
    assert result["msg"].endswith("unrecognized arguments: --api_key ******** --admin_api_key ********")
    assert result["last_progress_line"].startswith("server_args=ServerArgs(model_path='/models/m', api_key='********'")
    (tmp_path / "status.json").write_text(json.dumps(dict(STATUS, last_progress_line=JOURNAL)))
    wrapper(True)
    (tmp_path / "async" / JID).write_text(json.dumps(STARTED))
    progress = run_module(sglang_ready.main, args)["sglang_progress"]
    assert "ient-K3y" not in json.dumps(progress) and progress["last_progress_line"].count("********") == 4


def test_polling_a_job_that_does_not_exist_fails(poll: Any, tmp_path: Path) -> None:
    result = poll(None, running=False)
    assert result["failed"] is True and result["finished"] is True
    assert result["msg"] == f"no async job {JID} in {tmp_path / 'async'} and no process of it runs"


def test_a_job_the_wrapper_has_not_written_yet_is_starting_not_gone(poll: Any) -> None:
    """The starting task returned after its 2.5 s while the wrapper had not written the job file: the poll
    reports a waiter that runs, and the next poll, once the file is there, its progress as usual."""
    result = poll(None)
    assert result["finished"] is False and not result.get("failed") and result["sglang_progress"] == STATUS
    assert poll(STARTED)["finished"] is False


@pytest.mark.parametrize("job", [STARTED, ""], ids=["started", "unparsable"])
def test_a_job_whose_wrapper_died_without_a_result_fails_the_poll(poll: Any, tmp_path: Path, job: Any) -> None:
    """What async_status would report as running until the polls run out (a killed wrapper writes no result)."""
    result = poll(job, running=False)
    assert result["failed"] is True and result["finished"] is True
    assert result["msg"].startswith(f"async job {JID} in {tmp_path / 'async'} ended without a result: no process")


def test_the_job_is_read_in_the_async_dir_it_is_given_not_the_default(
        poll: Any, wrapper: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_module: Any) -> None:
    """A site with a custom async_dir (tmp_path/async): the job file is only there, and the action plugin passes
    that dir as async_dir. Polled in the module's own default, ~/.ansible_async, the same job is not found."""
    home = tmp_path / "home"
    (home / ".ansible_async").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert poll(STARTED)["sglang_progress"] == STATUS
    wrapper(False)
    default = run_module(sglang_ready.main, {"unit": "sglang-kimi.service", "jid": JID,
                                             "status_file": str(tmp_path / "status.json")})
    assert default["failed"] is True
    assert default["msg"] == f"no async job {JID} in {home}/.ansible_async and no process of it runs"
    result = poll({"ready": True, "finished": True, "changed": False, "elapsed_s": 1.0}, running=False)
    assert result["ready"] is True and not result.get("failed") and not (tmp_path / "async" / JID).exists()


# ---- the real host: systemctl, journalctl and the health URL through the module -------------------

def test_the_unit_state_is_read_with_systemctl_show(commands: Commands) -> None:
    commands.add("systemctl", stdout="ActiveState=active\nInvocationID=abc\nStatusText=a=b\n")
    state = sglang_waiter.SystemdHost(commands.module).unit_state("sglang-kimi.service")
    assert state == {"ActiveState": "active", "InvocationID": "abc", "StatusText": "a=b"}
    assert commands.calls("systemctl") == [["show", "-p", ",".join(sglang_waiter.SHOW_PROPS), "--",
                                            "sglang-kimi.service"]]


def test_the_journal_of_one_invocation_is_read_as_json(commands: Commands) -> None:
    lines = [json.dumps({"__CURSOR": "c1", "__REALTIME_TIMESTAMP": "1700000000500000", "MESSAGE": "Load weight begin"}),
             "-- cursor: c1", json.dumps({"__CURSOR": "c2", "__REALTIME_TIMESTAMP": "1700000001000000",
                                          "MESSAGE": list(b"shards:  50%\r")})]
    commands.add("journalctl", stdout="\n".join(lines) + "\n")
    host = sglang_waiter.SystemdHost(commands.module)
    assert host.journal("inv", cursor="c0") == [
        {"cursor": "c1", "ts": 1700000000.5, "message": "Load weight begin"},
        {"cursor": "c2", "ts": 1700000001.0, "message": "shards:  50%\r"}]
    assert commands.calls("journalctl") == [["--no-pager", "-o", "json", "_SYSTEMD_INVOCATION_ID=inv", "+",
                                             "INVOCATION_ID=inv", "--after-cursor=c0"]]
    commands.add("journalctl", stderr="No journal files were found.", rc=1)
    assert sglang_waiter.journal_excerpt(host, "inv", 5).startswith("(journal unavailable: ")


class Health(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health_generate" else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_health_asks_the_url_for_a_generation(commands: Commands) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    host = sglang_waiter.SystemdHost(commands.module)
    try:
        assert host.health(f"{base}/health_generate", 5) == (True, "HTTP 200")
        assert host.health(f"{base}/loading", 5) == (False, "HTTP 503")
    finally:
        server.shutdown()
        server.server_close()
    ok, why = host.health(f"{base}/health_generate", 5)  # nothing listens any more
    assert not ok and "refused" in why.lower()


def test_a_host_without_systemctl_fails_the_wait_with_the_reason(
        commands: Commands, monkeypatch: pytest.MonkeyPatch, run_module: Any) -> None:
    monkeypatch.setattr(sglang_ready.AnsibleModule, "get_bin_path", lambda self, arg, *args, **kwargs:
                        commands.get_bin_path(arg))
    result = run_module(sglang_ready.main, {"unit": "sglang-kimi.service", "url": "http://127.0.0.1:9/health_generate"})
    assert result["failed"] is True and result["finished"] is True and result["ready"] is False
    assert result["msg"] == "systemctl is not installed"
