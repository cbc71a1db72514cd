"""Verify the rolling scenario: a change rolls across three servers under load without a failed
request; a change that crashes the second server is rolled back there and stops the rollout."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from drill import recap, run_playbook, why
from fleet import (
    ADMIN_AUTH,
    ADMIN_KEY,
    AUTH,
    GENERATE,
    ROUTER_KEY,
    RUNNER,
    SERVER_KEYS,
    UNIT,
    UNIT_PATH,
    WORKERS,
    Load,
    assert_one_at_a_time,
    boot_id,
    digest,
    healthy,
    invocation,
    listed,
    on,
    print_timeline,
    timeline,
)

testinfra_hosts = RUNNER.get_hosts("sglang_routers")  # tests run once; servers are reached by name


def deploy(*extra: str) -> tuple[int, str, float]:
    """The rollout phases of deploy.yml (validation always runs); converge already installed the hosts."""
    return run_playbook("deploy.yml", "--tags", "router,service", *extra)


def generations_through_the_router(host: Any, count: int) -> list[int]:
    """Completion tokens of `count` requests; round robin sends each server count / 3 of them."""
    return [json.loads(host.check_output(f"curl -s {AUTH} http://127.0.0.1:30080/generate {GENERATE}"))
            ["meta_info"]["completion_tokens"] for _request in range(count)]


def status(host: Any, path: str, *headers: str) -> str:
    """The HTTP status of one call to the router; 000 while nothing listens."""
    return host.run(f"curl -s -o /dev/null -w '%{{http_code}}' {' '.join(headers)} "
                    f"http://127.0.0.1:30080{path} {GENERATE if path == '/generate' else ''}").stdout.strip()


def test_router_serves_through_three_healthy_servers(host: Any) -> None:
    assert listed(host) == [(f"http://{name}:30000", True) for name in WORKERS]
    # Round robin over three servers that each require their own key: the router sends each its key.
    assert generations_through_the_router(host, 6) == [4] * 6
    assert host.service("sglang-router").is_running


def test_the_router_requires_its_key_and_keeps_every_key_out_of_sight(host: Any) -> None:
    assert status(host, "/generate") == "401"
    assert status(host, "/generate", "-H 'Authorization: Bearer mol-SERVER-1-8e2f'") == "401"
    assert status(host, "/workers") == "401"
    assert status(host, "/liveness") == "200"  # open, as the router's own health probes need
    keys = [ROUTER_KEY, ADMIN_KEY, *SERVER_KEYS.values()]
    pid = host.check_output("systemctl show sglang-router --property=MainPID --value")
    seen = {
        "ExecStart": host.check_output("systemctl show sglang-router --property=ExecStart"),
        "unit": host.file("/etc/systemd/system/sglang-router.service").content_string,
        "cmdline": host.file(f"/proc/{pid}/cmdline").content_string,
        "ps": host.check_output("ps -eo args"),
        "journal": host.check_output("journalctl -u sglang-router --no-pager -o cat"),
    }
    for where, text in seen.items():
        assert not [key for key in keys if key in text], f"a key in the router's {where}"
    assert "registered http://sglang-rolling-1:30000 (with a worker key)" in seen["journal"]
    for path in ("/etc/sglang-router/api-key", "/etc/sglang-router/admin-api-key", "/etc/sglang-router/workers.json"):
        f = host.file(path)
        assert (f.user, f.group, f.mode) == ("root", "sglang-router", 0o640), path


def worker_call(host: Any, method: str, path: str, auth: str, body: str = "") -> str:
    """The HTTP status of one call to the router's worker API."""
    data = f"-H 'Content-Type: application/json' -d '{body}'" if body else ""
    return host.run(f"curl -s -o /dev/null -w '%{{http_code}}' -X {method} {auth} {data} "
                    f"http://127.0.0.1:30080{path}").stdout.strip()


def wait_listed(host: Any, expected: list[tuple[str, bool]]) -> None:
    """Poll the router's list until it is the expected one; the bound only ends a failure."""
    deadline = time.monotonic() + 120
    while listed(host) != expected:
        assert time.monotonic() < deadline, f"the router's list is {listed(host)}, not {expected}"
        time.sleep(0.5)


