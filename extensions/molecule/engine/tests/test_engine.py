"""Verify the engine scenario: the package against the real SGLang 0.5.23 server (PyPI's wheel, on the CPU).

The tests are the fifteen drills of the real engine, in file order, each driving the user's own playbooks through
the CLI and printing a `MEASURED engine drill N` line with the version the server itself reports:
1. the first deploy, whose readiness wait follows the real startup log;
2. a rerun, which changes and restarts nothing;
3. a change that needs a restart: the probe passes, the server restarts once and serves again;
4. the drain: a long request in flight at SIGTERM completes, and the old process exits 0;
5. a start the real server refuses (a context length its model does not have): detected from the real log,
   rolled back byte for byte, serving again;
6. a change rolled across both servers behind the real sglang-router under bounded load: no request fails;
7. Debian's Prometheus scrapes the real /metrics; a real saturation fires SGLangKVCacheSaturated, which clears;
8. plan.yml calibrates from the real server's startup log, and refuses a log of another model;
9. a live change (a speculative acceptance threshold): set through the API and read back, no restart;
10. presharded weights (the scenario opts in): the first start dumps them, every later start loads the dump;
11. the keys: /generate without a key 401, with the client key 200; an admin endpoint refuses the client key and
    takes the admin key; the router still serves through both servers;
12. the allow-list: a host not on it (the other server) cannot connect to a server's port, the router can (the
    firewall of the unit, IPAddressDeny=any with IPAddressAllow=; role sglang_service);
13. no key appears in the Ansible output of any drill, although SGLang's own startup line prints them to the journal;
14. TLS on the router (run before 13): one deploy turns on the router's own https and gives it the servers' CA
    ahead (sglang_router_worker_ca), restarting no server;
15. TLS on the servers: one deploy rolls both onto https under load through the https router, with no request
    failed and no router restart; plain HTTP and another CA refused, the client key still required; the router lists
    them as https, healthy through its periodic checks, and serves through them.
What they read from the real server (its startup and drain logs, a scrape, /server_info) is kept in
.cache/engine-recorded/ and compared with tests/fixtures/sglang-engine/, the fixtures the simulator is held to.
Every wait is on state the servers, systemd or Prometheus report; a deadline only bounds a failure.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import threading
import time
import typing as t
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from http.client import HTTPException
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import testinfra
import testinfra.utils.ansible_runner
import yaml
from cryptography import x509
from drill import LOGS, recap, run_playbook, why
from pki import Pki, make_pki

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
testinfra_hosts = RUNNER.get_hosts("sglang_routers")  # the drills run once; the servers are reached by name
ROUTER = "sglang-engine-router"
WORKERS = ["sglang-engine-1", "sglang-engine-2"]
NETWORK = "sglang-engine-net"
UNIT = "sglang-kimi.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
ENV_PATH = "/etc/sglang/kimi.env"
OBSERVED = "/var/lib/sglang-deploy/records/kimi.observed.json"  # root's records: only root writes there
RECORDED = PROJECT / ".cache" / "engine-recorded"
FIXTURES = PROJECT / "tests" / "fixtures" / "sglang-engine"
# group_vars/sglang_workers.yml's extra arguments: a drill that changes them gives the whole mapping with -e.
EXTRA_ARGS: dict[str, Any] = yaml.safe_load((Path(__file__).parents[1] / "group_vars" / "sglang_workers.yml")
                                            .read_text())["sglang_extra_args"]
# The servers' keys (group_vars/sglang_workers.yml), sent as SGLang's clients and admins send them.
_WORKER_VARS: dict[str, Any] = yaml.safe_load((Path(__file__).parents[1] / "group_vars" / "sglang_workers.yml")
                                              .read_text())
CLIENT_KEY: str = _WORKER_VARS["sglang_api_key"]
ADMIN_KEY: str = _WORKER_VARS["sglang_admin_api_key"]
# The phases the readiness wait names from 0.5.23's own lines (plugins/module_utils/sglang_waiter.py PHASES), in order.
REAL_PHASES = ["initialising torch.distributed", "loading weights", "weights loaded", "allocating KV cache",
               "starting HTTP server", "warming up", "fired up"]


_IPS: dict[str, str] = {}


def ip(name: str) -> str:
    """A container's address on the scenario's network, read once."""
    if name not in _IPS:
        _IPS[name] = subprocess.check_output(
            ["docker", "inspect", "-f", f'{{{{(index .NetworkSettings.Networks "{NETWORK}").IPAddress}}}}', name],
            text=True).strip()
    return _IPS[name]


def on(name: str) -> Any:
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def deploy(*extra: str) -> tuple[int, str, float]:
    return run_playbook("deploy.yml", *extra)


def with_args(**changes: Any) -> list[str]:
    """-e giving sglang_extra_args with the scenario's own plus changes (a value of None leaves a flag out)."""
    merged = {key: value for key, value in {**EXTRA_ARGS, **changes}.items() if value is not None}
    return ["-e", json.dumps({"sglang_extra_args": merged})]


def _request(url: str, body: dict[str, Any] | None, key: str | None) -> urllib.request.Request:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    return urllib.request.Request(url, method="POST" if body is not None else "GET", headers=headers,
                                  data=json.dumps(body).encode() if body is not None else None)


def http(name: str, path: str, body: dict[str, Any] | None = None, timeout: float = 30,
         key: str | None = CLIENT_KEY) -> bytes:
    """An HTTP call to a server on the scenario's network, from the controller, with the client key unless told:
    the response body."""
    with urllib.request.urlopen(_request(f"http://{ip(name)}:30000{path}", body, key), timeout=timeout) as response:
        return bytes(response.read())


def status(url: str, body: dict[str, Any] | None = None, key: str | None = None, timeout: float = 60) -> int:
    """The HTTP status of a call (an error status is an answer, not a failure)."""
    try:
        with urllib.request.urlopen(_request(url, body, key), timeout=timeout) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def server_info(name: str) -> dict[str, Any]:
    # /server_info: the handler of /get_server_info, which 0.5.23 still answers but logs as deprecated.
    return dict(json.loads(http(name, "/server_info")))


def version(name: str) -> str:
    """What the server itself says it is (/server_info)."""
    return str(server_info(name)["version"])


def show(name: str, *props: str) -> dict[str, str]:
    out = on(name).check_output(f"systemctl show {UNIT} " + " ".join(f"--property={p}" for p in props))
    return dict(line.split("=", 1) for line in out.splitlines())


def invocation(name: str) -> str:
    return show(name, "InvocationID")["InvocationID"]


def running_argv(name: str) -> list[str]:
    """The main process's own argv (/proc/<MainPID>/cmdline)."""
    pid = show(name, "MainPID")["MainPID"]
    return on(name).check_output(f"tr '\\0' '\\n' < /proc/{pid}/cmdline").splitlines()


def healthy(name: str) -> bool:
    code = on(name).run("curl -s -o /dev/null -w '%{http_code}' --max-time 60 http://127.0.0.1:30000/health_generate")
    return code.stdout.strip() == "200"


def digest(name: str) -> str:
    return on(name).check_output(f"sha256sum {UNIT_PATH} {ENV_PATH}")


def starts(name: str) -> int:
    out = on(name).run(f"journalctl -u {UNIT} --no-pager -o cat | grep -c '^Started ' || true").stdout
    return int(out.strip() or 0)


