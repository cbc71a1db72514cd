"""Steady generation load through an sglang-router, bounded in requests and time.

    loadgen.py --router http://ROUTER:30080 --expect 3 [--concurrency 4] [--max-requests 4000]
               [--max-seconds 300] [--stop-file PATH] [--events PATH] [--ca PATH]

Sends /generate requests from a few threads until the stop file appears or a bound is reached,
while polling the router's /workers every 0.5 s. Ends by printing one line:

    LOAD SUMMARY sent=N ok=N failed=N min_healthy=K/EXPECT

and, when any failed, how: ``LOAD FAILURES connection=N http=N other=N first=T last=T`` - connection: the
router did not answer or dropped the connection (its process was down); http: it answered with an error
status (no server could take the request); other: an empty or malformed reply; first and last: the times
(epoch seconds) of the first and last failure. When --max-requests ran out before the stop, the senders
end there (the worker list is still watched until the stop) and a line says so:
``LOAD BUDGET SPENT: ...``; a caller whose measurement needs load until its stop treats it as a failure.

and writes each change of the router's worker list (removed / added / healthy) with a timestamp to
--events as JSON lines. Only the given router URL is contacted. A router that requires a key gets it
from the environment variable SGLANG_ROUTER_API_KEY (not from argv), as a bearer token; its worker list
takes SGLANG_ROUTER_ADMIN_KEY when that is set (a router with a control-plane admin key refuses the clients' key
there). A router that serves https (role sglang_router's sglang_router_tls_*) is verified against --ca.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field


@dataclass
class Tally:
    sent: int = 0
    ok: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=lambda: {"connection": 0, "http": 0, "other": 0})
    failure_times: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, error: str | None, kind: str = "other") -> None:
        with self.lock:
            self.sent += 1
            if error is None:
                self.ok += 1
            else:
                self.failed += 1
                self.kinds[kind] += 1
                self.failure_times.append(time.time())
                if len(self.errors) < 20:
                    self.errors.append(error)

    def failures_line(self) -> str:
        times = self.failure_times or [0.0]
        return (f"LOAD FAILURES connection={self.kinds['connection']} http={self.kinds['http']} "
                f"other={self.kinds['other']} first={min(times):.1f} last={max(times):.1f}")


def failure_kind(exc: Exception) -> str:
    """http: the router answered with an error status; connection: it did not answer, or dropped the request."""
    if isinstance(exc, urllib.error.HTTPError):
        return "http"
    return "connection" if isinstance(exc, (urllib.error.URLError, OSError)) else "other"


CONTEXT: dict[str, ssl.SSLContext | None] = {"tls": None}  # set once by main() from --ca


def get_json(url: str, body: dict | None = None, timeout: float = 60,
             key_variable: str = "SGLANG_ROUTER_API_KEY") -> dict:
    """One call; the bearer token from the environment variable key_variable, else SGLANG_ROUTER_API_KEY; https
    verified against --ca."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(key_variable) or os.environ.get("SGLANG_ROUTER_API_KEY")
    if key:
        headers["Authorization"] = "Bearer " + key
    request = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET", headers=headers)
    with urllib.request.urlopen(request, timeout=timeout, context=CONTEXT["tls"]) as answer:
        return json.loads(answer.read().decode())


def generate_forever(args: argparse.Namespace, tally: Tally, stop: threading.Event, number: int) -> None:
    """Send requests until the stop, or until the request budget is spent: then this sender ends, and the
    router's worker list is still watched until the stop (the caller's timeline must not end early)."""
    i = 0
    while not stop.is_set():
        with tally.lock:
            if tally.sent >= args.max_requests:
                return
        i += 1
        prompt = f"load {number}-{i}: the capital of France is"
        kind = "other"
        try:
            reply = get_json(args.router + "/generate",
                             {"text": prompt, "sampling_params": {"max_new_tokens": args.tokens, "temperature": 0}})
            error = None if reply.get("meta_info", {}).get("completion_tokens", 0) >= 1 else f"empty reply {reply}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            error, kind = f"{type(exc).__name__}: {getattr(exc, 'code', '')} {exc}", failure_kind(exc)
        tally.record(error, kind)
        if kind == "connection" and error is not None:
            stop.wait(0.1)  # a client's pause before it tries a router that refused it again


def watch_workers(args: argparse.Namespace, stop: threading.Event, state: dict) -> None:
    """Poll the router's worker list every half second, and once more after the stop (whatever the machine's
    speed, the last change before the stop is then seen: the caller stops after the roll has ended)."""
    previous: dict[str, bool] | None = None  # None until the first answer, the baseline
    events = open(args.events, "a", encoding="utf-8") if args.events else None  # noqa: SIM115
    while True:
        final = stop.is_set()
        try:
            listing = get_json(args.router + "/workers", timeout=30 if final else 5,
                               key_variable="SGLANG_ROUTER_ADMIN_KEY")
            current = {w["url"]: bool(w.get("is_healthy")) for w in listing.get("workers", [])}
            healthy = sum(current.values())
            state["min_healthy"] = min(state.get("min_healthy", healthy), healthy)
            # The first answer is the baseline. (An empty list later, a restarted router's, is not: the
            # servers its launcher then registers are additions.)
            if previous is not None and events is not None:
                for url in sorted(set(previous) | set(current)):
                    before, after = previous.get(url), current.get(url)
                    if before != after:
                        what = "removed" if after is None else ("added" if before is None else
                                                                ("healthy" if after else "unhealthy"))
                        events.write(json.dumps({"t": time.time(), "url": url, "event": what}) + "\n")
                        events.flush()
            previous = current
        except (urllib.error.URLError, OSError, ValueError):
            if not final:  # a router that does not answer serves nothing; after the stop it only missed the poll
                state["min_healthy"] = 0
        if final:
            break
        stop.wait(0.5)
    if events is not None:
        events.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--router", required=True)
    parser.add_argument("--expect", type=int, required=True, help="servers the router should have")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--max-requests", type=int, default=4000)
    parser.add_argument("--max-seconds", type=float, default=300)
    parser.add_argument("--stop-file")
    parser.add_argument("--events")
    parser.add_argument("--ca", help="the CA file an https router is verified against")
    args = parser.parse_args()
    args.router = args.router.rstrip("/")
    CONTEXT["tls"] = ssl.create_default_context(cafile=args.ca) if args.ca else None
    tally, stop, state = Tally(), threading.Event(), {}
    threads = [threading.Thread(target=watch_workers, args=(args, stop, state), daemon=True)]
    threads += [threading.Thread(target=generate_forever, args=(args, tally, stop, n), daemon=True)
                for n in range(args.concurrency)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + args.max_seconds
    while not stop.is_set() and time.monotonic() < deadline:
        if args.stop_file and os.path.exists(args.stop_file):
            break
        time.sleep(0.2)
    stop.set()
    for thread in threads:
        thread.join(timeout=70)
    for error in tally.errors:
        print("LOAD ERROR", error)
    print(f"LOAD SUMMARY sent={tally.sent} ok={tally.ok} failed={tally.failed} "
          f"min_healthy={state.get('min_healthy', 0)}/{args.expect}", flush=True)
    if tally.failed:
        print(tally.failures_line(), flush=True)
    if tally.sent >= args.max_requests:
        print(f"LOAD BUDGET SPENT: all {args.max_requests} requests were sent before the stop", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