def test_only_the_deploys_admin_key_adds_or_removes_a_worker(host: Any) -> None:
    """The clients' key (and no key) is refused on the worker API; the control plane's admin key, which only the
    deploy holds, takes a server out and puts it back (with its own key); the list ends as it began."""
    everyone = [(f"http://{name}:30000", True) for name in WORKERS]
    assert listed(host) == everyone
    first = f"http://{WORKERS[0]}:30000"
    listing = json.loads(host.check_output(f"curl -s {ADMIN_AUTH} http://127.0.0.1:30080/workers"))
    worker_id = next(w["id"] for w in listing["workers"] if w["url"] == first)
    add = json.dumps({"url": "http://192.0.2.1:30000"})  # TEST-NET-1: a rogue worker's address
    measured = {}
    for who, auth in (("no key", ""), ("client key", AUTH)):
        measured[who] = (worker_call(host, "POST", "/workers", auth, add),
                         worker_call(host, "DELETE", f"/workers/{worker_id}", auth),
                         worker_call(host, "GET", "/workers", auth))
        assert measured[who] == ("401", "401", "401"), (who, measured[who])
    assert listed(host) == everyone
    removed = worker_call(host, "DELETE", f"/workers/{worker_id}", ADMIN_AUTH)
    assert removed in ("200", "202"), removed
    wait_listed(host, [w for w in everyone if w[0] != first])
    back = json.dumps({"url": first, "api_key": SERVER_KEYS[WORKERS[0]]})
    added = worker_call(host, "POST", "/workers", ADMIN_AUTH, back)
    assert added in ("200", "202"), added
    wait_listed(host, everyone)
    measured["admin key"] = (added, removed, "200")
    print("MEASURED router worker API (POST, DELETE, GET /workers) by key: "
          + "; ".join(f"{who}: {' '.join(codes)}" for who, codes in measured.items()))
    assert generations_through_the_router(host, 6) == [4] * 6


def test_the_router_runs_sandboxed_and_its_metrics_listen_on_its_own_address(host: Any) -> None:
    """The router's unit gets the server's sandbox set (systemd-analyze security exposure at most 4.0), and its
    Prometheus listener binds the host's address on the scenario's network, not every interface."""
    score = host.check_output("systemd-analyze security --no-pager sglang-router.service | tail -1")
    exposure = float(re.search(r"exposure level for \S+: ([\d.]+)", score).group(1))
    print(f"MEASURED systemd-analyze security exposure of sglang-router.service: {exposure}")
    assert exposure <= 4.0, score
    assert host.service("sglang-router").is_running
    address = host.check_output("ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1")
    listeners = host.check_output("ss -Hltn 'sport = :29000' | awk '{print $4}'").split()
    print(f"MEASURED router Prometheus listener: {listeners}")
    assert listeners == [f"{address}:29000"], listeners
    metrics = host.run(f"curl -s -o /dev/null -w '%{{http_code}}' http://{address}:29000/metrics").stdout
    assert metrics == "200", metrics


def test_a_router_restarted_by_systemd_comes_back_with_every_server_and_its_key(host: Any) -> None:
    """No deploy runs: the launcher registers the servers from workers.json, each with its own key."""
    before = host.check_output("systemctl show sglang-router --property=InvocationID --value")
    host.check_output("systemctl restart sglang-router")
    assert host.check_output("systemctl show sglang-router --property=InvocationID --value") != before
    for _attempt in range(120):  # the router answers, then registers and health-checks the servers
        if status(host, "/liveness") == "200" and listed(host) == [(f"http://{n}:30000", True) for n in WORKERS]:
            break
        time.sleep(0.5)
    assert listed(host) == [(f"http://{name}:30000", True) for name in WORKERS]
    assert generations_through_the_router(host, 6) == [4] * 6


