"""Rollouts survive a killed controller and a second operator: the survival scenario's drills, on its own fleet.

The kill drills kill the controller (SIGKILL to ansible-playbook, by its PID) at each point of a server's turn,
under the bounded load through the router: once drained, once its new files are written, while the restarted
server loads, once it serves but before it rejoins the router, and during a driver reboot. The hooks of
molecule/rolling/hooks (hold_*.yml; the scenario uses the rolling scenario's group_vars) and the simulator's
hold_load fault stop the turn exactly there, so the kill lands at its point however fast or slow the machine is.
Ansible's workers outlive the killed controller (each in a session of its own), so the lease stays live while
one is left: the drill of a drained server shows a rerun refused then, naming the worker; each drill then ends the
workers of the run it killed, by PID (the processes with the killed controller's command line started after it).
Then the same command is run again: it is refused, naming the dead run's lease as stale, and run once more taking
the lease over; afterwards every server runs what its unit says, every server is in the router, status.yml
-e strict=true passes, and no request failed.

The drills at one point of a turn change the first server only (group_vars: drill_change_host, drill_driver_host),
which is all a point of its turn needs; the drill of a loading server changes the fleet, as the rerun must wait
for the first server before it drains the second.

The concurrency drill starts two deploys with different values together: one changes the fleet, the other is
refused before any change, naming the holder, and the fleet ends homogeneous.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import _controller
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_quote import exec_argv
from drill import Running, run_playbook, start_playbook, why
from fleet import (
    ENV_PATH,
    ROUTER,
    RUNNER,
    UNIT,
    UNIT_PATH,
    WORKERS,
    Load,
    boot_id,
    invocation,
    listed,
    on,
    print_timeline,
    timeline,
)

testinfra_hosts = RUNNER.get_hosts("sglang_routers")  # the drills run once; the servers are reached by name
FIRST = WORKERS[0]
# The held load can outlast the sandbox's 30 s stall bounds before the rerun's wait begins: the drills' runs allow
# more (a wait's own argument: no file of the servers changes with it).
PATIENT = ["-e", json.dumps({"sglang_service_stall_timeouts": dict.fromkeys(
    ("starting", "distributed_init", "loading_weights", "kv_cache", "cuda_graphs", "host_kv_pool", "warmup"), 300)})]
OLD_DRIVER, NEW_DRIVER = "580.95.05", "580.105.08"


def wait_for(what: str, check: Callable[[], Any], seconds: float = 600) -> Any:
    """Poll until check() gives something true; the deadline only bounds a failure."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"waited {seconds:.0f} s for {what}"
        time.sleep(0.2)


def deploy(*extra: str) -> tuple[int, str, float]:
    return run_playbook("deploy.yml", *PATIENT, *extra)


def kill(run: Running) -> dict[str, Any]:
    """SIGKILL to the controller, by its PID (its workers are orphaned as a dead controller's are): the killed run
    as its lease records it (PID, start, command line), for end_workers."""
    pid = run.proc.pid
    dead = {"pid": pid, "pid_start": _controller.start_ticks(pid), "command": _controller.run_command(pid)}
    assert dead["pid_start"] and dead["command"], f"no /proc entry of the controller {pid}"
    os.kill(pid, signal.SIGKILL)
    run.finish(timeout=120)
    return dead


def end_workers(dead: dict[str, Any]) -> list[int]:
    """End the workers the killed run left on this controller, by PID: the processes with its command line that
    started after it (module_utils _controller.run_processes, as the lease's rule finds them; nothing else here
    runs that command line now). Returns their PIDs, once none is left."""
    workers = _controller.run_processes(dead, own=0)
    for worker in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)
    wait_for(f"the killed run's workers {workers} to end", lambda: not _controller.run_processes(dead, own=0), 60)
    print(f"ENDED the killed run's workers: {workers}")
    return workers


def held(name: str, point: str) -> bool:
    text = on(name).run("cat /run/sglang-drill-held 2>/dev/null").stdout.strip()
    return text == point


def let_go(name: str) -> None:
    """End the held hook: its module runs on in the host after the controller died, and ends once the file is
    there (the next drill clears it before it holds a turn again)."""
    on(name).run("touch /run/sglang-drill-go")


