"""Fault drills on the default scenario's server, after test_default.py's (pytest runs the files in name order).
Each drill ends with the server serving its last good configuration. A drill's fault is the simulator's
SGLANG_SIM_FAULT, added for one run to the host's own sglang_env."""

from __future__ import annotations

import base64
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import testinfra.utils.ansible_runner
import yaml
from drill import run_playbook, why

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("sglang_workers")
HOST = "sglang-molecule-default"
HOST_VARS = yaml.safe_load((Path(__file__).parents[1] / "host_vars" / f"{HOST}.yml").read_text())
UNIT = "sglang-kimi.service"
FILES = f"/etc/systemd/system/{UNIT} /etc/sglang/kimi.env"


def fault(spec: str) -> list[str]:
    """-e arguments that add the simulator fault SPEC to the host's environment for one run."""
    return ["-e", json.dumps({"sglang_env": dict(HOST_VARS["sglang_env"], SGLANG_SIM_FAULT=spec)})]


def show(host: Any, *props: str) -> dict[str, str]:
    out = host.check_output(f"systemctl show {UNIT} " + " ".join(f"--property={p}" for p in props))
    return dict(line.split("=", 1) for line in out.splitlines())


def serving(host: Any) -> bool:
    return host.run("curl -s -o /dev/null -w '%{http_code}' --max-time 30 "
                    "http://127.0.0.1:30000/health_generate").stdout == "200"


def test_hang_during_load_fails_at_its_phase_stall_bound_and_rolls_back(host: Any) -> None:
    """The weights stop at 50 %: the wait fails once the loading phase has been silent for its stall bound
    (30 s in the sandbox), not at the 120 s readiness budget."""
    before = host.check_output(f"sha256sum {FILES}")
    rc, out, seconds = run_playbook("deploy.yml", "--tags", "service", "-e", "hicache_ratio=3.0",
                                    *fault("hang_at=50"))
    failed_after = re.search(r"made no progress for (\d+) s .*? after (\d+) s", out)
    print(f"MEASURED hang drill: no progress detected after {failed_after.group(2) if failed_after else '?'} s of "
          f"the wait (stall bound 30 s, budget 120 s); the play, rollback included, failed after {seconds:.1f} s")
    assert rc != 0
    assert "was not ready within" not in out, why(out)
    assert re.search(r"made no progress for 3\d s while loading weights 4\d% \(\d+/64 shards\) \(stall bound "
                     r"sglang_service_stall_timeouts.loading_weights = 30 s\); last progress line: "
                     r"'Multi-thread loading shards:  4\d% Completed", out), why(out)
    assert f"ROLLOUT STOPPED at {HOST}" in out and "rolled back" in out
    assert host.check_output(f"sha256sum {FILES}") == before
    assert serving(host)