def journal(name: str, *match: str) -> list[dict[str, Any]]:
    """Journal entries (journalctl -o json) of the unit's invocations, or of the given matches."""
    argv = " ".join(match) if match else f"-u {UNIT}"
    out = on(name).check_output(f"journalctl --no-pager -o json {argv}")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def message(entry: dict[str, Any]) -> str:
    value = entry.get("MESSAGE", "")
    return bytes(value).decode("utf-8", "replace") if isinstance(value, list) else str(value or "")


def seconds_of(entry: dict[str, Any]) -> float:
    return int(entry["__REALTIME_TIMESTAMP"]) / 1e6


def invocation_log(name: str, invocation_id: str) -> str:
    """What the server wrote in one invocation (journalctl -o cat), as sglang_startup reads a log."""
    return on(name).check_output(f"journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID={invocation_id}")


def systemd_lines(name: str, invocation_id: str) -> list[tuple[float, str]]:
    """systemd's own messages about one invocation (its start, stop, exit status)."""
    return [(seconds_of(e), message(e)) for e in journal(name, f"INVOCATION_ID={invocation_id}")]


def record(name: str, text: str) -> Path:
    """Keep what the real server gave (.cache/engine-recorded/), for the fixtures' comparison and a refresh; the
    tqdm bar's redraws (split by \\r) on lines of their own, as the fixtures keep them."""
    RECORDED.mkdir(parents=True, exist_ok=True)
    path = RECORDED / name
    # Without the keys, which SGLang prints in its server_args line and returns from /server_info: a refresh of the
    # fixtures copies these files into the repository.
    for key in (ADMIN_KEY, CLIENT_KEY):
        text = text.replace(key, "********")
    path.write_text(text.replace("\r\n", "\n").replace("\r", "\n"))
    return path


def task_start(output: str, task: str) -> float:
    """When the named task started, from the profile_tasks line after its header (controller time, whole seconds)."""
    after = output.split(f"TASK [{task}]", 1)[1]
    stamp = re.search(r"\w+day (\d{2} \w+ \d{4}\s+\d{2}:\d{2}:\d{2} [+-]\d{4})", after)
    assert stamp, f"no time after TASK [{task}]"
    return time.mktime(time.strptime(re.sub(r"\s+", " ", stamp.group(1)), "%d %B %Y %H:%M:%S %z")) - time.timezone


def wait_for(what: str, check: Callable[[], Any], seconds: float = 300) -> Any:
    """Poll until check() gives something true; the deadline only bounds a failure."""
    deadline = time.monotonic() + seconds
    last: object = None
    while True:
        try:
            found = check()
        except (OSError, AssertionError, ValueError, KeyError) as error:
            found, last = None, error
        if found:
            return found
        assert time.monotonic() < deadline, f"waited {seconds:.0f} s for {what} (last seen: {last!r})"
        time.sleep(0.5)


# --- 1. the first deploy --------------------------------------------------------------------------------------

def first_200(name: str, invocation_id: str) -> float:
    entries = journal(name, f"_SYSTEMD_INVOCATION_ID={invocation_id}")
    return min(seconds_of(e) for e in entries if '"GET /health_generate HTTP/1.1" 200' in message(e))


def test_1_the_first_deploy_waits_on_the_real_startup_log(host: Any) -> None:
    fresh = [name for name in WORKERS if not on(name).file(UNIT_PATH).exists]
    assert fresh == WORKERS, ("drill 1 measures a first deploy: run it on fresh hosts (molecule test -s engine, or "
                              f"destroy, create and prepare); deployed already: {sorted(set(WORKERS) - set(fresh))}")
    rc, out, seconds = deploy()
    assert rc == 0, why(out)
    # The fixtures' start: the first server's log once it has answered what the simulator's fidelity test asks of
    # it (tests/simulator/test_sim_fidelity.py replays the requests of the recording).
    exercise(WORKERS[0])
    record("startup-0.5.23-cpu.log", invocation_log(WORKERS[0], invocation(WORKERS[0])))
    record("server-info-0.5.23-cpu.json", json.dumps(server_info(WORKERS[0]), indent=4, sort_keys=True) + "\n")
    returned = task_start(out, "sglang_service : Report readiness")  # the play's wait task ended here
    for name in WORKERS:
        observed = json.loads(on(name).file(OBSERVED).content_string)
        phases = [phase["phase"] for phase in observed["phases"]]
        assert [phase for phase in phases if phase in REAL_PHASES] == REAL_PHASES, phases
        ready_at = first_200(name, observed["invocation_id"])
        # The waiter writes what the start measured once it has its 200, and returns: the file's time is its end.
        waited = float(on(name).check_output(f"stat -c %.9Y {OBSERVED}")) - ready_at
        log = invocation_log(name, observed["invocation_id"])
        print(f"MEASURED engine drill 1 first deploy on {name}: sglang {version(name)} (server_info); deploy "
              f"{seconds:.0f} s wall (install included); ready {observed['ready_after_s']} s after the restart "
              f"(load {observed['load']['total_s']} s from the process's start); phases from the real log "
              f"{[(p['phase'], p['at_s']) for p in observed['phases']]}; the readiness wait returned {waited:.2f} s "
              f"after the server's first 200 from /health_generate, and the play's task that polls it "
              f"{returned - ready_at:+.1f} s after (its poll interval and the machine's load; whole seconds)")
        # The waiter is the only client of /health_generate before the server joins the router: its own first
        # 200 ends its wait at once. (The play asks the detached waiter how it is every
        # sglang_service_progress_interval; how soon that poll comes back is Ansible's and the machine's.) The
        # access line's time is journald's, taken when it reads the line, after the response went out: it can
        # trail the waiter's end (by 0.011 s once in CI), never precede the response, so only the upper bound
        # holds on a busy machine; that the wait ended on a 200 is the waiter's own record (ready_after_s).
        assert observed["ready_after_s"] is not None and observed["ready_after_s"] > 0, observed
        assert waited <= 5.0, f"the readiness wait returned {waited:.1f} s after the first 200 (allowed: 5 s)"
        assert log.count("The server is fired up and ready to roll!") == 1


def exercise(name: str) -> None:
    """A scrape, a generation, a streamed completion and the model list, each as a client asks for it."""
    http(name, "/metrics")
    http(name, "/generate", {"text": "The capital of France is", "sampling_params": {"temperature": 0,
                                                                                     "max_new_tokens": 16}})
    http(name, "/v1/completions", {"model": "tiny-llama", "prompt": "Once upon a time", "max_tokens": 8,
                                   "stream": True})
    http(name, "/v1/models")


# --- 2. a rerun -------------------------------------------------------------------------------------------------

def test_2_a_rerun_changes_and_restarts_nothing(host: Any) -> None:
    before = {name: invocation(name) for name in WORKERS}
    rc, out, seconds = deploy()
    assert rc == 0, why(out)
    changed = {name: recap(out, name)["changed"] for name in [*WORKERS, ROUTER]}
    after = {name: invocation(name) for name in WORKERS}
    print(f"MEASURED engine drill 2 rerun: sglang {version(WORKERS[0])} (server_info); {seconds:.1f} s wall; "
          f"changed {changed}; InvocationID unchanged on {sum(before[n] == after[n] for n in WORKERS)} of 2")
    assert changed == dict.fromkeys([*WORKERS, ROUTER], 0), why(out)
    assert after == before


