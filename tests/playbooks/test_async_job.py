"""The readiness poll against a real Ansible async job: while the job runs, a process of its async wrapper
is found by the job id Ansible returned; once the job has ended, none is (sglang_ready.wrapper_running)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.modules import sglang_ready
from helpers import wait_for

BOUND = 120.0  # seconds; only a broken run comes near it


def test_a_real_async_job_is_found_while_it_runs_and_not_after(tmp_path: Path) -> None:
    go = tmp_path / "go"
    # Ansible's own defaults (no ansible.cfg in tmp_path), one line per host (-o), job files under tmp_path.
    env = {key: value for key, value in os.environ.items() if key != "ANSIBLE_CONFIG"}
    env.update(ANSIBLE_ASYNC_DIR=str(tmp_path / "async"), ANSIBLE_LOCALHOST_WARNING="0")
    # The job waits for a file this test writes, so it cannot end before it has been looked for.
    started = subprocess.run(
        [Path(sys.executable).parent / "ansible", "localhost", "-e", f"ansible_python_interpreter={sys.executable}",
         "-m", "ansible.builtin.shell", "-a", f"until [ -e {go} ]; do sleep 0.1; done", "-B", "300", "-P", "0", "-o"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=BOUND, check=False)
    assert started.returncode == 0, started.stdout + started.stderr
    job = json.loads(started.stdout.split(" => ", 1)[1])  # localhost | CHANGED => {...}
    jid, results = job["ansible_job_id"], Path(job["results_file"])

    assert sglang_ready.wrapper_running(jid)
    assert not sglang_ready.wrapper_running(f"j1{jid}")  # another job id
    go.touch()
    wait_for(lambda: (sglang_ready.finished_job(str(results)) or {}).get("rc") == 0, BOUND, 0.1,
             "the job's result in its file")
    wait_for(lambda: not sglang_ready.wrapper_running(jid), BOUND, 0.1, "the async wrapper's processes to end")
