"""A real Prometheus (Debian's, the controller's /usr/bin/prometheus run on the router's host) scrapes the three
servers and the router through the targets playbooks/prometheus.yml writes, and evaluates the alert rules it
writes. A killed server fires SGLangServerNotServing, which clears again; the steady fleet fires nothing (its
running HiCache matches the repository, so SGLangConfigDrift stays quiet on the simulator's real pool sizes).
A real saturation firing SGLangKVCacheSaturated is the real server's drill: Molecule's engine scenario, drill 7.

Thresholds and durations are scaled down with -e (the rules' logic is the production one); every wait is on
state Prometheus or the servers report, with a deadline that only bounds a failure.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import testinfra.utils.ansible_runner
from drill import run_playbook, why

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
testinfra_hosts = RUNNER.get_hosts("sglang_routers")
ROUTER = "sglang-rolling-router"
WORKERS = ["sglang-rolling-1", "sglang-rolling-2", "sglang-rolling-3"]
UNIT = "sglang-kimi.service"
HERE = "/etc/sglang-test-prometheus"
PORT = 9090
# The rules as production writes them, with thresholds a test can reach in seconds.
SCALED = {"sglang_monitoring_load_budget": 4, "sglang_monitoring_token_usage": 0.5,
          "sglang_monitoring_queue_depth": 2, "sglang_monitoring_saturated_for": "2s",
          "sglang_monitoring_router_workers_for": "2s", "sglang_monitoring_router_down_for": "2s",
          "sglang_monitoring_drift_for": "2s", "sglang_monitoring_node_job": ""}
CONFIG = """global: {scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 1s}
rule_files: [%(here)s/sglang-alerts.yml]
scrape_configs:
  - job_name: sglang-deploy   # each target group sets its own job (sglang, sglang-router)
    file_sd_configs: [{files: [%(here)s/sglang-targets.json]}]
"""


@functools.cache
def ip(name: str) -> str:
    """A container's address, read once: 48 requests started together must not each run docker inspect."""
    return subprocess.check_output(
        ["docker", "inspect", "-f", '{{(index .NetworkSettings.Networks "sglang-rolling-net").IPAddress}}', name],
        text=True).strip()


def docker(name: str, *argv: str) -> str:
    return subprocess.run(["docker", "exec", name, *argv], check=True, capture_output=True, text=True).stdout


