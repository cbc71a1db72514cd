"""The bounded load generator of the rolling drills, against a fake router on loopback: a change of the
router's workers made just before the stop is still in its events (it polls once more after the stop)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import loadgen  # molecule/resources, on pytest's pythonpath
from helpers import ROOT, send_json

LOADGEN = ROOT / "extensions/molecule/resources/loadgen.py"


class Router(BaseHTTPRequestHandler):
    workers: ClassVar[list[str]] = ["http://a:30000", "http://b:30000"]
    polled = threading.Event()  # the first listing (the load generator's baseline) has been served
    generated = threading.Semaphore(0)  # one release per generation served

    def reply(self, body: dict) -> None:
        send_json(self, 200, body)

    def do_GET(self) -> None:
        self.reply({"workers": [{"url": url, "is_healthy": True} for url in Router.workers]})
        Router.polled.set()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Router.generated.release()
        self.reply({"text": "Paris", "meta_info": {"completion_tokens": 1}})

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Watching:
    """A running load generator: stop it through its stop file, then read the router events it recorded."""
    proc: subprocess.Popen[str]
    stop_file: Path
    events_file: Path

    def stop(self) -> str:
        self.stop_file.touch()
        out, _err = self.proc.communicate(timeout=120)
        return out

    def events(self) -> list[tuple[str, str]]:
        return [(e["url"], e["event"]) for e in map(json.loads, self.events_file.read_text().splitlines())]


@contextmanager
def loadgen_on_a_fake_router(tmp_path: Path, concurrency: int = 1, max_requests: int = 100000) -> Iterator[Watching]:
    """The load generator against the fake router on loopback, the router's state fresh before and after."""
    Router.polled.clear()
    Router.generated = threading.Semaphore(0)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Router)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    events, stop = tmp_path / "events.jsonl", tmp_path / "stop"
    proc = subprocess.Popen([sys.executable, str(LOADGEN), "--router", f"http://127.0.0.1:{server.server_port}",
                             "--expect", "2", "--concurrency", str(concurrency), "--max-requests", str(max_requests),
                             "--max-seconds", "120", "--stop-file", str(stop), "--events", str(events)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield Watching(proc, stop, events)
    finally:
        if proc.poll() is None:  # a failed assertion before the stop: end the process this test started
            proc.kill()
            proc.communicate(timeout=120)
        server.shutdown()
        Router.workers = ["http://a:30000", "http://b:30000"]


def next_listing(what: str) -> None:
    """Wait until the load generator has been served one more worker listing."""
    Router.polled.clear()
    assert Router.polled.wait(timeout=120), what


def test_the_last_change_before_the_stop_is_recorded(tmp_path: Path) -> None:
    with loadgen_on_a_fake_router(tmp_path) as watching:
        assert Router.polled.wait(timeout=120), "the load generator never listed the workers"
        Router.workers = ["http://a:30000"]
        out = watching.stop()  # at once: only the poll after the stop can see b's removal
        recorded = watching.events()
    assert recorded == [("http://b:30000", "removed")], out
    assert "LOAD SUMMARY" in out and " failed=0 " in out, out


def test_failures_are_told_apart_by_whether_the_router_answered() -> None:
    refused = urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    dropped = http.client.RemoteDisconnected("Remote end closed connection without response")
    status = urllib.error.HTTPError("http://r/generate", 503, "Service Unavailable", {}, None)  # type: ignore[arg-type]
    assert [loadgen.failure_kind(exc) for exc in (refused, dropped, status, ValueError("not JSON"))] == [
        "connection", "connection", "http", "other"]
    tally = loadgen.Tally()
    tally.record(None)
    tally.record("refused", "connection")
    tally.record("503", "http")
    assert (tally.sent, tally.ok, tally.failed) == (3, 1, 2)
    assert tally.failures_line().startswith("LOAD FAILURES connection=1 http=1 other=0 first=")


def test_a_spent_request_budget_ends_the_requests_not_the_watch(tmp_path: Path) -> None:
    """With a budget of 5 requests, the senders end at once; the worker list is still watched, so a change
    made after the budget ran out is recorded, and the summary says the budget ran out before the stop."""
    with loadgen_on_a_fake_router(tmp_path, concurrency=2, max_requests=5) as watching:
        for _request in range(5):
            assert Router.generated.acquire(timeout=120), "the load generator did not spend its budget"
        # The budget is spent: the old generator stopped everything here. The list is still watched.
        next_listing("the load generator stopped listing the workers")
        Router.workers = ["http://b:30000"]
        out = watching.stop()
        recorded = watching.events()
    sent = int(out.split("LOAD SUMMARY sent=")[1].split()[0])
    assert 5 <= sent <= 6, out  # each sender checks the budget before it sends
    assert "LOAD BUDGET SPENT: all 5 requests were sent before the stop" in out, out
    assert recorded == [("http://a:30000", "removed")], out


def test_servers_listed_after_an_empty_list_are_additions(tmp_path: Path) -> None:
    """A restarted router answers with no server before its launcher registers them: the servers listed then
    are recorded as added (the first answer alone is the baseline)."""
    with loadgen_on_a_fake_router(tmp_path) as watching:
        assert Router.polled.wait(timeout=120), "the load generator never listed the workers"
        Router.workers = []
        for _poll in range(2):  # the listing after the change, once it has surely been served
            next_listing("the load generator stopped listing the workers")
        Router.workers = ["http://a:30000"]
        out = watching.stop()
        recorded = watching.events()
    assert recorded == [("http://a:30000", "removed"), ("http://b:30000", "removed"),
                        ("http://a:30000", "added")], out
