"""Fault drills. Each one ends with the server serving its last good configuration."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import testinfra.utils.ansible_runner

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
sys.path.insert(0, str(PROJECT / "molecule" / "resources"))
from drill import run_playbook  # noqa: E402

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("sglang_workers")
UNIT = "sglang-kimi.service"
FILES = f"/etc/systemd/system/{UNIT} /etc/sglang/kimi.env"


def show(host: Any, *props: str) -> dict[str, str]:
    out = host.check_output(f"systemctl show {UNIT} " + " ".join(f"--property={p}" for p in props))
    return dict(line.split("=", 1) for line in out.splitlines())


def serving(host: Any) -> bool:
    return host.run("curl -s -o /dev/null -w '%{http_code}' --max-time 30 "
                    "http://127.0.0.1:30000/health_generate").stdout == "200"


def test_hang_during_load_fails_at_the_budget_and_rolls_back(host: Any) -> None:
    before = host.check_output(f"sha256sum {FILES}")
    rc, out, seconds = run_playbook("deploy.yml", "-e", "hicache_ratio=3.0", "-e", "drill_fault=hang_at=50",
                                    "-e", "sglang_ready_timeout=40")
    print(f"MEASURED hang drill: play failed after {seconds:.1f} s (budget 40 s)")
    assert rc != 0
    assert "was not ready within 40 s" in out, out[-3000:]
    assert re.search(r"last progress: loading weights 4\d% \(\d+/64 shards\)", out), out[-3000:]
    assert "ROLLOUT STOPPED at sglang-molecule-faults" in out and "rolled back" in out
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
    rc, out, _ = run_playbook("playbooks/status.yml", "-e", "status_json=/tmp/faults-status.json")
    assert rc == 0, out[-3000:]
    rows = json.loads(Path("/tmp/faults-status.json").read_text())
    assert rows[0]["restarts"] == 1 and rows[0]["healthy"], rows
    print("MEASURED status after a crash:\n" + "\n".join(line for line in out.splitlines() if "sglang-molecule" in line
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
        rc, out, _ = run_playbook("deploy.yml", "-e", "hicache_ratio=3.0")
        assert rc != 0
        assert f"holds a GPU: PID {stale}" in out and "nothing was changed" in out, out[-3000:]
        assert (host.check_output(f"sha256sum {FILES}"), show(host, "InvocationID")) == before
        assert host.run(f"kill -0 {stale}").rc == 0, "the stale process was killed"
    finally:
        host.run(f"kill {stale}")  # the process this test started, by its PID
        if original is None:
            host.run(f"rm -f {config_path}")
        else:
            write_file(host, config_path, original)
    assert serving(host)


def test_sigterm_lets_requests_in_flight_finish(host: Any) -> None:
    result: dict[str, Any] = {}

    def long_request() -> None:
        result["out"] = host.check_output(
            "curl -s --max-time 150 http://127.0.0.1:30000/generate -H 'Content-Type: application/json' "
            "-d '{\"text\": \"drain\", \"sampling_params\": {\"max_new_tokens\": 8000}}'")

    thread = threading.Thread(target=long_request)
    thread.start()
    time.sleep(2)  # the request runs about 40 s: the deploy's restart (SIGTERM) comes while it does
    rc, out, _ = run_playbook("deploy.yml", "-e", "hicache_ratio=3.0")
    thread.join(timeout=150)
    assert rc == 0, out[-3000:]
    assert json.loads(result["out"])["meta_info"]["completion_tokens"] == 8000
    drained = host.check_output(f"journalctl -u {UNIT} --no-pager -o cat | grep -c 'Gracefully exiting' || true")
    assert int(drained) >= 1
    assert serving(host)