def test_crash_after_ready_is_restarted_by_systemd_and_counted(host: Any) -> None:
    before = show(host, "MainPID", "NRestarts")
    host.check_output(f"systemctl kill --kill-whom=main --signal=SIGKILL {UNIT}")  # the unit's main PID only
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (show(host, "NRestarts")["NRestarts"] == "1" and serving(host)):
        time.sleep(1)
    after = show(host, "MainPID", "NRestarts")
    assert after["NRestarts"] == str(int(before["NRestarts"]) + 1) and after["MainPID"] != before["MainPID"]
    assert serving(host)
    rc, out, _seconds = run_playbook("playbooks/status.yml", "-e", "status_json=/tmp/faults-status.json")
    assert rc == 0, why(out)
    rows = json.loads(Path("/tmp/faults-status.json").read_text())
    assert rows[0]["restarts"] == 1 and rows[0]["healthy"], rows
    # The pool the last start allocated (recorded by the readiness waiter at converge; a crash restart is not
    # waited for, so the record is the converge's), beside the plan's when the inventory can plan offline.
    row = rows[0]
    assert int(row["kv_tokens_observed"]) > 0, rows
    # The plan for what the repository renders now (0.85) is calibrated from the last recorded start (the ratio
    # change's; rollbacks are not recorded) and agrees with what the simulator allocated at 0.85 at converge, which
    # the real host's 116,171 tokens per rank were matched to.
    assert row["plan_calibrated"] and abs(int(row["kv_tokens_planned"]) - 116167) <= 0.01 * 116167, row
    assert row["load"]["total_s"] > 0 and row["load"]["phases_s"]["loading_weights"] > 0, row
    # The disk's rate: the record the deploy keeps (measured once: at most 1 GiB of a shard, O_DIRECT or fadvise).
    assert row["disk_read_gb_per_s"] is not None, row
    assert row["disk"]["method"] in ("O_DIRECT", "posix_fadvise DONTNEED") and 0 < row["disk"]["bytes"] <= 2**30, row
    # With the last load's weight time and the disk's rate, the advice knows which bound the load hit.
    advice = row["load_advice"]
    assert advice["bound"] != "unknown" or not row["load"].get("read_gb_per_s"), advice
    assert f"{HOST}: LOAD SPEED: " in out, why(out)
    print(f"MEASURED status KV pool planned {row['kv_tokens_planned']} (calibrated), seen {row['kv_tokens_observed']}"
          f"; last load {row['load']['total_s']} s, phases {row['load']['phases_s']}, disk {row['disk_read_gb_per_s']}"
          f" GB/s ({row['disk']['method']}); advice: {advice['text']}")
    print("MEASURED status after a crash:\n" + "\n".join(line for line in out.splitlines() if HOST in line
                                                         and "active" in line))


def write_file(host: Any, path: str, text: str) -> None:
    encoded = base64.b64encode(text.encode()).decode()
    host.check_output(f"mkdir -p {os.path.dirname(path)} && echo {encoded} | base64 -d > {path}")


def test_a_stale_gpu_process_refuses_the_start_and_nothing_is_killed(host: Any) -> None:
    config_path = "/etc/sglang-sim/nvidia-smi.json"
    original = host.file(config_path).content_string if host.file(config_path).exists else None
    stale = host.check_output("sh -c 'sleep 600 >/dev/null 2>&1 & echo $!'").strip()
    config = json.loads(original) if original else {}
    gpu0 = host.check_output("nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0").strip()
    config["compute_apps"] = [{"pid": int(stale), "gpu_uuid": gpu0, "used_memory_mib": 30000,
                               "process_name": "python3"}]
    write_file(host, config_path, json.dumps(config))
    try:
        before = host.check_output(f"sha256sum {FILES}"), show(host, "InvocationID")
        rc, out, _seconds = run_playbook("deploy.yml", "-e", "hicache_ratio=3.0")
        assert rc != 0
        assert f"holds a GPU: PID {stale}" in out and "nothing was changed" in out, why(out)
        assert (host.check_output(f"sha256sum {FILES}"), show(host, "InvocationID")) == before
        assert host.run(f"kill -0 {stale}").rc == 0, "the stale process was killed"
    finally:
        host.run(f"kill {stale}")  # the process this test started, by its PID
        if original is None:
            host.run(f"rm -f {config_path}")
        else:
            write_file(host, config_path, original)
    assert serving(host)


