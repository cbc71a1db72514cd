"""The readiness poll against real Ansible async jobs. While a job runs, a process of its async wrapper is found by
the job id Ansible returned; once it has ended, none is (_async_job.wrapper_running). And a playbook that starts
the waiter as an async job and polls it with the collection's action plugin finds the job in the async_dir the
site configured (ANSIBLE_ASYNC_DIR, or async_dir in ansible.cfg), where the module alone looked in ~/.ansible_async.
Each on every controller (tests/helpers.py, CONTROLLERS): ansible-core 2.21 calls its async wrapper with another
argv (tests/fixtures/ansible/async-wrapper-cmdline-2.21.txt)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import _async_job
from helpers import CONTROLLERS, ROOT, controller, controller_python, wait_for

BOUND = 120.0  # seconds; only a broken run comes near it


@pytest.mark.parametrize("release", CONTROLLERS)
def test_a_real_async_job_is_found_while_it_runs_and_not_after(tmp_path: Path, release: str) -> None:
    go = tmp_path / "go"
    # Ansible's own defaults (no ansible.cfg in tmp_path; the default callback prints "host | CHANGED => {json}", and
    # ansible's -o, one line per host, is deprecated in 2.21), job files under tmp_path.
    env = {key: value for key, value in os.environ.items() if key != "ANSIBLE_CONFIG"}
    env.update(ANSIBLE_ASYNC_DIR=str(tmp_path / "async"), ANSIBLE_LOCALHOST_WARNING="0")
    # The job waits for a file this test writes, so it cannot end before it has been looked for.
    started = subprocess.run(
        [controller(release) / "ansible", "localhost", "-e", f"ansible_python_interpreter={controller_python(release)}",
         "-m", "ansible.builtin.shell", "-a", f"until [ -e {go} ]; do sleep 0.1; done", "-B", "300", "-P", "0"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=BOUND, check=False)
    assert started.returncode == 0, started.stdout + started.stderr
    job = json.loads(started.stdout.split(" => ", 1)[1])  # localhost | CHANGED => {...}
    assert "DEPRECATION" not in started.stderr, started.stderr
    jid, results = job["ansible_job_id"], Path(job["results_file"])

    assert _async_job.wrapper_running(jid)
    assert not _async_job.wrapper_running(f"j1{jid}")  # another job id
    go.touch()
    wait_for(lambda: (_async_job.finished_result(str(results)) or {}).get("rc") == 0, BOUND, 0.1,
             "the job's result in its file")
    wait_for(lambda: not _async_job.wrapper_running(jid), BOUND, 0.1, "the async wrapper's processes to end")


PLAYBOOK = """
- name: Start the readiness waiter as an async job and poll it, as roles/sglang_service/tasks/wait.yml does
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Start the readiness waiter on the host
      sglang.deploy.sglang_ready:
        unit: sglang-async-dir.service
        url: http://127.0.0.1:9/health_generate
        status_file: "{{ work }}/status.json"
      async: 120
      poll: 0
      register: job

    - name: Wait for it
      sglang.deploy.sglang_ready:
        unit: sglang-async-dir.service
        jid: "{{ job.ansible_job_id }}"
        status_file: "{{ work }}/status.json"
      register: ready
      until: ready.finished | default(false)
      retries: 600
      delay: 0.2
      ignore_errors: true

    - name: Keep what both tasks returned
      ansible.builtin.copy:
        content: "{{ {'job': job, 'ready': ready} | to_json }}"
        dest: "{{ work }}/out.json"
        mode: "0644"
"""


@pytest.mark.parametrize("release", CONTROLLERS)
@pytest.mark.parametrize("where", ["environment", "ansible.cfg"])
def test_a_playbook_polls_the_waiter_in_the_configured_async_dir(tmp_path: Path, where: str, release: str) -> None:
    custom = tmp_path / "site-async"  # neither ~/.ansible_async nor anything under HOME
    home = tmp_path / "home"
    bin_dir = tmp_path / "bin"
    for path in (home, bin_dir):
        path.mkdir()
    # The unit does not exist (what systemctl answers for one): the waiter fails at once, which ends the job.
    (bin_dir / "systemctl").write_text("#!/bin/sh\nprintf 'LoadState=not-found\\nActiveState=inactive\\n'\n")
    (bin_dir / "systemctl").chmod(0o755)
    config = tmp_path / "ansible.cfg"
    config.write_text(f"[defaults]\ncollections_path = {ROOT / '.cache' / 'collections'}\n"
                      + (f"async_dir = {custom}\n" if where == "ansible.cfg" else ""))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(config), ANSIBLE_LOCALHOST_WARNING="0", HOME=str(home),
               PATH=f"{bin_dir}:{os.environ['PATH']}")
    if where == "environment":
        env["ANSIBLE_ASYNC_DIR"] = str(custom)
    run = subprocess.run(
        [controller(release) / "ansible-playbook", "-i", "localhost,", "-c", "local", "play.yml",
         "-e", f"ansible_python_interpreter={controller_python(release)}", "-e", f"work={tmp_path}"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=BOUND, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    job, ready = out["job"], out["ready"]
    assert Path(job["results_file"]) == custom / job["ansible_job_id"]  # where the wrapper wrote it
    # The poll found the job there and returned the waiter's own failure, not "no async job ... ~/.ansible_async".
    assert ready["failed"] is True and ready["finished"] is True, ready
    assert ready["msg"].startswith("sglang-async-dir.service does not exist after "), ready["msg"]
    assert not (custom / job["ansible_job_id"]).exists()  # collected
    assert not (home / ".ansible_async").exists()
