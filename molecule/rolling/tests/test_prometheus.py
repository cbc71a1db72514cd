"""A real Prometheus (Debian's, the controller's /usr/bin/prometheus run on the router's host) scrapes the three
servers and the router through the targets playbooks/prometheus.yml writes, and evaluates the alert rules it
writes. A server saturated with requests fires SGLangKVCacheSaturated, a killed server fires
SGLangServerNotServing, and both clear again; the steady fleet fires nothing (its running HiCache matches the
repository, so SGLangConfigDrift stays quiet on the simulator's real pool sizes).

Thresholds and durations are scaled down with -e (the rules' logic is the production one); every wait is on
state Prometheus or the servers report, with a deadline that only bounds a failure.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import subprocess
import threading
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
SERVER_KEYS = {name: f"mol-SERVER-{name[-1]}-8e2f" for name in WORKERS}
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


def server(name: str, path: str, body: dict[str, Any] | None = None, timeout: float = 30) -> Any:
    request = urllib.request.Request(f"http://{ip(name)}:30000{path}", method="POST" if body else "GET",
                                     data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": f"Bearer {SERVER_KEYS[name]}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def healthy_in_router() -> float:
    result = api("/api/v1/query", query='sum(smg_worker_health{job="sglang-router"} == bool 1)')["data"]["result"]
    return float(result[0]["value"][1]) if result else -1.0


def gauge(name: str, metric: str) -> float:
    result = api("/api/v1/query", query=f'max(sglang:{metric}{{sglang_host="{name}"}})')["data"]["result"]
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


def test_a_saturated_server_fires_and_clears(prometheus: Path) -> None:
    """Every running slot of server 1 taken by long requests that hold more KV than its pool, three more
    queued: token usage above 0.5 with more than 2 queued. When the long ones end, it clears."""
    name = WORKERS[0]
    info = server(name, "/server_info")
    # max_running_requests is None unless given, as SGLang 0.5.23 reports it; the effective one is per DP rank.
    running = int(info["internal_states"][0]["effective_max_running_requests_per_dp"])
    pool = int(info["max_total_num_tokens"])
    # Long enough to outlast the 2 s 'for' and a few scrapes however busy the machine is, and 0.7 of the pool.
    tokens = max(math.ceil(0.7 * pool / running), 4000)
    results: list[Any] = []

    def one(body: dict[str, Any]) -> None:
        try:
            results.append(server(name, "/generate", body, 600))
        except OSError as error:  # counted, and reported by the assertion below
            results.append(error)

    def send(count: int, max_new: int) -> None:
        for _index in range(count):
            body = {"text": "saturate", "sampling_params": {"max_new_tokens": max_new}}
            threading.Thread(target=one, args=(body,), daemon=True).start()
    fault = time.monotonic()
    send(running, tokens)
    wait_for("every slot taken", lambda: gauge(name, "num_running_reqs") == running)
    send(3, 1)
    wait_for("three queued", lambda: gauge(name, "num_queue_reqs") == 3)
    firing = wait_for("SGLangKVCacheSaturated firing", lambda: alerts("SGLangKVCacheSaturated", name, "firing"))
    fired = time.monotonic() - fault
    assert firing[0]["labels"]["severity"] == "warning"
    assert alerts("SGLangKVCacheSaturated", WORKERS[1]) == []
    wait_for("the requests to end", lambda: len(results) == running + 3, seconds=tokens * 0.005 * 4 + 120)
    assert not [r for r in results if isinstance(r, Exception)], results
    wait_for("SGLangKVCacheSaturated to clear", lambda: alerts("SGLangKVCacheSaturated") == [])
    # Its /health waited for a free slot meanwhile, so the router may have marked it unhealthy: back to 3.
    wait_for("the router to list every server healthy", lambda: healthy_in_router() == 3)
    print(f"MEASURED KV saturation: {running} x {tokens} tokens into a pool of {pool}, 3 queued; "
          f"SGLangKVCacheSaturated firing {fired:.1f} s after the first request, cleared when they ended")


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
