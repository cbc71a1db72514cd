"""The rollout lease: one deploy at a time takes it; a second is refused naming the holder; a stale one is taken
over only when named; it is released only by its holder; and this controller knows its own dead runs."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import _controller, _lease
from ansible_collections.sglang.deploy.plugins.modules import rollout_lease

Runner = Callable[[Callable[[], None], dict[str, Any]], dict[str, Any]]
NOW = 1_796_425_700.0


def holder(name: str, **changes: Any) -> dict[str, Any]:
    return {"id": f"id-{name}", "user": name, "controller": f"ctl-{name}", "boot_id": "b", "pid": 100,
            "pid_start": "5", "command": f"ansible-playbook deploy.yml -e who={name}", "started": NOW, **changes}


def test_the_first_run_takes_it_and_a_second_is_refused_naming_the_holder(tmp_path: Path) -> None:
    path = str(tmp_path / "lease.json")
    taken = _lease.hold(path, holder("alice"), 600, now=NOW)
    assert taken["changed"] and taken["lease"]["id"] == "id-alice" and taken["lease"]["expires"] == NOW + 600
    with pytest.raises(_lease.LeaseRefused) as refused:
        _lease.hold(path, holder("bob"), 600, now=NOW + 10)
    message = str(refused.value)
    assert message.startswith("ROLLOUT LEASE HELD by alice@ctl-alice, PID 100, running `ansible-playbook deploy.yml "
                              "-e who=alice` since 2026-12-04") and "Nothing was changed" in message
    # Even naming it does not take a live lease.
    with pytest.raises(_lease.LeaseRefused, match="another deploy is changing the fleet"):
        _lease.hold(path, holder("bob"), 600, takeover="id-alice", now=NOW + 10)
    assert json.loads(Path(path).read_text())["id"] == "id-alice"


def test_the_holder_renews_and_releases_it_and_nobody_else_can_release_it(tmp_path: Path) -> None:
    path = str(tmp_path / "lease.json")
    _lease.hold(path, holder("alice"), 600, now=NOW)
    renewed = _lease.hold(path, holder("alice"), 600, now=NOW + 300)
    assert renewed["changed"] is False and renewed["lease"]["expires"] == NOW + 900
    assert renewed["lease"]["started"] == NOW  # when it was taken, not renewed
    assert _lease.release(path, "id-bob") == {"changed": False, "lease": renewed["lease"]}
    assert _lease.release(path, "id-alice") == {"changed": True, "lease": None}
    assert not Path(path).exists() and _lease.release(path, "id-alice")["changed"] is False


def test_a_stale_lease_is_taken_over_only_when_named(tmp_path: Path) -> None:
    path = str(tmp_path / "lease.json")
    _lease.hold(path, holder("alice"), 600, now=NOW)
    # Expired: stale, but not taken without its id.
    with pytest.raises(_lease.LeaseRefused) as refused:
        _lease.hold(path, holder("bob"), 600, now=NOW + 601)
    assert "it is stale: it expired at" in str(refused.value)
    assert str(refused.value).endswith("take the lease over with -e sglang_rollout_lease_takeover=id-alice")
    with pytest.raises(_lease.LeaseRefused):
        _lease.hold(path, holder("bob"), 600, takeover="id-someone-else", now=NOW + 601)
    taken = _lease.hold(path, holder("bob"), 600, takeover="id-alice", now=NOW + 601)
    assert taken["changed"] and taken["took_over"]["id"] == "id-alice"
    assert taken["lease"]["took_over"]["user"] == "alice" and "expired" in taken["lease"]["took_over"]["stale"]
    # Known gone on its controller before it expired: stale too.
    gone = {"id-bob": "its holder, PID 100 on this controller (ctl-bob), is gone"}
    assert _lease.staleness(taken["lease"], NOW + 602, gone) == gone["id-bob"]
    assert _lease.hold(path, holder("carol"), 600, takeover="id-bob", gone=gone, now=NOW + 602)["changed"]


def _take(path: str, name: str, results: Any) -> None:
    try:
        _lease.hold(path, holder(name), 600)
        results.put(name)
    except _lease.LeaseRefused:
        results.put("")


def test_two_runs_that_start_together_get_one_lease(tmp_path: Path) -> None:
    """The lock serialises the read-modify-write: of eight processes started together exactly one holds it."""
    path = str(tmp_path / "lease.json")
    results: Any = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_take, args=(path, f"run{index}", results)) for index in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    winners = [name for name in (results.get(timeout=5) for _worker in workers) if name]
    assert len(winners) == 1 and json.loads(Path(path).read_text())["user"] == winners[0]


def test_the_module_reads_takes_refuses_and_releases(tmp_path: Path, run_module: Runner) -> None:
    path = str(tmp_path / "state" / "lease.json")
    assert run_module(rollout_lease.main, {"path": path})["lease"] is None
    taken = run_module(rollout_lease.main, {"state": "held", "path": path, "holder": holder("alice"), "ttl": 60})
    assert taken["changed"] and taken["lease"]["user"] == "alice"
    refused = run_module(rollout_lease.main, {"state": "held", "path": path, "holder": holder("bob")})
    assert refused["failed"] and refused["msg"].startswith("ROLLOUT LEASE HELD by alice@ctl-alice")
    assert refused["lease"]["id"] == "id-alice"
    lost = run_module(rollout_lease.main, {"state": "held", "renew": True, "path": path, "holder": holder("bob")})
    assert lost["failed"] and lost["msg"].startswith("ROLLOUT LEASE LOST: this run held the rollout lease, which is "
                                                     "now held by alice@ctl-alice")
    assert run_module(rollout_lease.main, {"state": "released", "path": path, "holder": holder("bob")})["changed"] \
        is False
    assert run_module(rollout_lease.main, {"state": "released", "path": path, "holder": holder("alice")})["changed"]
    assert run_module(rollout_lease.main, {"state": "held", "path": path, "holder": {}})["failed"]


def test_check_mode_takes_nothing(tmp_path: Path, run_module: Runner) -> None:
    path = str(tmp_path / "lease.json")
    would = run_module(rollout_lease.main, {"state": "held", "path": path, "holder": holder("alice"),
                                            "_ansible_check_mode": True})
    assert would["changed"] is True and not Path(path).exists()


def test_this_controller_knows_its_own_dead_run(tmp_path: Path) -> None:
    """A lease of this controller's boot whose ansible-playbook process is gone, or is another process under the
    same PID, is gone; one of a live process, of another controller or of another boot is not."""
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        mine = {"id": "x", "boot_id": _controller.boot_id(), "controller": socket.gethostname(), "pid": alive.pid,
                "pid_start": _controller.start_ticks(alive.pid)}
        assert _controller.gone(mine) == {}
        assert _controller.gone(dict(mine, pid_start="1")) == {
            "x": f"its holder, PID {alive.pid} on this controller ({socket.gethostname()}), is gone, and no worker "
                 "of its run is left"}
        assert _controller.gone(dict(mine, controller="another-host")) == {}
        assert _controller.gone(dict(mine, boot_id="another-boot")) == {}
    finally:
        alive.kill()
        alive.wait()
    assert "x" in _controller.gone(mine)  # the process ended
    assert _controller.gone(None) == {} and _controller.gone({"id": "y"}) == {}


def test_the_holder_is_the_ansible_playbook_process_with_secrets_hidden(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    playbook = ["/venv/bin/python3.11", "/venv/bin/ansible-playbook", "deploy.yml", "-e", "hicache_ratio=3.0", "-e",
                "sglang_api_key=s3cr3t", "-e", '{"sglang_rollout_lease_takeover": "x", "hf_token": "t0k"}']
    # A worker: forked from ansible-playbook, with its command line; its child runs a lookup; the main process.
    for pid, parent, argv in ((400, 300, ["python3", "-c", "lookup"]), (300, 200, playbook), (200, 1, playbook)):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "stat").write_text(f"{pid} (python3) S {parent} " + " ".join(["0"] * 17) + " 4242 0 0\n")
        (proc / str(pid) / "cmdline").write_text("\0".join(argv) + "\0")
    (proc / "sys" / "kernel" / "random").mkdir(parents=True)
    (proc / "sys" / "kernel" / "random" / "boot_id").write_text("boot-1\n")
    assert _controller.playbook_process(400, str(proc)) == 200 == _controller.playbook_process(300, str(proc))
    assert _controller.start_ticks(200, str(proc)) == "4242"
    command = _controller.redacted(_controller.argv_of(200, str(proc)))
    assert command == ("ansible-playbook deploy.yml -e hicache_ratio=3.0 -e 'sglang_api_key=<hidden>' -e "
                       "'<extra variables with a secret, hidden>'")
    assert "s3cr3t" not in command and "t0k" not in command
    assert os.getpid() == _controller.playbook_process(os.getpid(), "/nonexistent")  # no /proc: itself


def test_the_lease_directory_is_created_0700_and_its_lock_0600(tmp_path: Path) -> None:
    """No other local user can open the lock (let alone hold it): a new directory is 0700, the lock 0600, an older
    0644 lock is tightened, and a directory others may write, or a link at the lock, is refused."""
    path = tmp_path / "state" / "deploy" / "lease.json"
    _lease.hold(str(path), holder("alice"), 600, now=NOW)
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert oct(Path(f"{path}.lock").stat().st_mode & 0o777) == "0o600"
    Path(f"{path}.lock").chmod(0o644)
    _lease.release(str(path), "id-alice")
    assert oct(Path(f"{path}.lock").stat().st_mode & 0o777) == "0o600"
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(_lease.LeaseUnsafe, match=r"directory .*/shared is owned by uid \d+ with mode 1777"):
        _lease.hold(str(shared / "lease.json"), holder("alice"), 600)
    assert not (shared / "lease.json.lock").exists()
    other = tmp_path / "other"
    other.mkdir()
    (other / "lease.json.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(_lease.LeaseUnsafe, match=r"lease\.json\.lock is a symbolic link"):
        _lease.hold(str(other / "lease.json"), holder("alice"), 600)
    assert not (tmp_path / "elsewhere").exists()


HOLD_LOCK = ("import fcntl, sys\n"
             "handle = open(sys.argv[1], 'a')\n"
             "fcntl.flock(handle, fcntl.LOCK_EX)\n"
             "print('held', flush=True)\n"
             "sys.stdin.read()\n")


def test_a_lock_held_by_another_process_ends_in_a_bounded_wait_naming_it(
        tmp_path: Path, run_module: Runner) -> None:
    """A process that keeps the lock (a local user could, before the lock was 0600) makes the deploy wait at
    most lock_timeout, then fail naming that process and the lease's holder; once it lets go the lease is taken."""
    path = str(tmp_path / "lease.json")
    _lease.hold(path, holder("alice"), 600, now=NOW)
    staller = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, f"{path}.lock"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert staller.stdout is not None and staller.stdout.readline() == "held\n"
        started = time.monotonic()
        with pytest.raises(_lease.LeaseLocked) as locked:
            _lease.hold(path, holder("bob"), 600, lock_timeout=0.3)
        waited = time.monotonic() - started
        message = str(locked.value)
        assert 0.3 <= waited < 10, waited  # the bound, not the staller, ends the wait
        assert message.startswith(f"ROLLOUT LEASE LOCK {path}.lock still held after 0.3 s "
                                  f"(sglang_rollout_lease_lock_timeout) by PID {staller.pid} (`")
        assert "The lease itself is held by alice@ctl-alice" in message and "Nothing was changed" in message
        failed = run_module(rollout_lease.main, {"state": "held", "path": path, "holder": holder("bob"),
                                                 "lock_timeout": 1})
        assert failed["failed"] and failed["msg"].startswith("ROLLOUT LEASE LOCK")
        assert json.loads(Path(path).read_text())["id"] == "id-alice"
    finally:
        assert staller.stdin is not None
        staller.stdin.close()
        staller.wait(30)
    assert _lease.release(path, "id-alice", lock_timeout=0.3)["changed"]
    refused = run_module(rollout_lease.main, {"state": "held", "path": path, "holder": holder("bob"),
                                              "lock_timeout": 0})
    assert refused["failed"] and "lock_timeout (sglang_rollout_lease_lock_timeout)" in refused["msg"]


