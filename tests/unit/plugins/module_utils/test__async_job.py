"""_async_job: an Ansible async job read as ansible-core's async_status (2.19 to 2.21) reads it, in the async_dir given,
and whether a process of its async wrapper still runs (tests/fixtures/ansible/)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import _async_job
from helpers import ROOT, fake_proc, wait_for

WRAPPER_ARGV = (ROOT / "tests/fixtures/ansible/async-wrapper-cmdline.txt").read_text().splitlines()
WRAPPER_JID = f"{WRAPPER_ARGV[2]}.13918"  # the job id the captured job had
STARTED = {"started": True, "finished": False, "ansible_job_id": WRAPPER_JID}  # async_wrapper._run_module's first
# ansible-core 2.21's: preserve_tmp after the time limit, the module's own command after the module.
WRAPPER_ARGV_2_21 = (ROOT / "tests/fixtures/ansible/async-wrapper-cmdline-2.21.txt").read_text().splitlines()


@pytest.mark.parametrize(("processes", "running"), [
    ({"13921": WRAPPER_ARGV, "13922": WRAPPER_ARGV}, True),  # the daemonized wrapper and its supervisor
    ({"500": ["/usr/bin/python3", "/tmp/AnsiballZ_sglang_ready.py"]}, False),  # a poll of its own
    ({"501": [*WRAPPER_ARGV[:2], "j999", *WRAPPER_ARGV[3:]]}, False),  # another job's wrapper
    ({"502": ["sleep", WRAPPER_ARGV[2]]}, False),  # the job id in the argv of something else
    ({}, False),
])
def test_a_job_runs_while_a_process_of_its_async_wrapper_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: dict[str, list[str]], running: bool) -> None:
    monkeypatch.setattr(_async_job, "PROC", str(fake_proc(tmp_path / "proc", processes)))
    assert _async_job.wrapper_running(WRAPPER_JID) is running


def test_a_job_of_ansible_core_2_21_is_found_by_its_wrapper_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_async_job, "PROC", str(fake_proc(tmp_path / "proc", {
        "3195": WRAPPER_ARGV_2_21, "3196": WRAPPER_ARGV_2_21})))
    assert _async_job.wrapper_running(f"{WRAPPER_ARGV_2_21[2]}.3186")
    assert not _async_job.wrapper_running("j1.3186")


def test_the_process_table_is_read_as_the_kernel_writes_it(tmp_path: Path) -> None:
    """A real process with the wrapper's argv (the fixture's, with a script of that name that sleeps) is
    found in the real /proc; once it is ended (by its PID), it is not."""
    script = tmp_path / "async_wrapper.py"
    script.write_text("import time\ntime.sleep(120)\n")
    jid = f"j{os.getpid()}{threading.get_ident() % 1000}.1"
    process = subprocess.Popen([sys.executable, str(script), jid.rsplit(".", 1)[0], *WRAPPER_ARGV[3:]])
    try:
        # Popen returns when the exec closes its error pipe, before the kernel has set up the new argv: until then
        # /proc/<pid>/cmdline reads empty (proc_pid_cmdline_read: "if (!mm->env_end) return 0"), 22 of 40 times
        # beside two busy processes here. The wrapper's own processes are forks of one that ran long before.
        wait_for(lambda: Path(f"/proc/{process.pid}/cmdline").read_bytes(), 10, what="the new process's argv")
        assert _async_job.wrapper_running(jid)
    finally:
        process.kill()
        process.wait()
    assert not _async_job.wrapper_running(jid)


# async_status.main's rules: a file that does not parse is running ("file not written yet?"), "started" without a
# true "finished" is running, a file without "started" is the result (finished).
@pytest.mark.parametrize(("text", "result"), [
    (json.dumps(STARTED), None),
    ("", None),
    ('{"started": tr', None),
    (json.dumps({"started": True}), None),
    (json.dumps({"rc": 0, "changed": True}), {"rc": 0, "changed": True, "finished": True}),
    (json.dumps({"msg": "Timeout exceeded", "failed": True, "child_pid": 7}),  # the wrapper's own, at its limit
     {"msg": "Timeout exceeded", "failed": True, "child_pid": 7, "finished": True}),
    (json.dumps({"ready": True, "invocation": {"module_args": {}}}), {"ready": True, "finished": True}),
])
def test_the_job_file_is_read_by_async_statuss_rules(tmp_path: Path, text: str, result: Any) -> None:
    (tmp_path / WRAPPER_JID).write_text(text)
    assert _async_job.finished_result(str(tmp_path / WRAPPER_JID)) == result


@pytest.fixture
def no_wrapper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_async_job, "PROC", str(fake_proc(tmp_path / "proc", {})))


@pytest.mark.usefixtures("no_wrapper")
def test_an_ended_job_is_collected_from_the_async_dir_it_is_given(tmp_path: Path) -> None:
    custom = tmp_path / "site" / "async jobs"  # a site's own async_dir, as the action plugin passes it
    custom.mkdir(parents=True)
    (custom / WRAPPER_JID).write_text(json.dumps({"ready": True}))
    assert _async_job.collect(str(custom), WRAPPER_JID) == {"ready": True, "finished": True}
    assert not (custom / WRAPPER_JID).exists()  # collected
    with pytest.raises(_async_job.JobGone, match=re.escape(f"no async job {WRAPPER_JID} in {custom} and no process")):
        _async_job.collect(str(custom), WRAPPER_JID)


def test_a_running_job_is_left_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_async_job, "PROC", str(fake_proc(tmp_path / "proc", {"13921": WRAPPER_ARGV})))
    (tmp_path / WRAPPER_JID).write_text(json.dumps(STARTED))
    assert _async_job.collect(str(tmp_path), WRAPPER_JID) is None
    assert (tmp_path / WRAPPER_JID).exists()


@pytest.mark.usefixtures("no_wrapper")
def test_a_started_job_without_a_wrapper_died(tmp_path: Path) -> None:
    """A killed wrapper leaves {"started": true} for good, which async_status reports as running."""
    (tmp_path / WRAPPER_JID).write_text(json.dumps(STARTED))
    with pytest.raises(_async_job.JobGone, match="ended without a result: no process of its async wrapper runs"):
        _async_job.collect(str(tmp_path), WRAPPER_JID)


@pytest.mark.usefixtures("no_wrapper")
def test_a_job_that_ends_while_the_process_table_is_read_is_collected_not_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wrapper writes the result, then its processes end: the poll read "started", then found no process.
    The file is read again after the process table, so the result is there (the scan itself writes it here)."""
    path = tmp_path / WRAPPER_JID
    path.write_text(json.dumps(STARTED))
    scan = _async_job.wrapper_running

    def ends_meanwhile(jid: str) -> bool:
        path.write_text(json.dumps({"ready": True}))
        return scan(jid)

    monkeypatch.setattr(_async_job, "wrapper_running", ends_meanwhile)
    assert _async_job.collect(str(tmp_path), WRAPPER_JID) == {"ready": True, "finished": True}