def api(path: str, **params: str) -> Any:
    url = f"http://{ip(ROUTER)}:{PORT}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def wait_for(what: str, check: Callable[[], Any], seconds: float = 180) -> Any:
    """Poll until check() gives something true; the deadline only bounds a failure."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = check()
        except OSError:
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"waited {seconds:.0f} s for {what}"
        time.sleep(0.5)


def alerts(name: str, host: str | None = None, state: str | None = None) -> list[dict[str, Any]]:
    return [a for a in api("/api/v1/alerts")["data"]["alerts"] if a["labels"]["alertname"] == name
            and (host is None or a["labels"].get("sglang_host") == host) and (state is None or a["state"] == state)]


def healthy_in_router() -> float:
    result = api("/api/v1/query", query='sum(smg_worker_health{job="sglang-router"} == bool 1)')["data"]["result"]
    return float(result[0]["value"][1]) if result else -1.0


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("monitoring")
    extra = [arg for key, value in SCALED.items() for arg in ("-e", f"{key}={value}")]
    rc, output, _seconds = run_playbook("playbooks/prometheus.yml", "-e", f"sglang_monitoring_output_dir={out}",
                                        *extra)
    assert rc == 0, why(output)
    assert "checked by promtool" in output
    (out / "prometheus.yml").write_text(CONFIG % {"here": HERE})
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: scripts/setup.sh installs Debian's prometheus package"
    docker(ROUTER, "mkdir", "-p", HERE)
    for path in [Path(binary), *out.iterdir()]:
        subprocess.run(["docker", "cp", str(path), f"{ROUTER}:{HERE}/{path.name}"], check=True)
    docker(ROUTER, "systemd-run", "--unit=sglang-test-prometheus", "--collect", f"{HERE}/prometheus",
           f"--config.file={HERE}/prometheus.yml", f"--storage.tsdb.path={HERE}/data",
           f"--web.listen-address=0.0.0.0:{PORT}")
    try:
        wait_for("every target up", lambda: [t["health"] for t in api("/api/v1/targets")["data"]["activeTargets"]]
                 == ["up"] * 4)
        yield out
    finally:
        subprocess.run(["docker", "exec", ROUTER, "systemctl", "stop", "sglang-test-prometheus"], check=False)
        subprocess.run(["docker", "exec", ROUTER, "rm", "-rf", HERE], check=False)


def test_prometheus_scrapes_the_fleet_with_the_targets_labels(prometheus: Path) -> None:
    targets = api("/api/v1/targets")["data"]["activeTargets"]
    by_job = sorted((t["labels"]["job"], t["labels"].get("sglang_host", "")) for t in targets)
    assert by_job == [("sglang", name) for name in WORKERS] + [("sglang-router", "")]
    # The router sees three healthy servers, through the metric the rules read.
    assert healthy_in_router() == 3


def test_the_steady_fleet_fires_nothing(prometheus: Path) -> None:
    """Several evaluations after every rule could have fired (2 s), nothing is pending or firing: the running
    HiCache pools are hicache_ratio (2) times the KV pools, as the repository says."""
    start = float(api("/api/v1/query", query="time()")["data"]["result"][1])
    wait_for("six evaluations", lambda: float(api("/api/v1/query", query="time()")["data"]["result"][1]) > start + 6)
    assert api("/api/v1/alerts")["data"]["alerts"] == []
    # Per rank (every rank writes max_total_num_tokens, SGLang 0.5.23): one value per server on each side.
    ratio = api("/api/v1/query", query='max by (instance) (sglang:hicache_host_total_tokens{job="sglang"}) / on '
                                       '(instance) max by (instance) (sglang:max_total_num_tokens{job="sglang"})'
                )["data"]["result"]
    assert len(ratio) == 3 and all(abs(float(r["value"][1]) - 2) < 0.001 for r in ratio), ratio


def test_a_killed_server_fires_not_serving_and_clears_when_back(prometheus: Path) -> None:
    """Server 2's process killed by its PID, and held down (its restart stopped) until the alert fires: up 0
    for longer than the 4 s budget. The router keeps 2 of 3 healthy, which a rollout also leaves: no alert
    there. Started again, the alert clears."""
    name = WORKERS[1]
    pid = docker(name, "systemctl", "show", "-P", "MainPID", UNIT).strip()
    assert pid not in ("", "0")
    fault = time.monotonic()
    docker(name, "kill", "-KILL", pid)
    docker(name, "systemctl", "stop", UNIT)  # cancels systemd's restart: down until the alert has fired
    pending = wait_for("SGLangServerNotServing pending", lambda: alerts("SGLangServerNotServing", name))
    firing = wait_for("SGLangServerNotServing firing", lambda: alerts("SGLangServerNotServing", name, "firing"))
    fired = time.monotonic() - fault
    assert pending and firing[0]["labels"]["severity"] == "critical"
    assert firing[0]["annotations"]["summary"].startswith(f"{name}: {UNIT} has not served")
    assert alerts("SGLangRouterFewHealthyWorkers") == []
    docker(name, "systemctl", "start", UNIT)
    wait_for("SGLangServerNotServing to clear", lambda: alerts("SGLangServerNotServing") == [])
    wait_for("the router to list it healthy again", lambda: healthy_in_router() == 3)
    print(f"MEASURED killed server: SGLangServerNotServing firing {fired:.1f} s after the kill "
          f"(budget {SCALED['sglang_monitoring_load_budget']} s, scrape and evaluation every 1 s)")