def test_a_slow_stop_of_the_old_server_does_not_count_against_the_new_ones_load(host: Any) -> None:
    """The running server takes 65 s to exit once drained (fault slow_exit=65: SGLang freeing a large pinned host
    pool), more than the whole 60 s readiness budget (its floor), and within the unit's TimeoutStopSec (120 s here).
    The new server loads in seconds. The budget counts from the new process's start, the stop allowed on top: the change
    lands instead of failing at 60 s and being rolled back (as it did before). Ends as the drill before left the
    server (ratio 2.3, the sandbox's budget, no fault), for the next drill."""
    budget = ["-e", "sglang_ready_timeout=60"]
    rc, out, _seconds = run_playbook("deploy.yml", "--tags", "service", "-e", "hicache_ratio=2.2", *budget,
                                     *fault("slow_exit=65"))
    assert rc == 0, why(out)
    old = show(host, "InvocationID")["InvocationID"]
    rc, out, seconds = run_playbook("deploy.yml", "--tags", "service", "-e", "hicache_ratio=2.4", *budget)
    assert rc == 0, why(out)
    ready, load = re.search(r"ready after ([\d.]+) s", out), re.search(r"; load ([\d.]+) s", out)
    allowed = re.search(r"readiness budget (\d+) s", out)
    assert ready and load and allowed, why(out)
    # The wait outlasted the budget (60 s, or twice the last load if that was longer) by the old server's stop,
    # and the load itself took less.
    assert float(ready[1]) > int(allowed[1]) > float(load[1]), why(out)
    assert show(host, "InvocationID")["InvocationID"] != old and serving(host)
    stopping = "waiting for the server it replaces to stop" in out
    print(f"MEASURED slow stop: ready after {ready[1]} s, load {load[1]} s, budget {allowed[1]} s, "
          f"deploy {seconds:.1f} s; "
          f"the stop shown as such while waiting: {stopping}")
    rc, out, _seconds = run_playbook("deploy.yml", "--tags", "service", "-e", "hicache_ratio=2.3")
    assert rc == 0, why(out)
    assert serving(host)


def test_a_deploy_starts_a_server_that_systemd_stopped_at_its_start_limit(host: Any) -> None:
    """systemd counts every start against StartLimitBurst=3 in StartLimitIntervalSec=3600, by hand or by
    Restart=, and refuses the one over it (tests/fixtures/systemd/start-limit.yml). Restarts by hand use the
    limit up until systemd refuses one and the server is down; the next deploy, with nothing to change,
    starts it. On this systemd (252) a daemon-reload would clear the count too, but the deploy does not
    reload a unit it did not change: only its reset-failed lets the start through, as on 255 and later,
    where a daemon-reload keeps the count."""
    for _attempt in range(5):  # three are allowed since the last deploy's daemon-reload, its own start included
        host.run(f"systemctl restart {UNIT}")
        if show(host, "Result")["Result"] == "start-limit-hit":
            break
    assert show(host, "ActiveState", "Result") == {"ActiveState": "failed", "Result": "start-limit-hit"}
    assert not serving(host)
    since = host.check_output("date '+%Y-%m-%d %H:%M:%S'")
    rc, out, _seconds = run_playbook("deploy.yml", "--tags", "service", "-e", "hicache_ratio=2.3")  # as it is
    assert rc == 0, why(out)
    assert f"{UNIT} is failed: it will be started" in out, why(out)
    reloads = host.check_output(f"journalctl _PID=1 --since '{since}' --no-pager -o cat | grep -c '^Reloading' || true")
    assert reloads == "0", f"the deploy ran daemon-reload {reloads} times: this drill would not show reset-failed"
    assert show(host, "ActiveState", "Result") == {"ActiveState": "active", "Result": "success"}
    assert serving(host)


# ---- the pre-restart probe: a change the new configuration cannot serve is refused before anything stops ---

def probe_drill(host: Any, setup: str, undo: str, expected: str, *extra: str) -> None:
    """Break the host with `setup`, ask for a change, expect the probe to refuse it with `expected` in its
    message while the server keeps serving the same invocation and no file changed; `undo` repairs.
    `extra` may narrow the run to the service phases (--tags service, which includes the probe)."""
    before = host.check_output(f"sha256sum {FILES}"), show(host, "InvocationID", "MainPID")
    host.check_output(setup)
    try:
        rc, out, seconds = run_playbook("deploy.yml", "-e", "hicache_ratio=2.5", *extra)  # a ratio never deployed
    finally:
        host.check_output(undo)
    refusal = re.search(rf"PROBE REFUSED the new configuration of sglang-kimi.service on {HOST}: "
                        r"([^\n\"]*)", out)
    probe_seconds = re.search(r"probe of sglang-kimi.service \(([\d.]+) s", out)
    print(f"MEASURED probe drill ({expected}): the probe took {probe_seconds.group(1) if probe_seconds else '?'} s; "
          f"the play refused after {seconds:.1f} s: {refusal.group(1)[:300] if refusal else '?'}")
    assert rc != 0 and refusal, why(out)
    assert expected in refusal.group(1), refusal.group(1)
    assert "Nothing was changed and nothing stopped" in out
    assert "router: removed" not in out and "Restart without blocking" not in out
    assert (host.check_output(f"sha256sum {FILES}"), show(host, "InvocationID", "MainPID")) == before
    assert serving(host)