# --- 3 and 4. a change that needs a restart, with a request in flight at SIGTERM ---------------------------------

class Restart(t.NamedTuple):
    """One restart of the first server (drills 3 and 4 read the same run: a restart costs a real start)."""

    name: str
    before: str
    started: int
    rc: int
    out: str
    seconds: float


@pytest.fixture(scope="module")
def restart() -> Restart:
    """--schedule-policy lpm on the first server, with the drain drill's long request held until SIGTERM."""
    name = WORKERS[0]
    before, started = invocation(name), starts(name)
    on(name).run("rm -f /var/tmp/engine-drill-long-request.json")
    rc, out, seconds = deploy("--limit", name, *with_args(**{"schedule-policy": "lpm"}),
                              "-e", f"drill_long_request_host={name}")
    return Restart(name, before, started, rc, out, seconds)


def test_3_a_change_restarts_the_server_once(host: Any, restart: Restart) -> None:
    name, out = restart.name, restart.out
    assert restart.rc == 0, why(out)
    assert re.search(r"ok +cpu: torch [\d.]+\S* computed a matrix product on the CPU", out), why(out)
    assert invocation(name) != restart.before and starts(name) == restart.started + 1
    assert show(name, "NRestarts")["NRestarts"] == "0"
    argv = running_argv(name)
    assert argv[argv.index("--schedule-policy") + 1] == "lpm", argv
    info = server_info(name)
    assert info["schedule_policy"] == "lpm", info["schedule_policy"]  # the server's own view of its settings
    assert healthy(name)
    ready = re.search(r"ready after ([\d.]+) s", out)
    # The cost before the change (the host's last recorded load, drill 1's) and the measured one after.
    expected = re.search(r"Expected downtime per batch \(its slowest host's last load, drain not counted\): "
                         r"batch 1: (\d+) s", out)
    measured = re.search(rf"DOWNTIME {name}: out of service (\d+) s \(drain, restart, load, smoke test\); expected "
                         r"(\d+) s before the change \(the load of \S+ on this host", out)
    assert expected and measured and measured.group(2) == expected.group(1), why(out)
    # Which lever would make that load faster, in the plan before the change (advice only).
    assert re.search(rf"Load speed on {name}: ", out), why(out)
    print(f"MEASURED engine drill 3 downtime: expected {expected.group(1)} s before the change (the last recorded "
          f"load), out of service {measured.group(1)} s (drain with a request held until SIGTERM, restart, load, "
          "smoke test)")
    print(f"MEASURED engine drill 3 restart: sglang {info['version']} (server_info); --schedule-policy lpm on "
          f"{name}: {restart.seconds:.1f} s wall, probe passed, 1 start, ready after "
          f"{ready.group(1) if ready else '?'} s; the server reports schedule_policy={info['schedule_policy']}")


def test_4_a_request_in_flight_at_sigterm_completes_and_the_old_process_exits_0(host: Any, restart: Restart) -> None:
    name, old = restart.name, restart.before
    assert restart.rc == 0, why(restart.out)
    answer = json.loads(wait_for("the long request's answer", lambda: on(name).file(
        "/var/tmp/engine-drill-long-request.json").content_string, 60))
    assert answer["ok"], answer
    assert answer["meta_info"]["completion_tokens"] == 600, answer
    log = invocation_log(name, old)
    drain = [line for line in log.splitlines() if "SIGTERM received" in line or "Gracefully exiting" in line]
    assert any("SIGTERM received" in line for line in drain), log[-3000:]
    systemd = systemd_lines(name, old)
    ended = [text for _t, text in systemd if "Deactivated successfully" in text or "exited" in text
             or "Failed with result" in text]
    assert any("Deactivated successfully" in text for text in ended), systemd
    assert not [text for text in ended if "status=137" in text or "Failed with result" in text], systemd
    sigterm = min(seconds_of(e) for e in journal(name, f"_SYSTEMD_INVOCATION_ID={old}")
                  if "SIGTERM received" in message(e))
    stopped = max(t for t, text in systemd if "Deactivated successfully" in text)
    finished = float(answer["meta_info"]["request_finished_ts"])
    # The request was in flight at SIGTERM (the hook held it until then), and finished before the process ended.
    assert sigterm < finished < stopped, (sigterm, finished, stopped)
    print(f"MEASURED engine drill 4 drain: sglang {version(name)} (server_info); a 600-token request in flight at "
          f"SIGTERM finished {finished - sigterm:.1f} s after it; the old process exited 0 (systemd: "
          f"'Deactivated successfully') {stopped - sigterm:.1f} s after SIGTERM; the restart's deploy "
          f"{restart.seconds:.1f} s wall")


# --- 5. a start the real server refuses -------------------------------------------------------------------------

def test_5_a_start_the_real_server_refuses_is_detected_and_rolled_back(host: Any) -> None:
    name = WORKERS[0]
    before, good = digest(name), invocation(name)
    since = time.time()
    rc, out, seconds = deploy("--limit", name, *with_args(**{"context-length": 100000}))
    assert rc != 0, "the deploy of a start the server refuses succeeded:\n" + why(out)
    assert "rolled back to the last good configuration" in out, why(out)
    assert "context_length" in out, "the failure does not quote the server's own reason:\n" + why(out)
    assert digest(name) == before, "not restored byte for byte"
    assert healthy(name)
    invocations = journal(name, "_SYSTEMD_UNIT=init.scope", f"UNIT={UNIT}", f"--since=@{int(since)}")
    failed = [seconds_of(e) for e in invocations if "Main process exited, code=exited, status=1/FAILURE" in message(e)]
    started = [seconds_of(e) for e in invocations if message(e).startswith("Started ")]
    assert failed, [message(e) for e in invocations]
    rescue = min(t for t in started if t > failed[0])
    assert invocation(name) != good
    print(f"MEASURED engine drill 5 refused start: sglang {version(name)} (server_info); --context-length 100000 "
          f"(the model has 4096): the server exited 1 {failed[0] - since:.1f} s into the deploy; the rollback "
          f"started the last good configuration {rescue - failed[0]:.1f} s after that exit; the play failed after "
          f"{seconds:.1f} s; unit and environment restored byte for byte, serving again")


# --- 6. a roll behind the real router under load -----------------------------------------------------------------

class Memory:
    """Samples each server unit's memory (systemd's MemoryCurrent) and the machine's MemAvailable every second."""

    def __init__(self) -> None:
        self.peak = dict.fromkeys(WORKERS, 0)
        self.lowest_available = float("inf")
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.done.is_set():
            for name in WORKERS:
                out = subprocess.run(["docker", "exec", name, "systemctl", "show", UNIT, "--property=MemoryCurrent",
                                      "--value"], capture_output=True, text=True, check=False).stdout.strip()
                if out.isdigit():
                    self.peak[name] = max(self.peak[name], int(out))
            with open("/proc/meminfo", encoding="ascii") as handle:
                available = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("MemAvailable:"))
            self.lowest_available = min(self.lowest_available, available)
            self.done.wait(1.0)

    def stop(self) -> str:
        self.done.set()
        self.thread.join()
        peaks = ", ".join(f"{name} {peak / 2**30:.2f} GiB" for name, peak in self.peak.items())
        lowest = self.lowest_available / 2**30
        return f"peak per server (MemoryCurrent) {peaks}; the machine's lowest MemAvailable {lowest:.1f} GiB"