def test_change_rolls_across_the_servers_without_a_failed_request(host: Any, tmp_path: Path) -> None:
    since = time.time()
    load = Load(tmp_path)
    rc, out, seconds = deploy("-e", "hicache_ratio=3.0")
    summary = load.finish()
    rows = timeline(load, since)
    print_timeline(rows, since)
    print(f"MEASURED roll of 3 servers: {seconds:.1f} s wall")
    assert rc == 0, why(out)
    assert summary["failed"] == 0 and summary["sent"] > 100, summary
    assert summary["min_healthy"] >= 2, summary
    for name in WORKERS:
        assert "--hicache-ratio 3.0" in on(name).file(UNIT_PATH).content_string
        assert healthy(name)
        hook_log = on(name).file("/var/log/sglang-post-restart-hook.log").content_string
        assert f"rejoined with invocation {invocation(name)}" in hook_log, hook_log
    # One server at a time: each is removed, restarted, ready and re-added before the next is removed.
    assert_one_at_a_time(rows, WORKERS)


def test_a_crashing_change_is_rolled_back_and_stops_the_rollout(host: Any, tmp_path: Path) -> None:
    before = {name: digest(name) for name in WORKERS}
    third = invocation("sglang-rolling-3")
    since = time.time()
    load = Load(tmp_path)
    rc, out, seconds = deploy("-e", "hicache_ratio=4.0", "-e", "drill_crash_host=sglang-rolling-2")
    summary = load.finish()
    print_timeline(timeline(load, since), since)
    print(f"MEASURED fault drill: play failed after {seconds:.1f} s")
    assert rc != 0
    assert "ROLLOUT STOPPED at sglang-rolling-2" in out, why(out)
    assert "rolled back to the last good configuration" in out and "CUDA error" in out, why(out)
    assert "--hicache-ratio 4.0" in on("sglang-rolling-1").file(UNIT_PATH).content_string
    assert digest("sglang-rolling-2") == before["sglang-rolling-2"], "not restored byte for byte"
    assert healthy("sglang-rolling-2")
    assert digest("sglang-rolling-3") == before["sglang-rolling-3"]
    assert invocation("sglang-rolling-3") == third, "the third server was restarted"
    assert not [e for e in load.router_events() if "sglang-rolling-3" in e["url"]], "the third server was drained"
    assert summary["failed"] == 0, summary
    assert summary["min_healthy"] >= 2, summary


def test_rollback_playbook_undoes_the_last_rollout_on_one_server(host: Any) -> None:
    rc, out, _seconds = run_playbook("playbooks/rollback.yml", "-l", "sglang-rolling-1")
    assert rc == 0, why(out)
    unit = on("sglang-rolling-1").file(UNIT_PATH).content_string
    assert "--hicache-ratio 3.0" in unit and "--hicache-ratio 4.0" not in unit
    assert digest("sglang-rolling-1") == digest("sglang-rolling-3"), "not the previous configuration byte for byte"
    assert listed(host) == [(f"http://{name}:30000", True) for name in WORKERS]


@pytest.mark.parametrize("name", WORKERS)
def test_every_server_serves_at_the_end(name: str) -> None:
    assert healthy(name)


# --- rolling reboots (playbooks/reboot.yml) --------------------------------------------------------

