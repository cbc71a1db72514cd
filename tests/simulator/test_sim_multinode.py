"""Two nodes on loopback: rendezvous on --dist-init-addr, dummy health on node 1, NCCL-like failures."""

from __future__ import annotations

import time
from pathlib import Path

from helpers import wait_for
from sim_helpers import LaunchFn, Server, children_of, cmdline_title, free_port, get_status, port_open, server_args


def node(launch: LaunchFn, model_dir: Path, rank: int, dist_port: int, **env: str) -> Server:
    args = server_args(model_dir, free_port(), "--nnodes", "2", "--node-rank", str(rank),
                       "--dist-init-addr", f"127.0.0.1:{dist_port}")
    return launch(args, **env)


def titles(server: Server) -> list[str]:
    pids = wait_for(lambda: len(children_of(server.pid)) == 5 and children_of(server.pid), 10, what="children")
    wait_for(lambda: all(cmdline_title(pid).startswith("sglang::") for pid in pids), 5, what="titles")
    return sorted(cmdline_title(pid) for pid in pids)


def test_two_nodes_rendezvous_and_node_0_dies_last(launch: LaunchFn, model_dir: Path) -> None:
    dist_port = free_port()
    head = node(launch, model_dir, 0, dist_port)
    assert titles(head) == sorted([*(f"sglang::scheduler_TP{r}" for r in range(4)), "sglang::detokenizer"])
    time.sleep(1.5)  # longer than a whole load: node 0 waits for its peer in init
    assert "Load weight begin" not in head.stderr
    assert not port_open(head.port)

    peer = node(launch, model_dir, 1, dist_port)
    assert titles(peer) == sorted([*(f"sglang::scheduler_TP{r}" for r in range(4, 8)), "sglang::detokenizer"])
    head.wait_ready()
    wait_for(lambda: get_status(peer.port) == 200, 10, what="dummy health")
    assert get_status(peer.port, "/health_generate") == 200
    assert get_status(peer.port, "/generate") == 404
    assert "Multi-thread loading shards" not in peer.stderr  # tqdm only on global rank 0
    assert "TP7] Load weight end" in peer.stderr
    assert "max_total_num_tokens" not in peer.stderr

    head.proc.kill()
    assert peer.wait_exit() == 1
    assert "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting " \
           "prematurely." in peer.stderr
    assert "remote process exited or there was a network error" in peer.stderr


def test_node_0_exits_when_a_peer_drops(launch: LaunchFn, model_dir: Path) -> None:
    dist_port = free_port()
    head = node(launch, model_dir, 0, dist_port)
    peer = node(launch, model_dir, 1, dist_port)
    head.wait_ready()
    peer.proc.kill()
    assert head.wait_exit() == 1
    assert "DistBackendError: NCCL error" in head.stderr


def test_peer_gives_up_when_node_0_never_comes(launch: LaunchFn, model_dir: Path) -> None:
    peer = node(launch, model_dir, 1, free_port(), SGLANG_SIM_DIST_TIMEOUT="1")
    assert peer.wait_exit() == 1
    assert "torch.distributed.DistNetworkError: The client socket has timed out after 1000ms" in peer.stderr