def lease_taken_over_after(pid: int, *change: str) -> tuple[int, str, float]:
    """The same command again, twice: refused first, naming the dead run's lease as stale and how to take it over
    (nothing changes); then taking it over. The second run's (rc, output, seconds)."""
    rc, out, _seconds = deploy(*change)
    assert rc != 0, "a rerun took the dead run's lease without being asked:\n" + why(out)
    assert "ROLLOUT LEASE HELD by" in out and f"PID {pid}" in out, why(out)
    assert f"its holder, PID {pid} on this controller" in out and "is gone" in out, why(out)
    assert changed(out) == 0, why(out)
    lease = re.search(r"-e sglang_rollout_lease_takeover=(\w+)", out)
    assert lease, why(out)
    print("STALE LEASE reported: " + out[out.index("ROLLOUT LEASE HELD by"):][:400])
    rc, out, seconds = deploy(*change, "-e", f"sglang_rollout_lease_takeover={lease.group(1)}")
    assert rc == 0, why(out)
    assert "TOOK OVER the rollout lease of" in out, why(out)
    return rc, out, seconds


def changed(output: str) -> int:
    """The changes a run reports on every host of its last PLAY RECAP."""
    return sum(int(count) for count in re.findall(r"\bchanged=(\d+)", output.rsplit("PLAY RECAP", 1)[-1]))


def changes_by_host(output: str) -> dict[str, int]:
    """Each host's changes in the last PLAY RECAP of a run."""
    recap = output.rsplit("PLAY RECAP", 1)[-1]
    return {name: int(count) for name, count in re.findall(r"^(\S+)\s*:.*?\bchanged=(\d+)", recap, re.M)}


def running_argv(name: str) -> list[str]:
    pid = on(name).check_output(f"systemctl show {UNIT} --property=MainPID --value")
    return on(name).check_output(f"tr '\\0' '\\n' < /proc/{pid}/cmdline").splitlines()


def assert_converged(load: Load, since: float, *change: str) -> dict[str, int]:
    """Every server runs what its unit says, is in the router and healthy, status.yml -e strict=true passes, no
    request failed and all servers but one were healthy all along."""
    summary = load.finish()
    print_timeline(timeline(load, since), since)
    for name in WORKERS:
        unit = on(name).file(UNIT_PATH).content_string
        assert running_argv(name) == exec_argv(unit), f"{name} runs another configuration than its unit"
    assert listed(on(ROUTER)) == [(f"http://{name}:30000", True) for name in WORKERS]
    rc, out, _seconds = run_playbook("playbooks/status.yml", "-e", "strict=true", *change)
    assert rc == 0, why(out)
    assert summary["failed"] == 0, summary
    assert summary["min_healthy"] >= len(WORKERS) - 1, summary
    return summary


def killed_at_a_held_point(tmp_path: Path, point: str) -> None:
    """The first server's change (only its environment file: drill_change) held at the point, the controller killed
    there; the rerun converges."""
    since = time.time()
    load = Load(tmp_path)
    change = ("-e", f"hicache_ratio={current_ratio()}", "-e", f"drill_change_host={FIRST}",
              "-e", f"drill_change=killed-{point}")
    on(FIRST).run("rm -f /run/sglang-drill-held /run/sglang-drill-go")
    run = start_playbook("deploy.yml", *PATIENT, *change, "-e", f"drill_hold_host={FIRST}",
                         "-e", f"drill_hold_point={point}")
    wait_for(f"{FIRST}'s turn held once {point}", lambda: held(FIRST, point) or run.proc.poll() is not None)
    assert run.proc.poll() is None, "the run ended before its turn was held:\n" + why(run.output)
    dead = kill(run)
    pid = dead["pid"]
    if point == "drained":
        refused_while_a_worker_lives(dead, *change)
    let_go(FIRST)
    end_workers(dead)
    written = f'SGLANG_DEPLOY_DRILL_CHANGE="killed-{point}"' in on(FIRST).file(ENV_PATH).content_string
    _rc, out, seconds = lease_taken_over_after(pid, *change)
    summary = assert_converged(load, since, *change)
    assert f'SGLANG_DEPLOY_DRILL_CHANGE="killed-{point}"' in on(FIRST).file(ENV_PATH).content_string
    print(f"MEASURED killed controller ({point}): the rerun converged in {seconds:.1f} s (changed: "
          f"{changes_by_host(out)}); the new file was on disk at the kill: {written}; load {summary}")


