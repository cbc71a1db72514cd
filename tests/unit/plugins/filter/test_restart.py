"""The restart filters: what a host's rolling batch does (its drifted files, a driver change, a pending reboot),
and a running server not started from the files on disk."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.filter import restart
from hypothesis import given
from hypothesis import strategies as st

# nvidia_driver's plan of a host serving 580.95.05 (roles/nvidia_driver/tasks/preflight_host.yml).
DRIVER = {"pin": "580.105.08", "packages": ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"],
          "installed": {"nvidia-driver-cuda": "580.95.05-1", "nvidia-kernel-open-dkms": "580.95.05-1"},
          "running": "580.95.05", "reboot_policy": "auto"}


AT_PIN = dict(DRIVER, installed={"nvidia-driver-cuda": "580.105.08-1", "nvidia-kernel-open-dkms": "580.105.08-1"},
              running="580.105.08")


def plan(*args: Any) -> dict[str, Any]:
    result = restart.restart_plan(*args)
    assert result.pop("files") == list(args[0] or [])
    assert result.pop("stale") == []  # nothing runs in these cases, or nothing says it is older than its files
    assert result.pop("rejoin") is False
    assert result.pop("live") is None  # no live change given
    return result


def test_a_serving_host_takes_its_driver_change_in_its_batch_and_reboots() -> None:
    assert plan([], "active", DRIVER) == {
        "restart": True, "driver": True, "reboot": True, "why": ["driver 580.95.05 -> 580.105.08", "REBOOTS"]}
    # Installed at the pin but an older module still runs (an earlier run could not reboot): a reboot only.
    assert plan([], "active", dict(AT_PIN, running="580.95.05")) == {
        "restart": True, "driver": True, "reboot": True, "why": ["driver 580.105.08 installed, 580.95.05 running",
                                                                 "REBOOTS"]}
    # No driver runs at all (its module failed to load at the last boot): a reboot too.
    assert plan([], "active", dict(AT_PIN, running=None))["why"] == ["driver 580.105.08 installed, none running",
                                                                     "REBOOTS"]
    # A package left behind at another version is a change too.
    mixed = dict(AT_PIN, installed={"nvidia-driver-cuda": "580.105.08-1", "nvidia-kernel-open-dkms": "580.95.05-1"})
    assert plan([], "active", mixed)["why"][0] == "driver 580.105.08/580.95.05 -> 580.105.08"


def test_a_driver_change_is_made_in_place_when_nothing_serves_or_the_policy_never_reboots() -> None:
    assert plan([], "inactive", DRIVER) == {
        "restart": True, "driver": False, "reboot": False,
        "why": ["inactive: will be started", "driver 580.95.05 -> 580.105.08, in place (not serving)"]}
    assert plan([], "active", dict(DRIVER, reboot_policy="never")) == {
        "restart": False, "driver": False, "reboot": False,
        "why": ["driver 580.95.05 -> 580.105.08, in place (nvidia_driver_reboot_policy never)"]}
    container = dict(DRIVER, container=True)
    assert plan([], "active", container)["why"] == [
        "driver 580.95.05 -> 580.105.08, in place (a container that cannot reboot)"]
    assert plan([], "active", container, None, False, True)["reboot"] is True  # sglang_maintenance_reboot_command
    # No driver installed yet (a first install), or no plan (the driver phase left out by --tags): nothing.
    assert plan([], "active", dict(DRIVER, installed={})) == {
        "restart": False, "driver": False, "reboot": False, "why": []}
    assert plan([], "active", None) == plan([], "active", {})


def test_new_files_restart_and_a_pending_reboot_waits_unless_allowed() -> None:
    files = ["/etc/systemd/system/sglang-kimi.service", "/etc/sglang/kimi.env"]
    assert plan(files, "active", AT_PIN) == {
        "restart": True, "driver": False, "reboot": False, "why": ["new sglang-kimi.service, kimi.env"]}
    pending = {"required": True, "packages": ["linux-image-6.1.0-41-amd64"]}
    assert plan([], "active", AT_PIN, pending) == {
        "restart": False, "driver": False, "reboot": False,
        "why": ["reboot pending (linux-image-6.1.0-41-amd64): left for playbooks/reboot.yml"]}
    assert plan([], "active", AT_PIN, pending, True) == {
        "restart": True, "driver": False, "reboot": True,
        "why": ["reboot pending (linux-image-6.1.0-41-amd64)", "REBOOTS"]}
    assert plan([], "failed", AT_PIN, {"required": True}, True) == {
        "restart": True, "driver": False, "reboot": False,
        "why": ["failed: will be started", "reboot pending (/run/reboot-required)"]}


@given(state=st.sampled_from(["active", "activating", "inactive", "failed", ""]),
       installed=st.sampled_from(["580.95.05-1", "580.105.08-1", None]),
       running=st.sampled_from([None, "580.95.05", "580.105.08"]),
       policy=st.sampled_from(["auto", "always", "never"]),
       container=st.booleans(), pending=st.booleans(), allowed=st.booleans(), reboots_container=st.booleans())
def test_a_driver_change_in_the_batch_always_reboots_it(state: str, installed: str | None, running: str | None,
                                                        policy: str, container: bool, pending: bool, allowed: bool,
                                                        reboots_container: bool) -> None:
    """roles/sglang_rollout/tasks/rolling.yml takes the maintenance path on `reboot` alone: `driver` implies it."""
    driver = dict(DRIVER, installed=dict.fromkeys(DRIVER["packages"], installed) if installed else {},
                  running=running, reboot_policy=policy, container=container)
    result = restart.restart_plan([], state, driver, {"required": pending}, allowed, reboots_container)
    assert not result["driver"] or (result["reboot"] and result["restart"])


# --- a running server not started from the files on disk ----------------------------------------------------
UNIT = ("[Unit]\nDescription=SGLang server kimi\n\n[Service]\nType=simple\n"
        "ExecStart=/opt/sglang/0.5.23/venv/bin/python -m sglang.launch_server \\\n"
        "    --model-path /models/kimi-k2.5 \\\n    --hicache-ratio 3.0 \\\n    --served-model-name \"kimi k2.5\"\n"
        "KillMode=mixed\n")


ARGV = ["/opt/sglang/0.5.23/venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/models/kimi-k2.5",
        "--hicache-ratio", "3.0", "--served-model-name", "kimi k2.5"]


RUNNING = {"pid": 4242, "argv": ARGV, "started": 1796425664.0, "need_daemon_reload": False, "changed_after_start": []}


def test_a_server_running_what_its_unit_says_is_left_alone() -> None:
    assert restart.stale_process(RUNNING, UNIT) == []
    assert restart.restart_plan([], "active", None, None, False, False, RUNNING, UNIT)["restart"] is False


@pytest.mark.parametrize(("running", "why"), [
    (dict(RUNNING, argv=[*ARGV[:6], "2.0", *ARGV[7:]]),
     "the running server (PID 4242) was started with `--hicache-ratio 2.0`, its unit says `--hicache-ratio 3.0`"),
    (dict(RUNNING, argv=ARGV[:7]),
     "the running server (PID 4242) was started with `nothing more`, its unit says `--served-model-name 'kimi k2.5'`"),
    (dict(RUNNING, need_daemon_reload=True),
     "systemd still runs an older version of its unit file (NeedDaemonReload=yes)"),
    (dict(RUNNING, changed_after_start=["/etc/sglang/kimi.env"]),
     "the running server (PID 4242) started before kimi.env changed"),
])
def test_a_server_started_from_older_files_restarts_and_says_why(running: dict[str, Any], why: str) -> None:
    """What a deploy that died between writing the files and restarting the server leaves behind: each kind of
    evidence alone is enough, and the files themselves are in sync (no drift)."""
    assert restart.stale_process(running, UNIT) == [why]
    result = restart.restart_plan([], "activating", None, None, False, False, running, UNIT)
    assert result["restart"] is True and result["stale"] == [why] and result["why"] == [why]


@pytest.mark.parametrize("running", [
    dict(RUNNING, argv=None),                                    # /proc/<pid>/cmdline unreadable
    dict(RUNNING, argv=["sglang::main"]),                        # a process that rewrote its title
    dict(RUNNING, pid=0), None,                                  # nothing runs
])
def test_an_argv_that_is_no_launch_of_the_server_is_no_evidence(running: dict[str, Any] | None) -> None:
    assert restart.stale_process(running, UNIT) == []


def test_a_unit_systemd_would_fill_in_is_not_compared_by_argv() -> None:
    """A site template with a specifier or a variable in ExecStart: its argv is known only to systemd."""
    for text in (UNIT.replace("/models/kimi-k2.5", "/models/%i"), UNIT.replace("3.0", "${RATIO}")):
        assert restart.stale_process(dict(RUNNING, argv=["x", "sglang.launch_server"]), text) == []


def test_new_files_or_a_stopped_unit_need_no_other_evidence() -> None:
    older = dict(RUNNING, need_daemon_reload=True)
    files = ["/etc/systemd/system/sglang-kimi.service"]
    assert restart.restart_plan(files, "active", None, None, False, False, older, UNIT)["stale"] == []
    assert restart.restart_plan([], "inactive", None, None, False, False, older, UNIT)["stale"] == []


def test_the_restart_decision_renders_once_and_reads_the_host_once() -> None:
    files = [{"dest": "/etc/systemd/system/sglang-kimi.service", "template": "sglang.service.j2"},
             {"dest": "/etc/sglang/kimi.env", "template": "sglang.env.j2"}]
    env = 'CUDA_DEVICE_ORDER="PCI_BUS_ID"\n'
    deployed = {"files": {files[0]["dest"]: hashlib.sha1(UNIT.encode()).hexdigest(),
                          files[1]["dest"]: hashlib.sha1(env.encode()).hexdigest()},
                "unit": {"ActiveState": "active"}, "running": dict(RUNNING, argv=[*ARGV[:6], "2.0", *ARGV[7:]]),
                "reboot": {"required": False}}
    decided = restart.restart_decision([UNIT, env], files, deployed)
    assert decided["restart"] and decided["files"] == [] and "--hicache-ratio 2.0" in decided["stale"][0]
    in_sync = restart.restart_decision([UNIT, env], files, dict(deployed, running=RUNNING))
    assert in_sync["restart"] is False and in_sync["why"] == []
    changed = restart.restart_decision([UNIT, env + 'X="1"\n'], files, dict(deployed, running=RUNNING))
    assert changed["restart"] and changed["files"] == ["/etc/sglang/kimi.env"]


def test_a_server_an_earlier_run_left_loading_is_waited_for_first() -> None:
    """Killed after the restart and before ready: the server runs its files (nothing to restart) but has not
    opened its port; it is out of service, so the rollout waits for it (rejoin) before it drains another."""
    loading = dict(RUNNING, listening=False)
    result = restart.restart_plan([], "active", None, None, False, False, loading, UNIT)
    assert result["restart"] is False and result["rejoin"] is True
    assert result["why"][0].startswith("still loading, started by an earlier run (its port is not open yet)")
    for running in (dict(RUNNING, listening=True), dict(RUNNING, listening=None), None):  # serving, or not known
        assert restart.restart_plan([], "active", None, None, False, False, running, UNIT)["rejoin"] is False
    # A server that must restart anyway (new files, older process) is not a rejoin.
    assert restart.restart_plan(["/etc/sglang/kimi.env"], "active", None, None, False, False, loading, UNIT)["rejoin"] \
        is False
    older = dict(loading, need_daemon_reload=True)
    assert restart.restart_plan([], "active", None, None, False, False, older, UNIT)["rejoin"] is False