def test_probe_refuses_a_device_policy_that_denies_the_gpus(host: Any) -> None:
    probe_drill(host, "true", "true", "cuda: denied by the unit's device policy (DevicePolicy=closed, DeviceAllow=): "
                "/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools, "
                + ", ".join(f"/dev/nvidia{rank}" for rank in range(8)),
                "-e", '{"sglang_service_device_allow_extra": []}')


def test_probe_refuses_a_host_without_python_h(host: Any) -> None:
    header = "/usr/include/python3.11/Python.h"
    probe_drill(host, f"mv {header} {header}.drill", f"mv {header}.drill {header}",
                "toolchain: /usr/include/python3.11/Python.h is missing", "--tags", "service")


def test_probe_refuses_a_host_without_nvcc(host: Any) -> None:
    nvcc = "/usr/local/cuda-13.0/bin/nvcc"
    probe_drill(host, f"mv {nvcc} {nvcc}.drill", f"mv {nvcc}.drill {nvcc}",
                "toolchain: /usr/local/cuda-13.0/bin/nvcc is missing", "--tags", "service")


def test_probe_refuses_a_host_where_sglangs_jit_cannot_link(host: Any) -> None:
    """The link name cuda-cudart-dev installs: without it SGLang's JIT kernels (built while the weights load) do not
    link; the probe's build of a tvm-ffi module, as SGLang's build.ninja makes it, shows it first."""
    link = "/usr/local/cuda-13.0/lib64/libcudart.so"
    probe_drill(host, f"mv {link} {link}.drill", f"mv {link}.drill {link}",
                "sglang-jit: compute capability 12.0: the link against tvm-ffi and cudart failed: /usr/bin/ld: cannot "
                "find -lcudart", "--tags", "service")


def test_probe_refuses_a_model_the_service_user_cannot_read(host: Any) -> None:
    probe_drill(host, "chmod 0700 /models/kimi-k2.5", "chmod 0755 /models/kimi-k2.5",
                "model: /models/kimi-k2.5/config.json: Permission denied (the service user sglang must be able",
                "--tags", "service")


def test_probe_refuses_an_interpreter_the_service_user_cannot_execute(host: Any) -> None:
    bin_dir = "/opt/sglang/0.5.23/venv/bin"
    probe_drill(host, f"chmod 0700 {bin_dir}", f"chmod 0755 {bin_dir}",
                f"Failed to execute {bin_dir}/python: Permission denied", "--tags", "service")


def test_a_failing_pre_restart_hook_leaves_the_server_untouched(host: Any, tmp_path: Path) -> None:
    """A hook that fails before the files are written stops the rollout at this host without a rollback:
    no file changed, the same invocation serves, nothing restarted (issue 11, class 7)."""
    hook = tmp_path / "failing-hook.yml"
    hook.write_text("---\n- name: A pre-restart hook that fails\n  ansible.builtin.fail:\n"
                    "    msg: the load balancer refused the drain\n")
    before = host.check_output(f"sha256sum {FILES}"), show(host, "InvocationID", "NRestarts")
    rc, out, _seconds = run_playbook("deploy.yml", "--tags", "service", "-e", "hicache_ratio=3.3",
                                     "-e", json.dumps({"sglang_rollout_pre_restart_hooks": [str(hook)]}))
    assert rc != 0
    assert f"ROLLOUT STOPPED at {HOST} before its files changed" in out, why(out)
    assert "the load balancer refused the drain" in out and "rolled back" not in out
    assert (host.check_output(f"sha256sum {FILES}"), show(host, "InvocationID", "NRestarts")) == before
    assert serving(host)
