"""Verify the default scenario: the converged host, then drills that drive deploy.yml again.

Tests run in file order: the static checks first, then the no-op deploy (the idempotence check), a
--check --diff run, a hicache change, refused inputs, a crash during load (rolled back to the good
configuration), and the calibration loop; test_faults.py's drills follow.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import ipfirewall
import pytest
import testinfra.utils.ansible_runner
from drill import recap, run_playbook, why

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("sglang_workers")

UNIT = "sglang-kimi.service"
CONTAINER = "sglang-molecule-default"  # the platform's name (.config/molecule/config.yml)
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
ENV_PATH = "/etc/sglang/kimi.env"
SERVED_NAME = "kimi k2.5 (molecule) 100% $HOME"
QUOTING_PROBE = 'x $HOME 100% "quoted" `tick` back\\slash'
API_KEY = "mol-SECRET-7f3a9c"
OBSERVED = "/var/lib/sglang-deploy/records/kimi.observed.json"  # root's records: only root writes there
SANDBOX_ENV = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "SGLANG_SIM_LOAD_SECONDS": 6, "SGLANG_SIM_MEM_AVAILABLE_GB": 440,
               "SGLANG_SIM_GPU_DEVICES": 1, "SGLANG_SIM_WEIGHT_GIB_PER_GPU": 71.71,
               "SGLANG_DEPLOY_QUOTING_PROBE": QUOTING_PROBE}


def deploy(*extra: str) -> tuple[int, str, float]:
    return run_playbook("deploy.yml", *extra)


def show(host: Any, *props: str) -> dict[str, str]:
    out = host.check_output(f"systemctl show {UNIT} " + " ".join(f"--property={p}" for p in props))
    return dict(line.split("=", 1) for line in out.splitlines())


def starts(host: Any) -> int:
    """How many times systemd has started the unit (journal lines, one per start)."""
    out = host.run(f"journalctl -u {UNIT} --no-pager -o cat | grep -c '^Started {UNIT}' || true").stdout
    return int(out.strip() or 0)


def healthy(host: Any) -> bool:
    code = host.run("curl -s -o /dev/null -w '%{http_code}' --max-time 30 http://127.0.0.1:30000/health_generate")
    return code.stdout.strip() == "200"


def files_digest(host: Any) -> str:
    return host.check_output(f"sha256sum {UNIT_PATH} {ENV_PATH}")


# --- the converged host -------------------------------------------------------------------

def test_unit_file(host: Any) -> None:
    unit = host.file(UNIT_PATH)
    assert unit.user == "root" and unit.mode == 0o644
    text = unit.content_string
    for line in ("User=sglang", "KillMode=mixed", "Restart=on-failure", "LimitMEMLOCK=infinity",
                 "LimitNOFILE=1048576", "StartLimitBurst=3", "TimeoutStartSec=120", "TimeoutStopSec=120",
                 "EnvironmentFile=/etc/sglang/kimi.env",
                 "ExecStart=/opt/sglang/0.5.23/venv/bin/python -m sglang.launch_server"):
        assert line in text, line
    for flag in ("--enable-hierarchical-cache", "--hicache-ratio 2.0", "--hicache-write-policy write_through",
                 "--hicache-io-backend kernel", "--speculative-algorithm EAGLE3", "--tp-size 8",
                 "--mem-fraction-static 0.85", "--enable-metrics", "--trust-remote-code"):
        assert flag in text, flag
    assert text.startswith("#") and "Ansible managed" in text


def test_systemd_accepts_the_unit(host: Any) -> None:
    result = host.run(f"systemd-analyze verify {UNIT_PATH}")
    assert result.rc == 0, result.stderr
    assert show(host, "LimitMEMLOCK")["LimitMEMLOCK"] == "infinity"
    score = host.check_output(f"systemd-analyze security --offline=true {UNIT_PATH} | tail -1")
    exposure = float(re.search(r"exposure level for \S+: ([\d.]+)", score).group(1))
    print(f"MEASURED systemd-analyze security exposure of the rendered unit: {exposure}")
    assert exposure <= 3.5, score


def test_only_loopback_reaches_the_server_through_its_ip_firewall(host: Any) -> None:
    """No router, no Prometheus group, no peer: the allow-list is loopback alone (sglang_service_ip_firewall). The
    Docker host, on no list, connects to a control listener of the same container (a transient unit without IP
    rules) but its SYNs to the server's port are dropped by systemd's BPF filter: the connection times out. The
    container's own requests to 127.0.0.1 pass; to its own network address they do not (not loopback)."""
    props = show(host, "IPAddressDeny", "IPAddressAllow")
    assert sorted(props["IPAddressDeny"].split()) == ["0.0.0.0/0", "::/0"], props
    assert sorted(props["IPAddressAllow"].split()) == ["127.0.0.0/8", "::1/128"], props
    assert ipfirewall.bpf_unsupported_lines(host) == ""
    address = ipfirewall.container_ip(CONTAINER)
    ipfirewall.start_control(host)
    try:
        control = ipfirewall.wait_connected(address, ipfirewall.CONTROL_PORT)
    finally:
        ipfirewall.stop_control(host)
    assert control == "connected", "the Docker host cannot reach the container at all: the drill proves nothing"
    started = time.monotonic()
    outcome = ipfirewall.connect(address, 30000)
    print(f"MEASURED IP firewall, Docker host -> {address}:30000 (not on the list): {outcome} after "
          f"{time.monotonic() - started:.1f} s; control port {ipfirewall.CONTROL_PORT}: {control}")
    assert outcome == "timeout"
    assert healthy(host)  # 127.0.0.1: loopback is on the list
    own = host.run(f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 http://{address}:30000/health").stdout
    assert own == "000", own


def test_environment_file(host: Any) -> None:
    env = host.file(ENV_PATH)
    assert (env.user, env.group, env.mode) == ("root", "sglang", 0o640)
    assert 'SGLANG_SIM_GPU_DEVICES="1"' in env.content_string
    # The JIT toolchain: nvcc through CUDA_HOME, ninja from the virtualenv's bin on PATH.
    assert 'CUDA_HOME="/usr/local/cuda-13.0"' in env.content_string
    assert 'PATH="/opt/sglang/0.5.23/venv/bin:/usr/local/cuda-13.0/bin:' in env.content_string


def test_the_gpus_are_reached_through_the_units_device_policy(host: Any) -> None:
    """The device-node unit ran before the server, which requires it; the server's ranks opened their GPU
    nodes through DevicePolicy=closed (the simulator dies like torch when a node is denied)."""
    assert host.check_output("systemctl is-active nvidia-device-nodes.service") == "active"
    props = show(host, "Requires", "After", "DevicePolicy")
    assert "nvidia-device-nodes.service" in props["Requires"].split()
    assert "nvidia-device-nodes.service" in props["After"].split() and props["DevicePolicy"] == "closed"
    assert host.check_output(f"journalctl -u {UNIT} --no-pager -o cat | grep -c 'CUDA cannot open' || true") == "0"
    for node in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia7", "/dev/nvidia-uvm"):
        assert host.check_output(f"stat -c '%F %a' {node}") == "character special file 666", node


def test_running_as_sglang_with_one_process_per_rank(host: Any) -> None:
    state = show(host, "ActiveState", "SubState", "MainPID", "NRestarts")
    assert (state["ActiveState"], state["SubState"], state["NRestarts"]) == ("active", "running", "0")
    main = host.process.get(pid=int(state["MainPID"]))
    assert main.user == "sglang"
    cgroup = host.check_output(f"systemctl show {UNIT} --property=ControlGroup --value")
    pids = host.check_output(f"cat /sys/fs/cgroup/systemd{cgroup}/cgroup.procs").split()
    names = sorted(host.file(f"/proc/{pid}/comm").content_string.strip() for pid in pids)
    assert names.count("sglang::schedul") == 8, names  # sglang::scheduler_TP0..7, comm is 15 chars


def test_quoting_reaches_the_process_byte_for_byte(host: Any) -> None:
    pid = show(host, "MainPID")["MainPID"]
    argv = host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/cmdline").splitlines()
    assert argv[argv.index("--served-model-name") + 1] == SERVED_NAME
    environ = host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/environ").splitlines()
    assert f"SGLANG_DEPLOY_QUOTING_PROBE={QUOTING_PROBE}" in environ


def test_health_is_a_real_generation(host: Any) -> None:
    assert healthy(host)
    body = host.check_output(
        "curl -s --max-time 30 http://127.0.0.1:30000/generate -H 'Content-Type: application/json' "
        f"-H 'Authorization: Bearer {API_KEY}' "
        "-d '{\"text\": \"Hello\", \"sampling_params\": {\"max_new_tokens\": 4}}'")
    assert json.loads(body)["meta_info"]["completion_tokens"] == 4


def test_the_api_key_is_enforced_and_kept_out_of_sight(host: Any) -> None:
    unauthenticated = host.run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models")
    assert unauthenticated.stdout == "401"
    assert API_KEY not in host.check_output(f"systemctl show {UNIT} --property=ExecStart")
    assert API_KEY not in host.file(UNIT_PATH).content_string
    cgroup = host.check_output(f"systemctl show {UNIT} --property=ControlGroup --value")
    for pid in host.check_output(f"cat /sys/fs/cgroup/systemd{cgroup}/cgroup.procs").split():
        assert API_KEY not in host.file(f"/proc/{pid}/cmdline").content_string
        assert API_KEY not in host.file(f"/proc/{pid}/environ").content_string
    secrets = host.file("/etc/sglang/kimi.secrets.yaml")
    assert (secrets.user, secrets.group, secrets.mode) == ("root", "sglang", 0o640)
    world_readable = host.run(f"find / -xdev -type f -perm -o+r -size -1M -exec grep -l -F -e {API_KEY} {{}} + "
                              "2>/dev/null")
    assert world_readable.stdout.strip() == "", world_readable.stdout
    # Ansible's own output, at -vvv, is checked by test_hicache_ratio_change_restarts_exactly_once: a
    # change runs every task that handles the key (probe, restart, readiness, smoke test, router).


def test_converge_started_the_server_once(host: Any) -> None:
    """What converge left running is what serves: one start. The no-op deploy below is the idempotence
    check, run as a user runs it (-e hicache_ratio=2.0, the inventory's own value)."""
    converged = host.file("/root/converged-invocation").content_string.strip()
    assert show(host, "InvocationID")["InvocationID"] == converged
    assert starts(host) == 1


# --- drills through the CLI ------------------------------------------------------------------

INSTALL_PLAY = "Install the NVIDIA driver, the SGLang stack and the model weights"


def play_has_no_hosts(output: str, play: str) -> bool:
    """Whether the play ran on no host ("skipping: no hosts matched" under its header)."""
    return re.search(rf"^PLAY \[{re.escape(play)}\][^\n]*\nskipping: no hosts matched$", output, re.M) is not None


def task_results(output: str, task: str) -> list[str]:
    """The result lines (ok:, changed:, skipping:, ...) of a task in the default callback's output."""
    block = re.search(rf"^TASK \[{re.escape(task)}\].*?(?=^TASK \[|^PLAY )", output, re.S | re.M)
    assert block, f"no task {task} in the output"
    return [line for line in block.group(0).splitlines()[1:] if re.match(r"^(ok|changed|skipping|fatal):", line)]


PLAN_TASK = "Say which servers restart, in which batch, and which are left alone"
# The no-op's tasks on the server's host (ok + skipped in the recap; docs/fast-noop.md): 34 until the entry points
# were validated (8 argument-spec checks), 42 until the disk's read rate was measured once per host (two tasks,
# skipped once the host has the record: sglang_config's assess measures, refuse_host keeps). A regression of the
# fast no-op layer shows here as a count, which does not depend on how busy the machine is (the driver's preflight
# run again: +9; a role's stamp not trusted: +30). 45 since the server's IP allow-list resolves its host names on the
# host in the restart decision (role sglang_service, ip_allow.yml: one task, skipped when the inventory gives only
# addresses, as here). 47 since the service user and group are read on the host before anything changes (deploy.yml,
# two getent tasks, skipped when the stack is as its role last left the host, as here).
NOOP_TASKS_AT_MOST = 47


def rollout_plan(output: str) -> str:
    """What the deploy printed as its rollout plan (the task's output without profile_tasks' timing lines)."""
    block = re.search(rf"^TASK \[{re.escape(PLAN_TASK)}\].*?(?=^TASK \[|^PLAY )", output, re.S | re.M)
    assert block, why(output)
    return "\n".join(line for line in block.group(0).splitlines()[1:]
                     if not re.match(r"^(\w+day \d+ \w+ \d{4} |\*+$)", line.strip()))


def test_noop_deploy_changes_and_restarts_nothing(host: Any) -> None:
    before = show(host, "InvocationID", "MainPID", "NRestarts")
    rc, out, seconds = deploy("-e", "hicache_ratio=2.0")
    assert rc == 0, why(out)
    counts = recap(out, "sglang-molecule-default")
    assert counts["changed"] == 0, why(out)
    after = show(host, "InvocationID", "MainPID", "NRestarts")
    assert after == before
    # The install roles found the host as they left it (their stamps): the install play had no host.
    assert play_has_no_hosts(out, INSTALL_PLAY), why(out)
    assert "runs on sglang-molecule-default" not in out
    assert counts["ok"] + counts["skipped"] <= NOOP_TASKS_AT_MOST, (counts, why(out))
    print(f"MEASURED no-op deploy wall time: {seconds:.1f} s, {counts}; "
          f"systemctl show before={before} after={after}")
    # The fast no-op layer off (docs/fast-noop.md): every role runs all its tasks, and decides the same - nothing
    # changes, nothing restarts, the same rollout plan. Then on again: the stamps the roles recorded hold.
    rc, slow, slow_seconds = deploy("-e", "hicache_ratio=2.0", "-e", "sglang_fast_noop=false")
    assert rc == 0, why(slow)
    slow_counts = recap(slow, "sglang-molecule-default")
    assert slow_counts["changed"] == 0, why(slow)
    assert show(host, "InvocationID", "MainPID", "NRestarts") == before
    assert rollout_plan(slow) == rollout_plan(out), why(slow)
    assert not play_has_no_hosts(slow, INSTALL_PLAY), why(slow)
    assert "nvidia_driver runs on sglang-molecule-default: the stamps are not trusted in this run" in slow, why(slow)
    rc, again, _seconds = deploy("-e", "hicache_ratio=2.0")
    assert rc == 0 and recap(again, "sglang-molecule-default")["changed"] == 0, why(again)
    assert play_has_no_hosts(again, INSTALL_PLAY) and rollout_plan(again) == rollout_plan(out), why(again)
    print(f"MEASURED no-op deploy, fast layer on: {seconds:.1f} s, {counts['ok'] + counts['skipped']} tasks on the "
          f"server's host; off (-e sglang_fast_noop=false): {slow_seconds:.1f} s, "
          f"{slow_counts['ok'] + slow_counts['skipped']} tasks")


def test_a_host_that_moved_since_the_last_deploy_is_put_back_and_says_why(host: Any) -> None:
    """The stamps skip a role only while nothing it manages moved: an edited pin and a released hold
    bring the driver role back, which restores both without touching the server."""
    pin = "/etc/apt/preferences.d/nvidia-driver.pref"
    original, running = host.file(pin).content_string, show(host, "InvocationID")
    host.check_output(f"echo '# edited by hand' >> {pin} && apt-mark unhold nvidia-modprobe")
    rc, out, _seconds = deploy("-e", "hicache_ratio=2.0")
    assert rc == 0, why(out)
    assert re.search(rf"nvidia_driver runs on sglang-molecule-default: the host moved since it last converged "
                     rf"here: path {pin}: file 0644 0:0 sha256:\w+ -> file 0644 0:0 sha256:\w+; "
                     r"package nvidia-modprobe: [^ ]+ hi -> [^ ]+ ii", out), why(out)
    assert task_results(out, "sglang_stack : Install the stack") == ["skipping: [sglang-molecule-default]"]
    assert host.file(pin).content_string == original
    assert "nvidia-modprobe" in host.check_output("apt-mark showhold").split()
    assert show(host, "InvocationID") == running
    rc, out, _seconds = deploy("-e", "hicache_ratio=2.0")
    assert rc == 0 and recap(out, "sglang-molecule-default")["changed"] == 0, why(out)
    assert play_has_no_hosts(out, INSTALL_PLAY), why(out)


def test_check_diff_shows_the_change_and_changes_nothing(host: Any) -> None:
    digest, before = files_digest(host), show(host, "InvocationID", "MainPID")
    rc, out, _seconds = deploy("--check", "--diff", "-e", "hicache_ratio=4.0")
    assert rc == 0, why(out)
    assert "-    --hicache-ratio 2.0 \\" in out and "+    --hicache-ratio 4.0 \\" in out, why(out)
    # The plan is calibrated from what the converged start measured (HiCache does not change it).
    assert "calibrated from the start of" in out and "on this host" in out, why(out)
    assert files_digest(host) == digest
    assert show(host, "InvocationID", "MainPID") == before


def test_hicache_ratio_change_restarts_exactly_once(host: Any) -> None:
    before, started_before = show(host, "InvocationID"), starts(host)
    rc, out, seconds = deploy("-vvv", "-e", "hicache_ratio=3.0")  # as verbose as Ansible gets:
    assert rc == 0, why(out)
    assert API_KEY not in out  # the API key never shows, not even in module arguments or results
    assert "--hicache-ratio 3.0" in host.file(UNIT_PATH).content_string
    assert show(host, "InvocationID") != before
    assert starts(host) == started_before + 1
    assert show(host, "NRestarts")["NRestarts"] == "0"
    assert healthy(host)
    # The waiter recorded what this start measured, for the next plan to calibrate from.
    record = json.loads(host.file(OBSERVED).content_string)
    assert record["invocation_id"] == show(host, "InvocationID")["InvocationID"]
    logged = re.findall(r"KV Cache is allocated\..*?#tokens: (\d+)", host.check_output(
        f"journalctl _SYSTEMD_INVOCATION_ID={record['invocation_id']} --no-pager -o cat"))
    assert record["startup"]["kv_tokens"] == int(logged[0]) and record["startup"]["ranks"] == 8
    assert host.file(OBSERVED).mode == 0o644
    # The waiter reads the invocation's whole journal, so it saw the weights load however late it started;
    # the callback showed at least one phase: the phases at each poll while it loaded, and how the wait ended
    # (the only line when the load ended before the first poll, as it can on a fast or a busy machine).
    assert "loading weights" in [phase["phase"] for phase in record["phases"]], record["phases"]
    progress = re.findall(r"\[sglang-molecule-default\] sglang-kimi.service: ([a-zA-Z ]+?)(?: \d+%.*?)?, \d+ s", out)
    assert progress, "no progress was shown while waiting:\n" + why(out)
    ready = re.search(r"ready after ([\d.]+) s.*?fired up\\\" log line came ([\d.]+) s before", out)
    assert ready, why(out)
    # The load's phases, and the budget from the last recorded load (converge's) of the same model.
    assert re.search(r"load [\d]+ s: .*weights [\d]+ s.*SGLang read the weights in", out), why(out)
    assert "readiness budget 120 s, configured, which covers the load of " in out, why(out)
    # The cost before the change (from the converge's load, recorded on this host) and the measured one after.
    expected = re.search(r"Expected downtime per batch \(its slowest host's last load, drain not counted\): "
                         r"batch 1: (\d+) s; the roll at least", out)
    measured = re.search(r"DOWNTIME sglang-molecule-default: out of service (\d+) s \(drain, restart, load, smoke "
                         r"test\); expected (\d+) s before the change \(the load of \S+ on this host", out)
    assert expected and measured and measured.group(2) == expected.group(1), why(out)
    print(f"MEASURED downtime: expected {expected.group(1)} s before the change, out of service "
          f"{measured.group(1)} s")
    print(f"MEASURED change deploy wall time {seconds:.1f} s; progress lines seen {progress}; "
          f"wait {ready.group(1)} s; 'fired up' line -> readiness module returned: {ready.group(2)} s")


@pytest.mark.parametrize(("extra", "variable"), [
    (["-e", "hicache_ratio=1.0"], "hicache_ratio"),
    (["-e", "hicache_ratio=lots"], "hicache_ratio"),
    (["-e", "hicache_write_policy=write_sometimes"], "hicache_write_policy"),
    (["-e", "hicache_io_backend=dma"], "hicache_io_backend"),
    (["-e", '{"sglang_speculative_draft_model_path": null}'], "sglang_speculative_draft_model_path"),
    (["-e", '{"sglang_extra_args": {"cuda-graph-max-bs": 8}}'], "sglang_extra_args['cuda-graph-max-bs']"),
    (["-e", "hicache_size=300"], "hicache_size"),  # the capacity plan: 8 ranks x 300 GB on 440 GB
    # The variable check of every role (playbooks/check.yml), before any role runs:
    (["-e", '{"sglang_served_model_name": "kimi)\\n[Service]\\nExecStartPre=+/bin/touch /root/pwned\\n#"}'],
     "sglang_served_model_name"),
    (["-e", "sglang_service_hardening=Strict"], "sglang_service_hardening"),
    (["-e", "hicache_raito=3.0"], "hicache_raito"),
    (["-e", "mem_fraction_static=0.88"], "mem_fraction_static"),  # sglang_mem_fraction_static without its prefix
    (["-e", "__sglang_service_restart_decided=true"], "__sglang_service_restart_decided"),
    (["-e", "sglang_rolling_serial=0"], "sglang_rolling_serial"),
    (["-e", "sglang_port=80"], "sglang_port"),
    (["-e", '{"sglang_extra_args": {"ssl-keyfile-password": "s3cret"}}'], "sglang_extra_args['ssl-keyfile-password']"),
])
def test_bad_input_is_refused_before_any_byte_changes(host: Any, extra: list[str], variable: str) -> None:
    digest, before = files_digest(host), show(host, "InvocationID", "MainPID")
    rc, out, _seconds = deploy(*extra)
    assert rc != 0
    assert f"{variable}" in out and "allowed" in out and "nothing was changed" in out, why(out)
    assert files_digest(host) == digest
    assert show(host, "InvocationID", "MainPID") == before


def test_crash_during_load_fails_the_play_in_seconds(host: Any) -> None:
    """A crash during the load fails the wait on the crash itself (the waiter follows the invocation and
    fails within one poll interval, plugins/module_utils/sglang_waiter.py), not on a stall bound or the timeout.
    How long that took is a measurement (MEASURED), not a pass criterion: a busy machine stretches it."""
    digest = files_digest(host)
    crash_env = json.dumps({"sglang_env": dict(SANDBOX_ENV, SGLANG_SIM_FAULT="crash_at=40")})
    rc, out, seconds = deploy("-e", "hicache_ratio=3.0", "-e", crash_env)
    assert rc != 0
    assert "crashed during start" in out, why(out)
    assert "made no progress for" not in out and "was not ready within" not in out, why(out)
    assert "--- journal of the invocation ---" in out and "CUDA error" in out, why(out)
    # From the crash (systemd's log line) to the end of the play.
    crashed_at = float(host.check_output(
        f"journalctl -u {UNIT} -o json --no-pager | grep -m1 'Main process exited, code=exited' "
        "| python3 -c 'import json,sys; print(int(json.loads(sys.stdin.read())[\"__REALTIME_TIMESTAMP\"]) / 1e6)'"))
    lag = time.time() - crashed_at
    # The crash is detected when the rescue starts (profile_tasks stamps every task header), and the
    # play fails once the rollback to the last good configuration is serving again.
    rescued = re.search(r"TASK \[sglang_rollout : Remember why the new configuration failed\][^\n]*\n"
                        r"(\w+ \d+ \w+ \d{4}\s+\d\d:\d\d:\d\d)", out)
    assert rescued, why(out)
    detected_at = time.mktime(time.strptime(rescued.group(1).split(None, 1)[1], "%d %B %Y %H:%M:%S"))
    detected_at -= time.timezone  # profile_tasks prints UTC (+0000)
    print(f"MEASURED crash during load -> detected (rescue began): {detected_at - crashed_at:.1f} s "
          f"(1 s resolution); -> play failed after the rollback served again: at most {lag:.1f} s "
          f"(whole run {seconds:.1f} s)")
    assert "It was rolled back to the last good configuration" in out
    # The last good configuration is back byte for byte, and serves: the next deploy of it is a no-op.
    assert files_digest(host) == digest
    assert healthy(host)