def test_pending_reboots_roll_through_the_drain_path_under_load(host: Any, tmp_path: Path) -> None:
    """Two hosts with a pending reboot (what a kernel update leaves: /run/reboot-required) reboot one at a
    time under load. Each is drained and stopped, its container halted and started again (systemd really
    boots), its server comes back at boot by itself (enabled) and is re-added only once it serves. The third
    host is not touched, and no request fails."""
    rebooting, untouched = WORKERS[:2], WORKERS[2]
    for name in rebooting:
        on(name).check_output("touch /run/reboot-required")
    boots = {name: boot_id(name) for name in WORKERS}
    third = invocation(untouched)
    since = time.time()
    load = Load(tmp_path)
    rc, out, seconds = run_playbook("playbooks/reboot.yml")
    summary = load.finish()
    rows = timeline(load, since)
    print_timeline(rows, since)
    print(f"MEASURED rolling reboot of 2 of 3 servers under load: {seconds:.1f} s wall")
    assert rc == 0, why(out)
    assert "REBOOT PLAN: 2 servers reboot in 2 batches" in out and f"not drained: {untouched}" in out, why(out)
    assert summary["failed"] == 0 and summary["sent"] > 100, summary
    assert summary["min_healthy"] >= 2, summary
    for name in rebooting:
        assert boot_id(name) != boots[name], f"{name} did not boot again"
        assert not on(name).file("/run/reboot-required").exists
        assert healthy(name)
    assert boot_id(untouched) == boots[untouched] and invocation(untouched) == third
    assert not [e for e in load.router_events() if untouched in e["url"]], "the third server was drained"
    # One host at a time: out of the router, booted, its server started at boot and ready, back in.
    assert_one_at_a_time(rows, rebooting)

    # Nothing pending any more: nothing reboots, nothing changes.
    booted = {name: boot_id(name) for name in WORKERS}
    rc, out, _seconds = run_playbook("playbooks/reboot.yml")
    assert rc == 0 and "REBOOT PLAN: no server reboots" in out, why(out)
    assert all(recap(out, name)["changed"] == 0 for name in WORKERS), why(out)
    assert {name: boot_id(name) for name in WORKERS} == booted


# --- driver changes through the drain path (deploy.yml) ----------------------------------------------
# The scenario's hosts hold driver 580.95.05 from the local apt repository (molecule/resources/apt). The
# fake nvidia-smi reports the driver the last boot loaded (sglang-sim-nvidia-module.service), so a new
# driver runs only once the container has booted again, as on a host.
OLD_DRIVER, NEW_DRIVER = "580.95.05", "580.105.08"
MODULE_DRILL = "/etc/sglang-sim/drill-module-fails-to-load"
# The setting the earlier tests left the fleet running (deploy.yml alone would roll back to the inventory's).
AS_DEPLOYED = ("-e", "hicache_ratio=3.0")


def drivers(name: str) -> tuple[str, str]:
    """(the installed nvidia-kernel-open-dkms version, the driver nvidia-smi reports or 'none')."""
    installed = on(name).check_output("dpkg-query -W -f '${Version}' nvidia-kernel-open-dkms")
    running = on(name).run("nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0")
    return installed.rsplit("-", 1)[0], running.stdout.strip() if running.rc == 0 else "none"


def journal_of(name: str, unit: str, since: float) -> list[tuple[float, str]]:
    out = on(name).check_output(f"journalctl -u {unit} -o json --no-pager --since=@{int(since)}")
    return [(int(entry["__REALTIME_TIMESTAMP"]) / 1e6, str(entry.get("MESSAGE", "")))
            for entry in map(json.loads, out.splitlines())]


def maintenance_timeline(load: Load, since: float) -> list[tuple[float, str, str]]:
    """The roll's events per host: router removal and re-adding, the server's stop and start, dpkg's change
    of the driver, the boot's loading of it, and the server's readiness."""
    rows = [row for row in timeline(load, since) if row[2] != "router: healthy"]
    for name in WORKERS:
        rows += [(t, name, "systemd: stopped") for t, message in journal_of(name, UNIT, since)
                 if message.startswith(f"Stopped {UNIT}")]
        rows += [(t, name, f"boot: {message}") for t, message in journal_of(name, "sglang-sim-nvidia-module", since)
                 if message.startswith("nvidia: ")]
        for line in on(name).file("/var/log/dpkg.log").content_string.splitlines():
            fields = line.split()
            if fields[2:4] == ["status", "installed"] and fields[4].startswith("nvidia-kernel-open-dkms"):
                stamp = time.mktime(time.strptime(f"{fields[0]} {fields[1]}", "%Y-%m-%d %H:%M:%S")) - time.timezone
                if stamp >= int(since):
                    rows.append((stamp, name, f"dpkg: nvidia-kernel-open-dkms {fields[5]} installed"))
    return sorted(rows)