class Load:
    """molecule/resources/loadgen.py through the router on the test network, bounded in requests and time."""

    def __init__(self, tmp: Path, ca: Path | None = None) -> None:
        """``ca``: the router serves https, verified against it."""
        tmp.mkdir(parents=True, exist_ok=True)
        self.stop_file, self.events = tmp / "stop", tmp / "events.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, str(PROJECT / "molecule/resources/loadgen.py"),
             "--router", f"{'https' if ca else 'http'}://{ip(ROUTER)}:30080", *(["--ca", str(ca)] if ca else []),
             "--expect", "2", "--concurrency", "2", "--max-requests", "6000", "--max-seconds", "900",
             "--stop-file", str(self.stop_file), "--events", str(self.events)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def finish(self) -> tuple[dict[str, int], str]:
        self.stop_file.touch()
        out, _stderr = self.proc.communicate(timeout=120)
        match = re.search(r"^LOAD SUMMARY sent=(\d+) ok=(\d+) failed=(\d+) min_healthy=(\d+)/2$", out, re.M)
        assert match, out
        assert "LOAD BUDGET SPENT" not in out, "the load's request budget ran out before the roll ended"
        return dict(zip(("sent", "ok", "failed", "min_healthy"), map(int, match.groups()), strict=True)), out

    def router_events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.events.read_text().splitlines()] if self.events.exists() else []


def test_6_a_change_rolls_across_both_servers_behind_the_real_router_without_a_failed_request(
        host: Any, tmp_path: Path) -> None:
    before = {name: invocation(name) for name in WORKERS}
    memory = Memory()
    load = Load(tmp_path)
    wait_for("the load's first answers", lambda: load.events.exists() or load.proc.poll() is not None, 60)
    # New on both: the first runs --schedule-policy lpm (drills 3-5), the second the scenario's own arguments.
    rc, out, seconds = deploy(*with_args(**{"schedule-conservativeness": 0.9}))
    summary, load_out = load.finish()
    used = memory.stop()
    print(load_out)
    assert rc == 0, why(out)
    assert summary["failed"] == 0 and summary["sent"] > 20, summary
    assert summary["min_healthy"] >= 1, summary
    events = [(e["url"].split("//")[1].split(":")[0], e["event"]) for e in load.router_events()
              if e["event"] in ("removed", "added")]
    assert events == [(WORKERS[0], "removed"), (WORKERS[0], "added"), (WORKERS[1], "removed"),
                      (WORKERS[1], "added")], events
    for name in WORKERS:
        argv = running_argv(name)
        assert argv[argv.index("--schedule-conservativeness") + 1] == "0.9", argv
        assert "--schedule-policy" not in argv, argv
        assert invocation(name) != before[name]
    # The fixtures' drain: the second server's, which the router had emptied, as every roll drains a server.
    drained = invocation_log(WORKERS[1], before[WORKERS[1]])
    assert "Gracefully exiting... Remaining number of requests 0." in drained, drained[-2000:]
    record("drain-0.5.23-cpu.log", drained[drained.rindex("\n", 0, drained.index("SIGTERM received")) + 1:])
    print(f"MEASURED engine drill 6 roll behind the router: sglang {version(WORKERS[0])} (server_info); 2 servers, "
          f"one at a time: {seconds:.1f} s wall; load {summary['sent']} requests, {summary['failed']} failed, at "
          f"least {summary['min_healthy']}/2 healthy; {used}")


# --- 7. Prometheus on the real /metrics -------------------------------------------------------------------------

PROMETHEUS_HOME = "/etc/sglang-test-prometheus"
PROMETHEUS_PORT = 9090
# The production rules with thresholds a test reaches in seconds (the rules' logic is unchanged).
SCALED = {"sglang_monitoring_load_budget": 4, "sglang_monitoring_token_usage": 0.5,
          "sglang_monitoring_queue_depth": 2, "sglang_monitoring_saturated_for": "2s",
          "sglang_monitoring_router_workers_for": "2s", "sglang_monitoring_router_down_for": "2s",
          "sglang_monitoring_drift_for": "2s", "sglang_monitoring_node_job": ""}
PROMETHEUS_CONFIG = """global: {scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 1s}
rule_files: [%(here)s/sglang-alerts.yml]
scrape_configs:
  - job_name: sglang-deploy   # each target group sets its own job (sglang, sglang-router)
    file_sd_configs: [{files: [%(here)s/sglang-targets.json]}]
"""


def prometheus_api(path: str, **params: str) -> Any:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"http://{ip(ROUTER)}:{PROMETHEUS_PORT}{path}{query}", timeout=10) as response:
        return json.load(response)


def firing(name: str, state: str | None = None) -> list[dict[str, Any]]:
    return [a for a in prometheus_api("/api/v1/alerts")["data"]["alerts"] if a["labels"]["alertname"] == name
            and (state is None or a["state"] == state)]


def gauge(text: str, name: str) -> float:
    """The largest series of a gauge in a scrape."""
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith((f"sglang:{name}{{", f"sglang:{name} "))]
    assert values, f"no sglang:{name} in the scrape"
    return max(values)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("monitoring")
    extra = [arg for key, value in SCALED.items() for arg in ("-e", f"{key}={value}")]
    rc, output, _seconds = run_playbook("playbooks/prometheus.yml", "-e", f"sglang_monitoring_output_dir={out}",
                                        *extra)
    assert rc == 0, why(output)
    (out / "prometheus.yml").write_text(PROMETHEUS_CONFIG % {"here": PROMETHEUS_HOME})
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: scripts/setup.sh installs Debian's prometheus package"
    on(ROUTER).check_output(f"mkdir -p {PROMETHEUS_HOME}")
    for path in [Path(binary), *out.iterdir()]:
        subprocess.run(["docker", "cp", str(path), f"{ROUTER}:{PROMETHEUS_HOME}/{path.name}"], check=True)
    on(ROUTER).check_output(
        f"systemd-run --unit=sglang-test-prometheus --collect {PROMETHEUS_HOME}/prometheus "
        f"--config.file={PROMETHEUS_HOME}/prometheus.yml --storage.tsdb.path={PROMETHEUS_HOME}/data "
        f"--web.listen-address=0.0.0.0:{PROMETHEUS_PORT}")
    try:
        wait_for("every target up", lambda: sorted(t["health"] for t in prometheus_api("/api/v1/targets")["data"]
                                                   ["activeTargets"]) == ["up"] * 3)
        yield out
    finally:
        on(ROUTER).run("systemctl stop sglang-test-prometheus")
        on(ROUTER).run(f"rm -rf {PROMETHEUS_HOME}")


