"""SIGTERM drains like SGLang: health 503 at once, in-flight requests finish, new ones still served."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from helpers import wait_for
from sim_helpers import LaunchFn, Server, free_port, get_status, post_json, server_args


def generate_in_background(port: int, tokens: int) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["status"], result["body"] = post_json(
                port, "/generate", {"text": "drain me", "sampling_params": {"max_new_tokens": tokens}})
        except OSError as error:
            result["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def start_ready(launch: LaunchFn, model_dir: Path, **env: str) -> tuple[Server, int]:
    port = free_port()
    server = launch(server_args(model_dir, port, tp=2), SGLANG_SIM_TOKEN_SECONDS="0.01", **env)
    server.wait_ready()
    return server, port


def test_sigterm_drains_in_flight_requests_and_still_accepts_new_ones(launch: LaunchFn, model_dir: Path) -> None:
    server, port = start_ready(launch, model_dir)
    thread, result = generate_in_background(port, 200)  # about 2 s
    time.sleep(0.3)
    server.send(signal.SIGTERM)
    server.wait_log("SIGTERM received")
    assert get_status(port, "/health") == 503
    assert get_status(port, "/health_generate") == 503
    assert get_status(port, "/ping") == 200
    status, body = post_json(port, "/generate", {"text": "late", "sampling_params": {"max_new_tokens": 2}})
    assert status == 200
    assert body["meta_info"]["completion_tokens"] == 2
    assert server.running()
    server.wait_log("Gracefully exiting... Remaining number of requests 1.")
    assert server.wait_exit(10) == 0
    thread.join()
    assert result["status"] == 200
    assert result["body"]["meta_info"]["completion_tokens"] == 200
    log = server.stderr
    assert log.count("Gracefully exiting...") >= 3  # logged every 0.3 s while the request runs
    assert "Health check request received during shutdown. Returning 503." in log
    assert log.index("Remaining number of requests 1.") < log.index("Remaining number of requests 0.") \
        < log.index("INFO:     Finished server process")


def test_slow_drain_fault_delays_the_exit(launch: LaunchFn, model_dir: Path) -> None:
    server, port = start_ready(launch, model_dir, SGLANG_SIM_FAULT="slow_drain=1.5")
    thread, result = generate_in_background(port, 30)  # 0.3 s without the fault
    time.sleep(0.1)
    started = time.monotonic()
    server.send(signal.SIGTERM)
    assert server.wait_exit(10) == 0
    assert time.monotonic() - started >= 1.4
    thread.join()
    assert result["status"] == 200


def test_slow_exit_fault_delays_the_exit_after_the_drain(launch: LaunchFn, model_dir: Path) -> None:
    """No request in flight: the drain is over at once, the exit comes the fault's seconds later (a lower bound,
    which a busy machine only makes longer)."""
    server, _port = start_ready(launch, model_dir, SGLANG_SIM_FAULT="slow_exit=1.5")
    started = time.monotonic()
    server.send(signal.SIGTERM)
    assert server.wait_exit(30) == 0
    assert time.monotonic() - started >= 1.5
    log = server.stderr
    # The drain ends as SGLang's does: the last count is 0, the release (the fault's seconds), uvicorn's shutdown.
    assert log.count("Gracefully exiting... Remaining number of requests") == 1
    last_count = log.index("Remaining number of requests 0. Remaining requests remaining_rids=[].")
    assert log.index("SIGTERM received") < last_count < log.index("INFO:     Shutting down")


def test_force_shutdown_skips_the_drain(launch: LaunchFn, model_dir: Path) -> None:
    server, port = start_ready(launch, model_dir, SGL_FORCE_SHUTDOWN="1")
    thread, result = generate_in_background(port, 500)
    wait_for(lambda: server.stderr.count("Prefill batch") >= 2, 5, what="request admitted")  # warm-up + ours
    server.send(signal.SIGTERM)
    assert server.wait_exit() == 0
    thread.join()
    assert "status" not in result  # the request was cut, not finished
    assert "Gracefully exiting" not in server.stderr  # no drain
    assert "Signal SIGTERM received while force shutdown flag set. Force exiting." in server.stderr