def assert_maintained_one_at_a_time(rows: list[tuple[float, str, str]], names: list[str], driver: str) -> None:
    """Each of names, in order: out of the router, stopped, upgraded, booted with the new driver, started at
    boot, ready and back in the router, before the next host leaves the router."""
    steps = [(name, what) for _time, name, what in rows]
    expected = [(name, what) for name in names for what in (
        "router: removed", "systemd: stopped", f"dpkg: nvidia-kernel-open-dkms {driver}-1 installed",
        f"boot: nvidia: module {driver} loaded", "systemd: started (restart)", "server: fired up (ready)",
        "router: added")]
    assert steps == expected, steps


def test_a_driver_bump_rolls_host_by_host_through_the_drain_path_under_load(host: Any, tmp_path: Path) -> None:
    """deploy.yml with a new pinned driver: each host in turn leaves the router, is drained, its server
    stopped, the driver upgraded, the host rebooted (its container restarted: systemd boots again), the new
    driver checked, the server started at boot and ready, and it goes back into the router. No request fails."""
    boots = {name: boot_id(name) for name in WORKERS}
    assert {name: drivers(name) for name in WORKERS} == dict.fromkeys(WORKERS, (OLD_DRIVER, OLD_DRIVER))
    since = time.time()
    load = Load(tmp_path)
    rc, out, seconds = run_playbook("deploy.yml", *AS_DEPLOYED, "-e", f"nvidia_driver_version={NEW_DRIVER}")
    summary = load.finish()
    rows = maintenance_timeline(load, since)
    print_timeline(rows, since)
    print(f"MEASURED rolling driver bump {OLD_DRIVER} -> {NEW_DRIVER} of 3 servers under load: {seconds:.1f} s wall")
    assert rc == 0, why(out)
    plan = re.search(r"ROLLOUT PLAN: [^\"]*", out)
    assert plan, why(out)
    print(f"PLAN {plan.group(0)}")
    assert "3 servers restart in 3 batches" in plan.group(0)
    for name in WORKERS:
        assert f"{name} (driver {OLD_DRIVER} -> {NEW_DRIVER}; REBOOTS)" in plan.group(0)
        assert drivers(name) == (NEW_DRIVER, NEW_DRIVER)
        assert boot_id(name) != boots[name], f"{name} did not boot again"
        assert healthy(name)
    assert summary["failed"] == 0 and summary["sent"] > 100, summary
    assert summary["min_healthy"] >= 2, summary
    assert_maintained_one_at_a_time(rows, WORKERS, NEW_DRIVER)
    assert listed(host) == [(f"http://{name}:30000", True) for name in WORKERS]

    # Nothing left to change: nothing reboots, nothing restarts, nothing changes.
    booted = {name: (boot_id(name), invocation(name)) for name in WORKERS}
    rc, out, _seconds = run_playbook("deploy.yml", *AS_DEPLOYED, "-e", f"nvidia_driver_version={NEW_DRIVER}")
    assert rc == 0 and "ROLLOUT PLAN: no server restarts" in out, why(out)
    assert all(recap(out, name)["changed"] == 0 for name in WORKERS), why(out)
    assert {name: (boot_id(name), invocation(name)) for name in WORKERS} == booted


