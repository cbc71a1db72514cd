"""What the fleet scenarios' tests share (rolling: three servers, survival: two; a router, the same group_vars):
their hosts and keys, the bounded load through the router, the timeline of a roll, and reads of a server (its
invocation, files, health) and of the router's worker list. The hosts are named after the scenario."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import testinfra
import testinfra.utils.ansible_runner

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])

RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
SCENARIO = os.environ.get("MOLECULE_SCENARIO_NAME", "rolling")
ROUTER = f"sglang-{SCENARIO}-router"
WORKERS = sorted(RUNNER.get_hosts("sglang_workers"))  # the scenario's servers, sglang-<scenario>-1, -2, ...
UNIT = "sglang-kimi.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
ENV_PATH = "/etc/sglang/kimi.env"
# group_vars: the router's clients' key, its control plane's admin key (the deploy's: the worker list), and each
# server's own.
ROUTER_KEY = "mol-ROUTER-4c1d9e"
ADMIN_KEY = "mol-ADMIN-7b3a51"
SERVER_KEYS = {name: f"mol-SERVER-{name[-1]}-8e2f" for name in WORKERS}
AUTH = f"-H 'Authorization: Bearer {ROUTER_KEY}'"
ADMIN_AUTH = f"-H 'Authorization: Bearer {ADMIN_KEY}'"
GENERATE = ("-H 'Content-Type: application/json' "
            "-d '{\"text\": \"hi\", \"sampling_params\": {\"max_new_tokens\": 4}}'")


def on(name: str) -> Any:
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def router_ip() -> str:
    return subprocess.check_output(
        ["docker", "inspect", "-f", f'{{{{(index .NetworkSettings.Networks "sglang-{SCENARIO}-net").IPAddress}}}}',
         ROUTER], text=True).strip()


# The load's bounds. A driver roll of three hosts takes about 3.5 minutes here at some 35 requests a second:
# room for twice that, so that the load lasts until the test stops it (Load.finish checks that it did).
MAX_REQUESTS, MAX_SECONDS = 20000, 600


class Load:
    """The bounded load generator, run on the controller against the router's address on the test network."""

    def __init__(self, tmp: Path, max_requests: int = MAX_REQUESTS, max_seconds: int = MAX_SECONDS) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.stop_file, self.events = tmp / "stop", tmp / "events.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, str(PROJECT / "molecule/resources/loadgen.py"), "--router", f"http://{router_ip()}:30080",
             "--expect", str(len(WORKERS)), "--concurrency", "4", "--max-requests", str(max_requests),
             "--max-seconds", str(max_seconds),
             "--stop-file", str(self.stop_file), "--events", str(self.events)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "SGLANG_ROUTER_API_KEY": ROUTER_KEY, "SGLANG_ROUTER_ADMIN_KEY": ADMIN_KEY})
        time.sleep(3)  # a baseline before the change starts

    def finish(self) -> dict[str, int]:
        time.sleep(2)
        self.stop_file.touch()
        out, _stderr = self.proc.communicate(timeout=120)
        print(out)
        match = re.search(r"^LOAD SUMMARY sent=(\d+) ok=(\d+) failed=(\d+) min_healthy=(\d+)/\d+$", out, re.M)
        assert match, out
        # Spent before the stop, the load would have ended before the roll, and the timeline with it.
        assert "LOAD BUDGET SPENT" not in out, "the load generator's request budget ran out before the roll ended"
        failures = re.search(r"^LOAD FAILURES (.*)$", out, re.M)
        self.failures = {key: float(value) for key, value in re.findall(r"(\w+)=([\d.]+)", failures.group(1))
                         } if failures else {}
        return dict(zip(("sent", "ok", "failed", "min_healthy"), map(int, match.groups()), strict=True))

    def router_events(self) -> list[dict[str, Any]]:
        if not self.events.exists():
            return []
        return [json.loads(line) for line in self.events.read_text().splitlines()]


def journal_times(name: str, pattern: str, since: float) -> list[float]:
    out = on(name).check_output(f"journalctl -u {UNIT} -o json --no-pager --since=@{int(since)}")
    return [int(json.loads(line)["__REALTIME_TIMESTAMP"]) / 1e6 for line in out.splitlines()
            if pattern in str(json.loads(line).get("MESSAGE", ""))]


def timeline(load: Load, since: float) -> list[tuple[float, str, str]]:
    rows = [(e["t"], e["url"].split("//")[1].split(":")[0], "router: " + e["event"]) for e in load.router_events()]
    for name in WORKERS:
        rows += [(t, name, "systemd: started (restart)") for t in journal_times(name, f"Started {UNIT}", since)]
        rows += [(t, name, "server: fired up (ready)") for t in journal_times(name, "fired up and ready", since)]
    return sorted(rows)


def print_timeline(rows: list[tuple[float, str, str]], since: float) -> None:
    for t, name, what in rows:
        print(f"MEASURED timeline +{t - since:6.1f} s  {name:18} {what}")


def assert_one_at_a_time(rows: list[tuple[float, str, str]], names: list[str]) -> None:
    """Each of names, in order, removed from the router, started, ready and re-added before the next is removed."""
    order = [(name, what) for _time, name, what in rows if what != "router: healthy"]
    expected = [(name, what) for name in names for what in ("router: removed", "systemd: started (restart)",
                                                            "server: fired up (ready)", "router: added")]
    assert order == expected, order


def digest(name: str) -> str:
    return on(name).check_output(f"sha256sum {UNIT_PATH} {ENV_PATH}")


def boot_id(name: str) -> str:
    """The container's boot: when its PID 1 (systemd) started; the kernel's boot id is its host's."""
    return on(name).file("/proc/1/stat").content_string.split()[21]


def invocation(name: str) -> str:
    return on(name).check_output(f"systemctl show {UNIT} --property=InvocationID --value")


def healthy(name: str) -> bool:
    code = on(name).run("curl -s -o /dev/null -w '%{http_code}' --max-time 30 http://127.0.0.1:30000/health_generate")
    return code.stdout.strip() == "200"


def listed(host: Any) -> list[tuple[str, bool]]:
    listing = json.loads(host.check_output(f"curl -s {ADMIN_AUTH} http://127.0.0.1:30080/workers"))
    return sorted((w["url"], w["is_healthy"]) for w in listing["workers"])