def refused_while_a_worker_lives(dead: dict[str, Any], *change: str) -> None:
    """The killed run's worker of the held turn still runs (it waits for its module on the host): a rerun is
    refused as by a live holder, naming that worker, with no takeover offered, and changes nothing."""
    workers = _controller.run_processes(dead, own=0)
    assert workers, "no worker of the killed run is left to show the rule with"
    rc, out, _seconds = deploy(*change)
    assert rc != 0 and "ROLLOUT LEASE HELD by" in out and f"PID {dead['pid']}" in out, why(out)
    assert "Not stale yet:" in out and "of its run still run" in out, why(out)
    assert any(f"PID {worker}" in out or f", {worker}" in out for worker in workers), why(out)
    assert "sglang_rollout_lease_takeover=" not in out and changed(out) == 0, why(out)
    print(f"MEASURED a rerun while the killed run's workers {workers} live: refused, no takeover offered: "
          + out[out.index("ROLLOUT LEASE HELD by"):][:500])


def test_a_controller_killed_once_a_server_drained_leaves_a_rerun_that_converges(host: Any, tmp_path: Path) -> None:
    """The first server out of the router and drained, its old server running its old files."""
    killed_at_a_held_point(tmp_path, "drained")


def test_a_controller_killed_once_the_files_are_written_leaves_a_rerun_that_restarts_it(
        host: Any, tmp_path: Path) -> None:
    """The new files on disk, systemd not reloaded, the old process serving them: the files are in sync, and only
    the running server says it must restart (its argv, NeedDaemonReload, files newer than its start)."""
    killed_at_a_held_point(tmp_path, "written")


def test_a_controller_killed_once_a_server_serves_again_leaves_a_rerun_that_puts_it_back(
        host: Any, tmp_path: Path) -> None:
    """Ready and smoke-tested, not yet back in the router: the rerun's router play puts it back."""
    killed_at_a_held_point(tmp_path, "ready")


def test_a_controller_killed_while_a_server_loads_leaves_a_rerun_that_waits_for_it_first(
        host: Any, tmp_path: Path) -> None:
    """Restarted and loading (its load held), out of the router: the rerun restarts nothing there, waits for it
    and puts it back before it drains another server, so all servers but one serve all along."""
    since = time.time()
    load = Load(tmp_path)
    change = ("-e", "hicache_ratio=3.9", "-e", "drill_hold_load=true")
    before = invocation(FIRST)
    run = start_playbook("deploy.yml", *PATIENT, *change)

    def loading_or_ended() -> bool:
        started = invocation(FIRST) != before
        return (started and "Load weight begin" in on(FIRST).check_output(f"journalctl -u {UNIT} -n 20 -o cat")) \
            or run.proc.poll() is not None

    wait_for(f"{FIRST}'s new server loading", loading_or_ended)
    assert run.proc.poll() is None, why(run.output)
    dead = kill(run)
    pid = dead["pid"]
    end_workers(dead)
    loading = invocation(FIRST)
    rc, out, _seconds = deploy(*change)
    assert rc != 0 and f"PID {pid}" in out, why(out)
    lease = re.search(r"-e sglang_rollout_lease_takeover=(\w+)", out)
    assert lease, why(out)
    rerun = start_playbook("deploy.yml", *PATIENT, *change, "-e", f"sglang_rollout_lease_takeover={lease.group(1)}")
    wait_for("the rerun's wait for the loading server", lambda: "PLAY [Bring back the servers an earlier run left "
             "loading]" in rerun.output or rerun.proc.poll() is not None)
    for name in WORKERS:  # every server of this change loads once the file is there
        on(name).run("touch /run/sglang-drill-load")
    rc, out, seconds = rerun.finish()
    assert rc == 0, why(out)
    assert f"Waited for first, then back in the routers (an earlier run started them; still loading): {FIRST}" in out
    assert invocation(FIRST) == loading, "the loading server was restarted instead of waited for"
    summary = assert_converged(load, since, *change)
    print(f"MEASURED killed controller (loading): the rerun waited for {FIRST} and converged in {seconds:.1f} s; "
          f"load {summary}")