def test_a_driver_that_fails_after_the_reboot_stops_the_rollout_there(host: Any, tmp_path: Path) -> None:
    """Back to the driver held before (a driver rollback, rolled like a forward change), while the second
    host's module will not load at its boot: the first host serves the old driver again, the second stops the
    rollout out of the router, the third is untouched; no request fails. Once the module loads again, a
    rerun reboots the second host, puts it back and rolls the third."""
    on("sglang-rolling-2").check_output(f"touch {MODULE_DRILL}")
    third = (boot_id("sglang-rolling-3"), invocation("sglang-rolling-3"))
    since = time.time()
    load = Load(tmp_path)
    try:
        rc, out, seconds = run_playbook("deploy.yml", *AS_DEPLOYED)  # the inventory's driver, 580.95.05
    finally:
        summary = load.finish()
        on("sglang-rolling-2").check_output(f"rm -f {MODULE_DRILL}")
    rows = maintenance_timeline(load, since)
    print_timeline(rows, since)
    print(f"MEASURED driver failure drill: play failed after {seconds:.1f} s")
    assert rc != 0
    stopped = re.search(r"ROLLOUT STOPPED at sglang-rolling-2 during its maintenance.*?shows the host\.", out, re.S)
    assert stopped, why(out)
    print(f"STOPPED {stopped.group(0)}")
    assert "no NVIDIA driver is running" in stopped.group(0)
    assert drivers("sglang-rolling-1") == (OLD_DRIVER, OLD_DRIVER) and healthy("sglang-rolling-1")
    assert drivers("sglang-rolling-2") == (OLD_DRIVER, "none")
    assert (boot_id("sglang-rolling-3"), invocation("sglang-rolling-3")) == third
    assert drivers("sglang-rolling-3") == (NEW_DRIVER, NEW_DRIVER)
    assert not [e for e in load.router_events() if "sglang-rolling-3" in e["url"]], "the third server was drained"
    assert [url for url, _healthy in listed(host)] == ["http://sglang-rolling-1:30000",
                                                       "http://sglang-rolling-3:30000"]
    assert summary["failed"] == 0, summary

    # While its driver does not run, the host cannot be planned: deploy.yml refuses, naming why, after printing the
    # whole rollout plan with the host refused in it (the deploy plan's refusals) and the third host's batch.
    rc, out, _seconds = run_playbook("deploy.yml", *AS_DEPLOYED)
    assert rc != 0 and "sglang-rolling-2: the SGLang configuration is refused, nothing was changed" in out
    assert "nvidia-smi did not answer" in out, why(out)
    plan = re.search(r"REFUSED, so nothing changes on any host: sglang-rolling-2 \(.*?Had they not been: ROLLOUT "
                     r"PLAN: [^\"]*", out)
    assert plan and "nvidia-smi did not answer" in plan.group(0) and "sglang-rolling-3" in plan.group(0), why(out)

    # Mended (the module loads again): rebooted through the drain path, the second host serves the old driver
    # and is back in the router; then deploy.yml checks its driver and rolls the third back.
    since = time.time()
    load = Load(tmp_path / "rerun")
    rc, out, seconds = run_playbook("playbooks/reboot.yml", "-l", "sglang-rolling-2",
                                    "-e", "sglang_maintenance_reboot_force=true")
    assert rc == 0, why(out)
    assert drivers("sglang-rolling-2") == (OLD_DRIVER, OLD_DRIVER)
    assert [url for url, _healthy in listed(host)] == [f"http://{name}:30000" for name in WORKERS]
    rc, out, more = run_playbook("deploy.yml", *AS_DEPLOYED)
    summary = load.finish()
    print_timeline(maintenance_timeline(load, since), since)
    print(f"MEASURED recovery after the drill: reboot {seconds:.1f} s, then the rollout {more:.1f} s")
    assert rc == 0, why(out)
    assert f"batch 1: sglang-rolling-3 (driver {NEW_DRIVER} -> {OLD_DRIVER}; REBOOTS)" in out, why(out)
    assert {name: drivers(name) for name in WORKERS} == dict.fromkeys(WORKERS, (OLD_DRIVER, OLD_DRIVER))
    assert listed(host) == [(f"http://{name}:30000", True) for name in WORKERS]
    assert summary["failed"] == 0 and summary["min_healthy"] >= 2, summary


