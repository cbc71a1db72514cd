"""Start to exit: closed port while loading, tqdm bar, named children, 503 until warm-up, clean exits."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from helpers import wait_for
from sim_helpers import (
    LaunchFn,
    alive,
    children_of,
    cmdline_title,
    comm,
    free_port,
    get_status,
    port_open,
    server_args,
    shards_drawn,
)

BAR_UPDATE = re.compile(
    r"Multi-thread loading shards: +(\d+)% Completed \| (\d+)/64 "
    r"\[\d\d:\d\d<(\d\d:\d\d|\?), +(\d+\.\d\d(it/s|s/it)|\?it/s)\] *"
)


def bar_segments(stderr: str) -> list[str]:
    start = stderr.index("\rMulti-thread loading shards")
    end = stderr.find("\n", start)
    return stderr[start + 1:end if end >= 0 else None].split("\r")


def test_load_keeps_port_closed_and_writes_a_tqdm_bar(launch: LaunchFn, model_dir: Path) -> None:
    port = free_port()
    server = launch(server_args(model_dir, port), SGLANG_SIM_LOAD_SECONDS="3", SGLANG_SIM_WARMUP_SECONDS="1")
    wait_for(lambda: shards_drawn(server.stderr) >= 16, 10, what="a quarter of the shards")
    mid = server.stderr
    assert not port_open(port)
    tail = mid[mid.rindex("\n") + 1:]
    assert tail.startswith("\rMulti-thread loading shards:   0% Completed | 0/64 [00:00<?, ?it/s]")
    assert tail.count("\r") >= 2
    assert "Load weight end" not in mid
    for rank in range(8):
        assert f" TP{rank}] Load weight begin. avail mem=94.10 GB\n" in mid

    wait_for(lambda: port_open(port), 10, what="port open")
    assert get_status(port) == 503
    assert "The server is fired up and ready to roll!" not in server.stderr
    server.wait_ready()
    log = server.wait_log("The server is fired up and ready to roll!")

    segments = bar_segments(log)
    assert all(BAR_UPDATE.fullmatch(s) for s in segments), segments[:3]
    drawn = [int(BAR_UPDATE.fullmatch(s).group(2)) for s in segments]
    # The 0/64 line, a redraw at most every 0.1 s (tqdm's mininterval: 35 ms a shard here), tqdm's final refresh.
    assert drawn[0] == 0 and drawn[-1] == 64 and drawn == sorted(drawn), drawn
    assert 4 <= len(drawn) < 66, drawn
    order = ["server_args={'model_path': ", "Init parallel begin.", "Init parallel ends. elapsed=",
             "Memory baseline taken. mem usage=0.00 GB", "Load weight begin.",
             "\rMulti-thread loading shards", "Load weight end. elapsed=",
             "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 154371, KV size: 10.10 GB",
             "Memory pool end. avail mem=",
             "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1",
             "Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 12, 16, 24, 32, 40, 48], elapsed=",
             "max_total_num_tokens=154371, chunked_prefill_size=8192", "Engine startup timings (s): load_weight=",
             "INFO:     Started server process", "INFO:     Uvicorn running on http://127.0.0.1:",
             "The server is fired up and ready to roll!"]
    positions = [log.index(text) for text in order]
    assert positions == sorted(positions)
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP7\] Capture target decode CUDA graph end", log, re.M)
    assert '"POST /generate HTTP/1.1" 200 OK' in server.stdout


def test_children_are_named_like_sglang_and_die_with_the_server(launch: LaunchFn, model_dir: Path) -> None:
    port = free_port()
    server = launch(server_args(model_dir, port))
    children = wait_for(lambda: len(children_of(server.pid)) == 9 and children_of(server.pid), 10, what="children")
    # The title is set in two steps (the kernel's comm, then argv in /proc/<pid>/cmdline): wait for both.
    wait_for(lambda: all(comm(pid).startswith("sglang::") and cmdline_title(pid).startswith("sglang::")
                         for pid in children), 5, what="titles")
    titles = sorted(cmdline_title(pid) for pid in children)
    assert titles == sorted([f"sglang::scheduler_TP{rank}" for rank in range(8)] + ["sglang::detokenizer"])
    assert sorted(comm(pid) for pid in children) == ["sglang::detoken"] + ["sglang::schedul"] * 8
    server.wait_ready()
    assert get_status(port, "/ping") == 200

    server.send(signal.SIGTERM)
    assert server.wait_exit() == 0
    wait_for(lambda: not any(alive(pid) for pid in children), 5, what="children gone")
    assert "SIGTERM received" in server.stderr


def test_one_rank_has_no_rank_in_its_log_prefix_or_process_title(launch: LaunchFn, model_dir: Path) -> None:
    """SGLang names the TP rank in a scheduler's log prefix and title only when tp_size > 1
    (0.5.23 managers/scheduler.py:6279-6294): "[<time>] Load weight begin...", "sglang::scheduler"."""
    server = launch(server_args(model_dir, free_port(), tp=1))
    children = wait_for(lambda: len(children_of(server.pid)) == 2 and children_of(server.pid), 10, what="children")
    wait_for(lambda: all(cmdline_title(pid).startswith("sglang::") for pid in children), 5, what="titles")
    assert sorted(cmdline_title(pid) for pid in children) == ["sglang::detokenizer", "sglang::scheduler"]
    server.wait_ready()
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Load weight begin\. avail mem=", server.stderr, re.M)
    assert " TP0]" not in server.stderr


def test_children_die_when_the_server_is_killed(launch: LaunchFn, model_dir: Path) -> None:
    server = launch(server_args(model_dir, free_port(), tp=2), SGLANG_SIM_LOAD_SECONDS="30")
    children = wait_for(lambda: len(children_of(server.pid)) == 3 and children_of(server.pid), 10, what="children")
    server.proc.kill()  # SIGKILL the main process only: PR_SET_PDEATHSIG takes the children
    server.wait_exit()
    wait_for(lambda: not any(alive(pid) for pid in children), 5, what="children gone")


def test_sigterm_while_loading_kills_at_once(launch: LaunchFn, model_dir: Path) -> None:
    server = launch(server_args(model_dir, free_port(), tp=2), SGLANG_SIM_LOAD_SECONDS="30")
    server.wait_log("Load weight begin")
    children = children_of(server.pid)
    server.send(signal.SIGTERM)
    assert server.wait_exit() == -signal.SIGTERM  # killed by the signal: no drain, no clean exit
    assert "Load weight end" not in server.stderr  # it did not finish its 30 s load first
    wait_for(lambda: not any(alive(pid) for pid in children), 5, what="children gone")


def test_sigint_after_ready_shuts_uvicorn_down(launch: LaunchFn, model_dir: Path) -> None:
    server = launch(server_args(model_dir, free_port(), tp=1))
    server.wait_ready()
    server.send(signal.SIGINT)
    assert server.wait_exit() == 0
    assert "INFO:     Finished server process" in server.stderr


def test_port_in_use_fails_like_uvicorn(launch: LaunchFn, model_dir: Path) -> None:
    port = free_port()
    first = launch(server_args(model_dir, port, tp=1))
    first.wait_ready()
    second = launch(server_args(model_dir, port, tp=1))
    assert second.wait_exit() == 1
    assert "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1'," in second.stderr


def test_a_scheduler_dying_after_ready_fails_health(launch: LaunchFn, model_dir: Path) -> None:
    port = free_port()
    server = launch(server_args(model_dir, port, tp=2))
    server.wait_ready()
    scheduler = next(pid for pid in children_of(server.pid) if cmdline_title(pid) == "sglang::scheduler_TP1")
    os.kill(scheduler, signal.SIGKILL)
    server.wait_log("Child process unexpectedly failed with exitcode=-9.")
    wait_for(lambda: get_status(port) == 503, 5, what="health 503")
    assert server.running()


def test_a_scheduler_dying_while_loading_stops_the_server(launch: LaunchFn, model_dir: Path) -> None:
    server = launch(server_args(model_dir, free_port(), tp=2), SGLANG_SIM_LOAD_SECONDS="30")
    server.wait_log("Load weight begin")
    scheduler = next(pid for pid in children_of(server.pid) if cmdline_title(pid) == "sglang::scheduler_TP1")
    os.kill(scheduler, signal.SIGKILL)
    assert server.wait_exit() == 1
    assert "Rank 1 scheduler is dead. Please check if there are relevant logs." in server.stderr