def test_two_deploys_at_once_one_changes_the_fleet_and_the_other_is_refused(host: Any, tmp_path: Path) -> None:
    """Two operators, two values, started together: the lease lets one through; the other is refused, naming the
    holder, before it changes anything; the fleet ends with one value on every server."""
    load = Load(tmp_path)
    since = time.time()
    runs = {value: start_playbook("deploy.yml", *PATIENT, "-e", f"hicache_ratio={value}") for value in ("4.1", "4.2")}
    ends = {value: run.finish() for value, run in runs.items()}
    winners = [value for value, (rc, _out, _s) in ends.items() if rc == 0]
    assert len(winners) == 1, {value: why(out) for value, (_rc, out, _s) in ends.items()}
    (loser,) = set(ends) - set(winners)
    out = ends[loser][1]
    assert "ROLLOUT LEASE HELD by" in out and "Nothing was changed" in out, why(out)
    holder = re.compile(r"running `ansible-playbook deploy\.yml [^`]*hicache_ratio=" + re.escape(winners[0]))
    assert holder.search(out), why(out)
    assert changed(out) == 0, why(out)
    for name in WORKERS:
        assert f"--hicache-ratio {winners[0]}" in on(name).file(UNIT_PATH).content_string
    summary = assert_converged(load, since, "-e", f"hicache_ratio={winners[0]}")
    print(f"MEASURED two deploys at once: {winners[0]} changed the fleet in {ends[winners[0]][2]:.1f} s; "
          f"{loser} was refused after {ends[loser][2]:.1f} s, before any change; load {summary}")


def test_a_controller_killed_during_a_driver_reboot_leaves_a_rerun_that_converges(host: Any, tmp_path: Path) -> None:
    """The first server's driver bump (drill_driver_host): its host down for the driver's reboot when the
    controller dies. It comes back by itself (as a host does); the rerun finds its driver and files done and puts
    it back in the router, rebooting nothing."""
    marks = tmp_path / "reboot"
    marks.mkdir()
    change = ("-e", f"hicache_ratio={current_ratio()}", "-e", f"drill_driver_host={FIRST}",
              "-e", f"drill_driver_version={NEW_DRIVER}")
    # The scenario's reboot (halt the container, start it again), held between the two until the drill lets go.
    holding = ["sh", "-c", f'docker kill --signal=SIGRTMIN+3 "$0" >/dev/null && docker wait "$0" >/dev/null && '
               f'touch {marks}/down-"$0" && while [ ! -e {marks}/go ]; do sleep 0.2; done && docker start "$0"',
               "{{ inventory_hostname }}"]
    reboot = ("-e", json.dumps({"sglang_maintenance_reboot_command": holding}))
    since = time.time()
    load = Load(tmp_path)
    boots = {name: boot_id(name) for name in WORKERS}
    run = start_playbook("deploy.yml", *PATIENT, *change, *reboot)
    wait_for(f"{FIRST}'s host down for its reboot", lambda: (marks / f"down-{FIRST}").exists()
             or run.proc.poll() is not None)
    assert run.proc.poll() is None, why(run.output)
    dead = kill(run)
    pid = dead["pid"]
    (marks / "go").touch()  # the host comes back by itself, as a rebooting host does
    wait_for(f"{FIRST} up again", lambda: subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Running}}", FIRST], capture_output=True, text=True,
        check=False).stdout.strip() == "true", 300)
    end_workers(dead)
    rebooted = boot_id(FIRST)
    _rc, _out, seconds = lease_taken_over_after(pid, *change, *reboot)
    summary = assert_converged(load, since, *change)
    assert boot_id(FIRST) == rebooted != boots[FIRST], "the rerun rebooted the host again"
    assert all(boot_id(name) == boots[name] for name in WORKERS[1:]), "a host without a change was rebooted"
    drivers = {name: on(name).check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0")
               for name in WORKERS}
    assert drivers == {FIRST: NEW_DRIVER, **dict.fromkeys(WORKERS[1:], OLD_DRIVER)}, drivers
    print(f"MEASURED killed controller (driver reboot): the rerun converged in {seconds:.1f} s; load {summary}")


def current_ratio() -> str:
    return re.search(r"--hicache-ratio (\S+)", on(FIRST).file(UNIT_PATH).content_string).group(1)