def test_a_pending_kernel_reboot_rolls_with_deploy_only_when_allowed(host: Any, tmp_path: Path) -> None:
    """A kernel update left a pending reboot on the third host: deploy.yml names it and leaves it alone; with
    sglang_service_reboot_pending it reboots that host in its batch, drained, under load."""
    name, kernel = "sglang-rolling-3", "linux-image-6.1.0-41-amd64"
    on(name).check_output(f"echo '*** System restart required ***' > /run/reboot-required && "
                          f"echo {kernel} > /run/reboot-required.pkgs")
    rc, out, _seconds = run_playbook("deploy.yml", *AS_DEPLOYED)
    assert rc == 0 and f"{name} (reboot pending ({kernel}): left for playbooks/reboot.yml)" in out, why(out)
    assert all(recap(out, worker)["changed"] == 0 for worker in WORKERS), why(out)
    boots = {worker: boot_id(worker) for worker in WORKERS}
    since = time.time()
    load = Load(tmp_path)
    rc, out, seconds = run_playbook("deploy.yml", *AS_DEPLOYED, "-e", "sglang_service_reboot_pending=true")
    summary = load.finish()
    rows = timeline(load, since)
    print_timeline(rows, since)
    print(f"MEASURED pending kernel reboot of one server through deploy.yml under load: {seconds:.1f} s wall")
    assert rc == 0, why(out)
    assert f"batch 1: {name} (reboot pending ({kernel}); REBOOTS)" in out, why(out)
    assert boot_id(name) != boots[name] and not on(name).file("/run/reboot-required").exists
    assert [boot_id(worker) for worker in WORKERS[:2]] == [boots[worker] for worker in WORKERS[:2]]
    assert_one_at_a_time(rows, [name])
    assert summary["failed"] == 0 and summary["min_healthy"] >= 2, summary


# --- the router restarted in the middle of a roll ---------------------------------------------------

def roll_steps(rows: list[tuple[float, str, str]]) -> list[tuple[str, str]]:
    """Each server's restart, readiness, and its first addition to the router after it was ready: the roll's
    own steps. (An addition of a server that was not restarted since it was last added is a restarted
    router's launcher registering it again.)"""
    steps, ready = [], set()
    for _t, name, what in rows:
        if what in ("systemd: started (restart)", "server: fired up (ready)"):
            steps.append((name, what))
            if what == "server: fired up (ready)":
                ready.add(name)
            else:
                ready.discard(name)
        elif what == "router: added" and name in ready:
            steps.append((name, what))
            ready.discard(name)
    return steps


def test_a_router_restarted_in_the_middle_of_a_roll_is_waited_for_and_the_roll_goes_on(
        host: Any, tmp_path: Path) -> None:
    """The router restarts once the second server has left it (molecule/rolling/hooks/router_restart_drill.yml).
    The roll waits for the router, the router's launcher registers the servers the roll left in (not the
    second, out for its restart), the roll puts the second back and goes on to the third. Requests fail only
    while the router process is down: each failure is a refused or dropped connection, none an error status."""
    since = time.time()
    load = Load(tmp_path)
    rc, out, seconds = deploy("-e", "hicache_ratio=2.5", "-e", "drill_router_restart_host=sglang-rolling-2")
    summary = load.finish()
    rows = timeline(load, since)
    print_timeline(rows, since)
    journal = journal_of("sglang-rolling-router", "sglang-router", since)
    restarted = [t for t, message in journal if message.startswith("Started sglang-router")]
    print(f"MEASURED router restart drill: roll of 3 servers {seconds:.1f} s; the router restarted at "
          f"+{restarted[0] - since:.1f} s" if restarted else "MEASURED router restart drill: no restart seen")
    failed = load.failures
    print(f"MEASURED requests failed while the router was down: {summary['failed']} of {summary['sent']} "
          f"({failed or 'none'})")
    assert rc == 0, why(out)
    assert len(restarted) == 1, journal
    # The launcher registered, after the restart, only the servers the roll had left in the router.
    registered = [message for t, message in journal if t >= restarted[0] and "registered http" in message]
    registered_at = [t for t, message in journal if t >= restarted[0] and "registered http" in message]
    assert registered and not [m for m in registered if "sglang-rolling-2" in m], registered
    for name in WORKERS:
        assert "--hicache-ratio 2.5" in on(name).file(UNIT_PATH).content_string
    assert listed(host) == [(f"http://{name}:30000", True) for name in WORKERS]
    workers_file = on("sglang-rolling-router").file("/etc/sglang-router/workers.json").content_string
    assert workers_file.count("http://sglang-rolling-") == 3, "the launcher's file lacks a server at the end"
    # Failures: none caused by the roll. Every failed request failed while the router restarted: from its
    # stop until its launcher had registered the servers again (a refused or dropped connection, or the
    # restarted router's answer before it had any server).
    # (A second of slack either side: the journal's and the load generator's clocks are the same host's, but
    # a failure is timed when the client sees it.)
    if summary["failed"]:
        stopping = [t for t, message in journal if message.startswith("Stopping sglang-router")]
        assert stopping and stopping[0] - 1 <= failed["first"] and failed["last"] <= registered_at[-1] + 1, (
            failed, stopping, registered_at)
        assert failed.get("other", 0) == 0, failed
    # The roll itself went on one server at a time: each restarted, ready and back in the router before the
    # next restarted. (The router's list, as the load generator polled it, is read around the restart: the
    # second server's removal, which set the restart off, shows together with the router's empty list, and
    # the launcher's registering of the others as their additions: roll_steps keeps the roll's own.)
    assert roll_steps(rows) == [(name, what) for name in WORKERS for what in (
        "systemd: started (restart)", "server: fired up (ready)", "router: added")], roll_steps(rows)