# A controller and a worker forked from it: the worker takes a session of its own (as Ansible's WorkerProcess does)
# and both wait on stdin; the controller prints the worker's PID.
# The worker itself reports its PID once it leads a session of its own: the parent printing the fork's PID raced the
# child's setsid() (CI once read the session before it, and os.getsid answered 0: the old session's leader lay outside
# the PID namespace).
FORKING_CONTROLLER = ("import os, sys\n"
                      "child = os.fork()\n"
                      "if child == 0:\n"
                      "    os.setsid()\n"
                      "    print(os.getpid(), flush=True)\n"
                      "    sys.stdin.read()\n"
                      "    os._exit(0)\n"
                      "sys.stdin.read()\n")


def _until(check: Callable[[], bool]) -> None:
    """Poll until check() holds (a process's end is seen in /proc shortly after the signal); 30 s bound a failure."""
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, "waited 30 s"
        time.sleep(0.01)


def test_a_killed_controller_whose_worker_survives_is_not_gone_until_the_worker_ends() -> None:
    """SIGKILL the controller: its forked worker, in a session of its own, lives on; the lease's run is not gone
    (and the refusal can name the worker) until the worker ends too."""
    controller = subprocess.Popen([sys.executable, "-c", FORKING_CONTROLLER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
    assert controller.stdout is not None
    worker = int(controller.stdout.readline())
    lease = {"id": "x", "boot_id": _controller.boot_id(), "controller": socket.gethostname(), "pid": controller.pid,
             "pid_start": _controller.start_ticks(controller.pid), "command": _controller.run_command(controller.pid)}
    try:
        assert os.getsid(worker) == worker != os.getsid(controller.pid)  # neither its session nor its group
        assert _controller.run_processes(lease) == sorted([controller.pid, worker])
        assert _controller.gone(lease) == {} and _controller.still_running(lease) == ""  # the controller lives
        # This run's own workers run the same command: the caller's playbook process and its children are not the
        # dead run's.
        other_run = dict(lease, pid=0, pid_start="0")
        assert _controller.run_processes(other_run, own=controller.pid) == []
        controller.kill()
        controller.wait(30)
        assert _controller.run_processes(lease) == [worker]
        assert _controller.gone(lease) == {}
        running = _controller.still_running(lease)
        assert running.startswith(f"its holder, PID {controller.pid} on this controller, is gone, but 1 process(es) "
                                  f"of its run still run") and running.count(f"PID {worker}") == 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)
        controller.kill()
        controller.wait(30)
    _until(lambda: not _controller.run_processes(lease))
    assert _controller.gone(lease) == {"x": f"its holder, PID {controller.pid} on this controller "
                                            f"({socket.gethostname()}), is gone, and no worker of its run is left"}
    assert _controller.still_running(lease) == ""


def test_the_holder_records_what_the_rule_matches_its_workers_by() -> None:
    me = _controller.holder()
    assert me["command"] == _controller.run_command(me["pid"]) and set(_lease.HOLDER_KEYS) == set(me)