def test_7_prometheus_fires_on_a_real_saturation_and_clears(host: Any, prometheus: Path) -> None:
    name = WORKERS[1]
    # The steady fleet: every rule evaluated several times on the real series, nothing pending or firing.
    start = float(prometheus_api("/api/v1/query", query="time()")["data"]["result"][1])
    wait_for("six evaluations", lambda: float(prometheus_api("/api/v1/query", query="time()")["data"]["result"][1])
             > start + 6)
    assert prometheus_api("/api/v1/alerts")["data"]["alerts"] == []
    scrape = http(name, "/metrics").decode()
    record("metrics-0.5.23-cpu.txt", scrape)
    pool = int(gauge(scrape, "max_total_num_tokens"))
    # Eight requests of 900 prompt tokens and 200 more to generate want twice the 4,096-token pool: SGLang admits
    # what fits (three) and queues the rest, and the prompts fill the pool as soon as they are prefilled. Once the
    # scrape shows it saturated, the engine is held in place, so the state lasts until Prometheus has seen it for
    # the rule's 2 s however fast or slow this machine computes; then the requests go on and end.
    # Each prompt its own tokens: the radix cache would share a common prefix, and the pool would not fill.
    bodies = [{"input_ids": [3 + (index * 61 + position) % 500 for position in range(900)],
               "sampling_params": {"max_new_tokens": 200, "ignore_eos": True}} for index in range(8)]
    requests = [threading.Thread(target=http, args=(name, "/generate", body, 600), daemon=True) for body in bodies]
    began = time.time()
    for thread in requests:
        thread.start()

    def saturated() -> bool:
        text = http(name, "/metrics").decode()
        return gauge(text, "token_usage") > 0.5 and gauge(text, "num_queue_reqs") > 2

    wait_for("a saturated pool with requests queued", saturated, 300)
    http(name, "/pause_generation", {"mode": "in_place"}, key=ADMIN_KEY)
    try:
        fired = wait_for("SGLangKVCacheSaturated firing", lambda: firing("SGLangKVCacheSaturated", "firing"), 120)
        fired_after = time.time() - began
    finally:
        http(name, "/continue_generation", {}, key=ADMIN_KEY)
    assert fired[0]["labels"]["sglang_host"] == name, fired
    for thread in requests:
        thread.join(600)
    wait_for("SGLangKVCacheSaturated to clear", lambda: not firing("SGLangKVCacheSaturated"), 120)
    cleared_after = time.time() - began
    print(f"MEASURED engine drill 7 Prometheus: sglang {version(name)} (server_info); 8 requests of 900 + 200 "
          f"tokens against a {pool}-token pool: SGLangKVCacheSaturated fired {fired_after:.1f} s after they began "
          f"(value {fired[0]['value']}) and cleared {cleared_after:.1f} s after, once they ended; the steady fleet "
          "fired nothing")


# --- 8. calibration from the real log ----------------------------------------------------------------------------

def test_8_the_plan_calibrates_from_the_real_log_and_refuses_another_models(host: Any, tmp_path: Path) -> None:
    name = WORKERS[0]
    real = tmp_path / "real-start.log"
    real.write_text(invocation_log(name, invocation(name)))
    plan = tmp_path / "plan.json"
    # plan.yml reads no host: the inventory describes it (group_vars/sglang_workers.yml), and the free memory,
    # which the deploy reads on the host, is given as an operator would write it down.
    available = int(on(name).check_output("awk '/^MemAvailable:/ {print $2}' /proc/meminfo")) // 2**20
    host = ["-e", f"sglang_host_memory_available_gb={available}"]
    rc, out, _seconds = run_playbook("playbooks/plan.yml", "--limit", name, "-e", f"sglang_startup_log={real}",
                                     "-e", f"plan_json={plan}", *host,
                                     *with_args(**{"schedule-conservativeness": 0.9}))
    assert rc == 0, why(out)
    result = json.loads(plan.read_text())[name]
    served = server_info(name)
    assert result["calibrated"] is True, result
    assert result["device_kv_tokens"] == served["max_total_num_tokens"], (result, served["max_total_num_tokens"])
    other = PROJECT / "tests/fixtures/sglang-logs/startup-0.5.23.log"
    rc, refused, _seconds = run_playbook("playbooks/plan.yml", "--limit", name, "-e", f"sglang_startup_log={other}",
                                         *host)
    assert rc != 0, "a log of another model was accepted:\n" + why(refused)
    assert ("is not a start of this configuration (the model: the log loaded KimiK25ForConditionalGeneration, the "
            "plan is for LlamaForCausalLM") in refused, why(refused)
    print(f"MEASURED engine drill 8 calibration: sglang {served['version']} (server_info); plan.yml with the real "
          f"log: calibrated {result['calibrated']}, {result['device_kv_tokens']} KV tokens = the server's own "
          f"max_total_num_tokens {served['max_total_num_tokens']}; a Kimi-K2.5 log refused, naming the model")


# --- 9. a live change -------------------------------------------------------------------------------------------

LIVE_KEY = "speculative_accept_threshold_single"
# The fleet as drill 6 left it (its rolled change): a deploy that gives less would restart the server for that.
AS_LEFT = with_args(**{"schedule-conservativeness": 0.9})


def held(name: str) -> list[Any]:
    """What every data-parallel rank of the server holds of the live setting (/server_info internal_states)."""
    return [state.get(LIVE_KEY) for state in server_info(name)["internal_states"]]


def test_9_a_live_change_keeps_the_server_and_reads_back_its_value(host: Any) -> None:
    """SGLang 0.5.23 takes the speculative acceptance thresholds at runtime (POST /set_internal_state): the deploy
    sets the new value, reads it back from /server_info and writes it in the unit for the next start, without a
    drain or a restart; a rerun does nothing; taking the setting out returns the server to SGLang's default live."""
    name = WORKERS[0]
    before, started = invocation(name), starts(name)
    assert held(name) == [1.0], held(name)
    rc, out, seconds = deploy("--limit", name, *AS_LEFT, "-e", "sglang_speculative_accept_threshold_single=0.7")
    assert rc == 0, why(out)
    assert re.search(rf"Changed live, not drained, not restarted \(expected downtime 0 s\): {name} \(live: "
                     rf"{LIVE_KEY} 1.0 -> 0.7 through POST /set_internal_state", out), why(out)
    assert f"LIVE {LIVE_KEY}=0.7 set and read back from /server_info; no restart" in out, why(out)
    assert invocation(name) == before and starts(name) == started, "the live change restarted the server"
    assert held(name) == [0.7], held(name)
    unit = on(name).file(UNIT_PATH).content_string
    assert "--speculative-accept-threshold-single 0.7" in unit, unit
    assert "--speculative-accept-threshold-single" not in running_argv(name)  # the launch's argv is the old one
    assert show(name, "NeedDaemonReload")["NeedDaemonReload"] == "no"
    rc, rerun, rerun_seconds = deploy("--limit", name, *AS_LEFT, "-e",
                                      "sglang_speculative_accept_threshold_single=0.7")
    assert rc == 0, why(rerun)
    assert recap(rerun, name)["changed"] == 0 and "Changed live" not in rerun, why(rerun)
    rc, back, back_seconds = deploy("--limit", name, *AS_LEFT)
    assert rc == 0, why(back)
    assert f"{LIVE_KEY} 0.7 -> 1.0" in back, why(back)
    assert invocation(name) == before and starts(name) == started and held(name) == [1.0], held(name)
    assert "--speculative-accept-threshold-single" not in on(name).file(UNIT_PATH).content_string
    print(f"MEASURED engine drill 9 live change: sglang {version(name)} (server_info); {LIVE_KEY} 1.0 -> 0.7 set "
          f"through POST /set_internal_state and read back 0.7 from /server_info in a {seconds:.1f} s deploy, "
          f"InvocationID unchanged, 0 restarts; rerun changed 0 in {rerun_seconds:.1f} s; back to 1.0 live in "
          f"{back_seconds:.1f} s; through the admin key (the server has one: ADMIN_OPTIONAL takes no other)")


