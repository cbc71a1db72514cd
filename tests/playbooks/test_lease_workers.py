"""A real ansible-playbook killed while its worker runs a task: the worker lives on in a session of its own (Ansible's
WorkerProcess._detach calls setsid), with the controller's command line, so the rollout lease's rule sees the run
as not gone and names the worker; once the worker ends, the run is gone. Only processes this test started are
signalled: the controller, then its descendants as they were before the kill (each checked by its start, so a
reused PID is left alone)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.module_utils import _controller
from helpers import ROOT, wait_for

BOUND = 120.0  # seconds; only a broken run comes near it

PLAYBOOK = """
- name: Hold a worker on a task until the test lets go
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Wait for the go file
      ansible.builtin.shell: "touch {tmp}/waiting; until [ -e {tmp}/go ]; do sleep 0.1; done"
      changed_when: false
"""


def descendants(root: int) -> dict[int, str]:
    """The live descendants of ``root``, each with its start (clock ticks after boot)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        current = int(name)
        for _depth in range(64):
            current = _controller.parent_of(current)
            if current == root:
                found[int(name)] = _controller.start_ticks(int(name))
                break
            if current <= 1:
                break
    return found


def test_a_killed_controllers_worker_keeps_its_run_alive_until_it_ends(tmp_path: Path) -> None:
    (tmp_path / "hold.yml").write_text(PLAYBOOK.format(tmp=tmp_path))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_LOCALHOST_WARNING="0")
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    controller = subprocess.Popen([playbook, str(tmp_path / "hold.yml"), "-i", "localhost,", "-c", "local",
                                   "-e", f"ansible_python_interpreter={sys.executable}"],
                                  cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started: dict[int, str] = {}
    try:
        wait_for(lambda: (tmp_path / "waiting").exists() or controller.poll() is not None, BOUND, 0.1,
                 "the worker's task to start")
        assert controller.poll() is None, "the playbook ended before its task waited"
        lease = {"id": "run-1", "boot_id": _controller.boot_id(), "controller": socket.gethostname(),
                 "pid": controller.pid, "pid_start": _controller.start_ticks(controller.pid),
                 "command": _controller.run_command(controller.pid)}
        started = descendants(controller.pid)
        controller.kill()
        controller.wait(BOUND)

        workers = _controller.run_processes(lease, own=0)
        assert workers and set(workers) <= set(started), (workers, started)
        assert all(os.getsid(worker) == worker != os.getsid(0) for worker in workers)  # sessions of their own
        assert _controller.gone(lease) == {}
        running = _controller.still_running(lease)
        assert f"its holder, PID {controller.pid} on this controller, is gone, but" in running
        assert all(str(worker) in running for worker in workers)
    finally:
        (tmp_path / "go").touch()
        controller.kill()
        controller.wait(BOUND)
        for pid, ticks in started.items():
            if _controller.start_ticks(pid) == ticks:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not _controller.run_processes(lease, own=0), BOUND, 0.1, "the killed run's workers to end")
    assert _controller.gone(lease) == {"run-1": f"its holder, PID {controller.pid} on this controller "
                                                f"({socket.gethostname()}), is gone, and no worker of its run is left"}