# --- a host unreachable in the middle of its turn ------------------------------------------------------

def test_a_host_unreachable_in_its_turn_stops_the_rollout_with_it_out_of_the_router(
        host: Any, tmp_path: Path) -> None:
    """The second server's container is paused once it has left the router and drained (molecule/rolling/
    hooks/pause_drill.yml): Ansible cannot reach it, the rollout stops there and says so, the third server is
    not touched, and the second stays out of the router. Once it answers again, a rerun rolls it and the third
    and puts it back. No request fails."""
    second = "sglang-rolling-2"
    third = invocation("sglang-rolling-3")
    since = time.time()
    load = Load(tmp_path)
    try:
        rc, out, seconds = deploy("-e", "hicache_ratio=3.5", "-e", f"drill_pause_host={second}")
    finally:
        paused = subprocess.run(["docker", "inspect", "-f", "{{.State.Paused}}", second], capture_output=True,
                                text=True, check=True).stdout.strip() == "true"
        subprocess.run(["docker", "unpause", second], capture_output=True, check=False)
    print(f"MEASURED pause drill: the rollout stopped after {seconds:.1f} s")
    assert paused, "the drill did not pause the host"
    assert rc != 0
    stopped = re.search(rf"ROLLOUT STOPPED at {second}: it became unreachable during its turn"
                        r".*?run the playbook again\.", out, re.S)
    assert stopped and "It had left the routers and stays out of them" in stopped.group(0), why(out)
    print(f"STOPPED {stopped.group(0)}")
    assert "--hicache-ratio 3.5" in on("sglang-rolling-1").file(UNIT_PATH).content_string
    assert invocation("sglang-rolling-3") == third, "the third server was restarted"
    assert [url for url, _healthy in listed(host)] == ["http://sglang-rolling-1:30000",
                                                       "http://sglang-rolling-3:30000"]

    # It answers again: the rerun rolls it and the third, and puts it back.
    rc, out, more = deploy("-e", "hicache_ratio=3.5")
    summary = load.finish()
    rows = timeline(load, since)
    print_timeline(rows, since)
    print(f"MEASURED rerun after the pause drill: {more:.1f} s")
    assert rc == 0, why(out)
    assert listed(host) == [(f"http://{name}:30000", True) for name in WORKERS]
    assert summary["failed"] == 0 and summary["min_healthy"] >= 2, summary
    # It stayed out of the router until its turn: the rerun's router play did not put it back before its
    # restart (sglang_router_defer_workers), so after the drill took it out, it was restarted, ready and only
    # then added.
    steps = [what for _t, name, what in rows if name == second and what not in ("router: healthy", "router: unhealthy")]
    after_removal = steps[steps.index("router: removed") + 1:]
    assert after_removal == ["systemd: started (restart)", "server: fired up (ready)", "router: added"], steps