# --- 10. presharded weights --------------------------------------------------------------------------------------

def invocations(name: str) -> list[str]:
    """The unit's invocations, oldest first (journalctl)."""
    seen: list[str] = []
    for entry in journal(name):
        value = entry.get("_SYSTEMD_INVOCATION_ID")
        if value and value not in seen:
            seen.append(value)
    return seen


def weight_seconds(log: str) -> str:
    found = re.search(r"Load weight end\. elapsed=([\d.]+) s", log)
    return found.group(1) if found else "?"


def test_10_the_first_start_dumps_presharded_weights_and_every_later_start_loads_them(host: Any) -> None:
    """The scenario's servers run with sglang_presharded (group_vars/sglang_workers.yml), as an operator opts in:
    the first start (drill 1) dumps each rank's weights under /var/lib/sglang/presharded/<key>/ with SGLang's READY
    file, and every later start (drills 3 to 6) loads the dump. No restart of its own: it reads the starts the drills
    made, then status.yml, which says the dump is ready and for which key, with the load-speed advice."""
    name, root = WORKERS[0], "/var/lib/sglang/presharded"
    argv = running_argv(name)
    assert argv[argv.index("--load-format") + 1] == "presharded", argv
    dump = json.loads(argv[argv.index("--model-loader-extra-config") + 1])["presharded_path"]
    assert re.fullmatch(rf"{root}/[0-9a-f]{{16}}", dump), dump
    loads = [(i, log) for i in invocations(name) if "Load weight begin" in (log := invocation_log(name, i))]
    assert len(loads) >= 3, [i for i, _log in loads]
    first = re.search(r"No presharded checkpoint at (\S+); doing first-time load and dump\.", loads[0][1])
    assert first and first.group(1).startswith(dump + "/TP-1-sig-"), loads[0][1][-3000:]
    assert on(name).file(first.group(1) + "/READY").exists
    assert (on(name).file(root).user, on(name).file(root).mode) == ("sglang", 0o750)
    for invocation_id, log in loads[1:]:
        assert f"Loading from presharded checkpoint at {first.group(1)}" in log, (invocation_id, log[-3000:])
    rc, out, _seconds = run_playbook("playbooks/status.yml")  # its report play runs on localhost: no --limit
    assert rc == 0, why(out)
    key = dump.rsplit("/", 1)[1]
    assert f"{name}: presharded: ready, key {key}" in out, why(out)
    advice = re.search(rf"{name}: LOAD SPEED: ([^\n\\\"]+)", out)
    assert advice, why(out)
    print(f"MEASURED engine drill 10 presharded: sglang {version(name)} (server_info); the first start dumped to "
          f"{first.group(1)} (SGLang's weight load {weight_seconds(loads[0][1])} s), the {len(loads) - 1} later "
          f"starts loaded it (weight loads {', '.join(weight_seconds(log) + ' s' for _i, log in loads[1:])}); "
          f"status: ready, key {key}; advice: {advice.group(1)[:160]}")


# --- 11. the keys ------------------------------------------------------------------------------------------------

GENERATE = {"text": "The capital of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 4}}


def test_11_the_server_takes_its_client_key_for_inference_and_only_its_admin_key_for_admin_endpoints(
        host: Any) -> None:
    """The secrets file's keys reached SGLang (api-key, admin-api-key: the spellings its merger and parser accept),
    and SGLang's own auth (0.5.23 srt/utils/auth.py decide_request_auth) applies them: /generate is NORMAL (the
    client key), /flush_cache ADMIN_OPTIONAL (with an admin key set, only that one). The router, which registers each
    server with its key (role sglang_router), still serves through both."""
    name = WORKERS[0]
    url = f"http://{ip(name)}:30000"
    codes = {
        "/generate without a key": status(url + "/generate", GENERATE),
        "/generate with a wrong key": status(url + "/generate", GENERATE, key="not-" + CLIENT_KEY),
        "/generate with the client key": status(url + "/generate", GENERATE, key=CLIENT_KEY),
        "/flush_cache without a key": status(url + "/flush_cache", {}),
        "/flush_cache with the client key": status(url + "/flush_cache", {}, key=CLIENT_KEY),
        "/flush_cache with the admin key": status(url + "/flush_cache", {}, key=ADMIN_KEY),
        "/health_generate without a key": status(url + "/health_generate"),
        "/metrics without a key": status(url + "/metrics"),
    }
    assert codes["/generate without a key"] == 401, codes
    assert codes["/generate with a wrong key"] == 401, codes
    assert codes["/generate with the client key"] == 200, codes
    assert codes["/flush_cache without a key"] in (401, 403), codes
    assert codes["/flush_cache with the client key"] in (401, 403), codes
    assert codes["/flush_cache with the admin key"] == 200, codes
    assert codes["/health_generate without a key"] == 200 and codes["/metrics without a key"] == 200, codes
    # The secrets file the deploy wrote: the flags' own spellings, 0640 root:sglang, and no key on the command line.
    secrets = on(name).file("/etc/sglang/kimi.secrets.yaml")
    assert (secrets.user, secrets.group, secrets.mode) == ("root", "sglang", 0o640)
    assert re.search(r"^api-key: ", secrets.content_string, re.M), "the secrets file does not write api-key"
    assert re.search(r"^admin-api-key: ", secrets.content_string, re.M)
    argv = running_argv(name)
    assert CLIENT_KEY not in " ".join(argv) and ADMIN_KEY not in " ".join(argv), "a key is on the command line"
    # Through the router (no key of its own here): it sends each server's key, so both answer.
    served = [status(f"http://{ip(ROUTER)}:30080/generate", GENERATE, timeout=120)
              for _attempt in range(4)]  # round robin: each server twice
    assert served == [200] * 4, served
    print(f"MEASURED engine drill 11 keys: sglang {version(name)} (server_info); {codes}; through the router "
          f"(round robin, no client key of its own): {served} (it sends each server's own key)")


# --- 12. the allow-list ------------------------------------------------------------------------------------------

CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection((sys.argv[1], 30000), timeout=5).close()\n"
           "except OSError as error:\n"
           "    print(f'refused: {error!r}'); sys.exit(1)\n"
           "print('connected')\n")


def connects(source: str, target: str) -> tuple[bool, str]:
    """Whether a TCP connection from inside container ``source`` to ``target``'s server port succeeds (5 s)."""
    proc = subprocess.run(["docker", "exec", source, "python3", "-c", CONNECT, ip(target)], capture_output=True,
                          text=True, check=False, timeout=60)
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def test_12_a_host_not_on_the_allow_list_cannot_reach_the_server_port_and_the_router_can(host: Any) -> None:
    """The unit's own firewall (IPAddressDeny=any, IPAddressAllow= loopback, the routers, Prometheus; role
    sglang_service): the second server is on no allow-list of the first, the router is. A real connection from inside
    each container, as a stranger on the LAN would make it. The firewall is built on branch `firewall` (issue 48):
    without it the stranger connects and this drill fails, as it must."""
    target, stranger = WORKERS[0], WORKERS[1]
    router_ok, router_said = connects(ROUTER, target)
    stranger_ok, stranger_said = connects(stranger, target)
    print(f"MEASURED engine drill 12 allow-list: {ROUTER} -> {target}:30000 {router_said}; {stranger} -> "
          f"{target}:30000 {stranger_said}")
    assert router_ok, f"the router cannot reach {target}:30000: {router_said}"
    assert not stranger_ok, f"{stranger}, on no allow-list, reached {target}:30000: the port is open to the network"


# --- what the real server gave, against the fixtures the simulator is held to ------------------------------------

def families(scrape: str) -> dict[str, tuple[str, frozenset[str]]]:
    """Metric family -> (type, label names) of a Prometheus text scrape."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", scrape, re.M))
    labels: dict[str, set[str]] = {}
    for sample, inner in re.findall(r"^([^#\s{]+)\{([^}]*)\}", scrape, re.M):
        family = next((f for f in types if sample == f or sample.startswith(f + "_")), sample)
        labels.setdefault(family, set()).update(re.findall(r'(\w+)="', inner))
    return {family: (kind, frozenset(labels.get(family, set()) - {"le", "quantile"})) for family, kind in types.items()}


# What the package reads of SGLang's /metrics (alert rules, dashboard, status, the drain): in every scrape.
READ = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:num_used_tokens",
        "sglang:max_total_num_tokens", "sglang:gen_throughput", "sglang:cache_hit_rate")


def test_the_recorded_engine_matches_the_committed_fixtures(host: Any) -> None:
    """The fixtures were recorded from this scenario; a new SGLang build or a changed stack shows here first. A
    family that only a kind of request creates (streaming's inter-token latency) may be missing from a scrape."""
    live, fixed = (RECORDED / "metrics-0.5.23-cpu.txt").read_text(), (FIXTURES / "metrics-0.5.23-cpu.txt").read_text()
    refresh = "refresh: cp .cache/engine-recorded/* tests/fixtures/sglang-engine/ (see its README.md)"
    found, recorded = families(live), families(fixed)
    lacking = sorted(set(found) - set(recorded))
    assert not lacking, f"families the fixture lacks: {lacking}; {refresh}"
    assert {name: found[name] for name in found} == {name: recorded[name] for name in found}, refresh
    assert set(READ) <= set(found) & set(recorded)
    markers = ("Load weight begin", "Load weight end", "KV Cache is allocated", "max_total_num_tokens=",
               "server_args={", "The server is fired up and ready to roll!")
    for path in ("startup-0.5.23-cpu.log",):
        for marker in markers:
            assert marker in (RECORDED / path).read_text() and marker in (FIXTURES / path).read_text(), marker


# --- 14. TLS: the real server serves https only, and the real router verifies it ------------------------------------
# (Before drill 13, which then also reads this drill's output; last of the server drills: the servers stay on https.)

def https_status(url: str, ca: Path, body: dict[str, Any] | None = None, key: str | None = CLIENT_KEY) -> int:
    """The status of a call over https, verified against ``ca`` (a failed verification raises)."""
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(_request(url, body, key), timeout=120, context=context) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def refused(call: Callable[[], Any]) -> str:
    """What a call that must not be served raised ('' when it was served)."""
    try:
        call()
    except (OSError, HTTPException) as error:  # URLError, ssl.SSLError, a reset: all OSError (the module's http()
        # shadows the http package: its exception is imported by name)
        return type(error).__name__
    return ""


def tls_server_codes(name: str, pki: Any, stranger: Any, key_lines: list[str], before: str) -> dict[str, Any]:
    """Drill 14's checks of one server after the switch: restarted onto its certificate and key, the key private,
    https only, with its keys, against its CA only."""
    assert invocation(name) != before, f"{name} did not restart onto TLS"
    argv = running_argv(name)
    assert argv[argv.index("--ssl-certfile") + 1] == "/etc/sglang/kimi.tls.crt", argv
    assert argv[argv.index("--ssl-keyfile") + 1] == "/etc/sglang/kimi.tls.key", argv
    assert not [line for line in key_lines if line in " ".join(argv)]
    key_file = on(name).file("/etc/sglang/kimi.tls.key")
    assert (key_file.user, key_file.group, key_file.mode) == ("root", "sglang", 0o640)
    url = f"https://{ip(name)}:30000"
    codes = {
        "https /generate with the client key": https_status(url + "/generate", pki.ca, GENERATE),
        "https /generate without a key": https_status(url + "/generate", pki.ca, GENERATE, key=None),
        "plain http": refused(lambda: status(f"http://{ip(name)}:30000/health", timeout=30)),
        "https against another CA": refused(lambda: https_status(url + "/health", stranger.ca)),
    }
    assert codes["https /generate with the client key"] == 200, codes
    assert codes["https /generate without a key"] == 401, codes
    assert codes["plain http"] and codes["https against another CA"], codes
    return codes


def listed_healthy(scheme: str, router_ca: Path | None = None) -> dict[str, bool]:
    """The router's list, when it holds both servers at their ``scheme`` addresses, healthy (else an AssertionError
    naming it); the router itself over https, verified against ``router_ca``, when given."""
    url = f"{'https' if router_ca else 'http'}://{ip(ROUTER)}:30080/workers"
    context = ssl.create_default_context(cafile=str(router_ca)) if router_ca else None
    with urllib.request.urlopen(url, timeout=30, context=context) as answer:
        now = {w["url"].rstrip("/"): bool(w.get("is_healthy")) for w in json.loads(answer.read())["workers"]}
    assert set(now) == {f"{scheme}://{name}:30000" for name in WORKERS} and all(now.values()), now
    return now


def router_invocation() -> str:
    return on(ROUTER).check_output("systemctl show sglang-router --property=InvocationID --value")


class Tls(NamedTuple):
    """Drills 14 and 15: the servers' PKI and the router's, and the -e files that turn each on."""

    server: Pki
    router: Pki
    stranger: Pki
    server_vars: Path
    router_vars: Path

    @staticmethod
    def key_lines(pki: Pki) -> list[str]:
        return [line for line in pki.key.read_text().splitlines() if line and not line.startswith("-----")]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    """Certificates for the servers (by their names and addresses, and 127.0.0.1 for the host's own calls) and for
    the router (likewise), each from a CA of its own, and the variables that give them to the deploy: the router's
    file also trusts the servers' CA ahead (sglang_router_worker_ca)."""
    tmp = tmp_path_factory.mktemp("tls")

    def names(hosts: list[str]) -> list[x509.GeneralName]:
        return ([x509.DNSName(name) for name in [*hosts, "localhost"]]
                + [x509.IPAddress(ipaddress.ip_address(a)) for a in ["127.0.0.1", *(ip(name) for name in hosts)]])

    server = make_pki(tmp / "server", "engine", names(WORKERS))
    router = make_pki(tmp / "router", "router", names([ROUTER]))
    files = []
    for label, prefix, pki in (("server", "sglang_tls", server), ("router", "sglang_router_tls", router)):
        path = tmp / f"{label}-tls.yml"
        given = {f"{prefix}_cert": pki.cert.read_text(), f"{prefix}_key": pki.key.read_text(),
                 f"{prefix}_ca": pki.ca.read_text()}
        if label == "router":
            given["sglang_router_worker_ca"] = server.ca.read_text()
        path.write_text(yaml.safe_dump(given))
        path.chmod(0o600)
        files.append(path)
    return Tls(server, router, make_pki(tmp / "stranger", "stranger"), *files)


def test_14_the_router_serves_https_with_its_own_certificate_and_trusts_the_servers_ca_ahead(
        host: Any, tls: Tls) -> None:
    """sglang_router_tls_cert/_key/_ca and sglang_router_worker_ca (role sglang_router): one deploy of the routers
    (--tags router: the servers keep whatever the drills before left them running) restarts the router onto https
    (its --tls-cert-path/--tls-key-path; the launcher registers the servers against the router's CA), with the
    servers' CA in its CA file already (--ca-cert-paths, SSL_CERT_FILE), and restarts no server; the deploy's own
    calls (the liveness wait, the worker module, the rollout's drain and rejoin) reach it on https://127.0.0.1
    against its CA. The servers still serve plain http, listed and healthy."""
    servers = {name: invocation(name) for name in WORKERS}
    rc, out, seconds = deploy("--tags", "router", "-e", f"@{tls.router_vars}")
    assert rc == 0, why(out)
    assert {name: invocation(name) for name in WORKERS} == servers, "a server restarted for the router's TLS"
    assert not [line for line in tls.key_lines(tls.router) if line in out], "the router's key in the Ansible output"
    router = f"{ip(ROUTER)}:30080"
    codes = {
        "https /liveness against its CA": https_status(f"https://{router}/liveness", tls.router.ca, key=None),
        "plain http": refused(lambda: status(f"http://{router}/liveness", timeout=30)),
        "https against another CA": refused(lambda: https_status(f"https://{router}/liveness", tls.stranger.ca)),
    }
    assert codes["https /liveness against its CA"] == 200 and codes["plain http"], codes
    assert codes["https against another CA"], codes
    key_file = on(ROUTER).file("/etc/sglang-router/tls.key")
    assert (key_file.user, key_file.group, key_file.mode) == ("root", "sglang-router", 0o640)
    unit = on(ROUTER).check_output("systemctl show sglang-router --property=ExecStart --property=Environment")
    assert "--tls-cert-path" in unit and not [line for line in tls.key_lines(tls.router) if line in unit], unit
    assert "--ca-cert-paths" in unit and "SSL_CERT_FILE=/etc/sglang-router/workers-ca.pem" in unit, unit
    ca_file = on(ROUTER).file("/etc/sglang-router/workers-ca.pem")
    assert ca_file.exists and ca_file.content_string.strip() == tls.server.ca.read_text().strip()
    urls = sorted(wait_for("the router to list both servers over plain http, healthy",
                           lambda: listed_healthy("http", tls.router.ca), 120))
    print(f"MEASURED engine drill 14 TLS router: the router restarted onto https in {seconds:.1f} s with the "
          f"servers' CA trusted ahead, no server restarted; {codes}; it lists {urls}, healthy")


def test_15_tls_servers_roll_onto_https_behind_the_https_router_without_a_failure_or_a_router_restart(
        host: Any, tls: Tls, tmp_path: Path) -> None:
    """sglang_tls_cert/_key/_ca (role sglang) on both servers, rolled by one deploy under load through the https
    router that trusts their CA already (drill 14): SGLang's uvicorn serves https only with the certificate
    (--ssl-certfile, --ssl-keyfile; --ssl-ca-certs verifies its own warm-up), the readiness wait reaches it over
    https against the CA, the rollout drains each server at its plain address and adds it back over https; the
    router does not restart, so not one request fails; it serves through both, healthy, through its periodic health
    checks; the key is on no command line and in no output."""
    served_version = version(WORKERS[0])  # over plain HTTP, before the change
    before = {name: invocation(name) for name in WORKERS}
    router_before = router_invocation()
    load = Load(tmp_path, ca=tls.router.ca)  # bounded load through the https router, as drill 6
    wait_for("the load's first answers", lambda: load.events.exists() or load.proc.poll() is not None, 60)
    rc, out, seconds = deploy("-e", f"@{tls.server_vars}", "-e", f"@{tls.router_vars}")
    summary, load_out = load.finish()
    print(load_out)
    assert rc == 0, why(out)
    assert summary["failed"] == 0 and summary["sent"] > 20, summary
    assert summary["min_healthy"] >= 1, summary
    assert router_invocation() == router_before, "the router restarted for the servers' switch"
    moves = [(e["url"], e["event"]) for e in load.router_events() if e["event"] in ("removed", "added")]
    assert moves == [(f"{scheme}://{name}:30000", event) for name in WORKERS
                     for scheme, event in (("http", "removed"), ("https", "added"))], moves
    key_lines = tls.key_lines(tls.server)
    assert not [line for line in key_lines if line in out], "the TLS key reached the Ansible output"
    codes = {name: tls_server_codes(name, tls.server, tls.stranger, key_lines, before[name]) for name in WORKERS}
    # Healthy, and still healthy after the router's periodic health checks (every 2 s here): sglang-router 0.3.2
    # checks health with a client that ignores --ca-cert-paths, so the unit also names the file in SSL_CERT_FILE.
    urls = sorted(wait_for("the router to list both servers over https, healthy",
                           lambda: listed_healthy("https", tls.router.ca), 120))
    router = f"https://{ip(ROUTER)}:30080/generate"
    served = [https_status(router, tls.router.ca, GENERATE, key=None) for _attempt in range(4)]
    assert served == [200] * 4, served
    assert sorted(listed_healthy("https", tls.router.ca)) == urls
    print(f"MEASURED engine drill 15 TLS servers: sglang {served_version}; both servers rolled onto https in "
          f"{seconds:.1f} s (one deploy, one restart each, no router restart) under load through the https router: "
          f"{summary['sent']} requests, {summary['failed']} failed, at least {summary['min_healthy']}/2 healthy; "
          f"the router's list: {moves}; {codes}; the router lists {urls}, healthy, and served {served} through "
          "them, verifying each against the CA file the role wrote")


# --- 13. no key in Ansible's output -------------------------------------------------------------------------------

def test_13_no_key_appears_in_the_ansible_output_of_any_drill(host: Any) -> None:
    """Every playbook run of this scenario is kept (resources/drill.py, .cache/drill-logs/engine/): none holds a
    key, in clear or escaped, although SGLang 0.5.23 prints both in its own startup line (server_args=...), which the
    readiness wait quotes on a failure (drill 5), masked."""
    outputs = sorted(LOGS.glob("*.log"))
    assert len(outputs) >= 10, f"only {len(outputs)} kept outputs in {LOGS}"
    forms = {form for key in (CLIENT_KEY, ADMIN_KEY) for form in (key, json.dumps(key)[1:-1], repr(key)[1:-1])}
    leaks = [(path.name, form) for path in outputs for form in forms if form in path.read_text(errors="replace")]
    assert not leaks, f"a key in the Ansible output: {leaks}"
    journal_lines = [line for line in invocation_log(WORKERS[0], invocation(WORKERS[0])).splitlines()
                     if CLIENT_KEY in line or ADMIN_KEY in line]
    where = sorted({"server_args" if "server_args=" in line else "another line" for line in journal_lines})
    masked = sum(path.read_text(errors="replace").count("********") for path in outputs)
    print(f"MEASURED engine drill 13 no key in the output: {len(outputs)} kept Ansible outputs "
          f"({sum(path.stat().st_size for path in outputs) / 1e6:.1f} MB), 0 with a key; {masked} masks "
          f"(********); SGLang's own journal of {WORKERS[0]}'s current start holds {len(journal_lines)} line(s) with "
          f"a key ({', '.join(where)})")
