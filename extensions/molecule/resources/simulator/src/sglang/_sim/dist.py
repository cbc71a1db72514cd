"""Multi-node rendezvous over ``--dist-init-addr`` (stands in for torch.distributed + NCCL).

Node 0 listens on the dist-init port; every other node connects (retrying), says
``hello <rank>`` and later ``loaded <rank>``, and stays connected. A dropped connection is fatal
on both sides, as a dead NCCL peer is.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

NCCL_VERSION = "2.27.5"
LostHandler = Callable[[str], None]


class DistError(Exception):
    """Rendezvous failed; the message is the exception line the real stack would print."""


def split_addr(addr: str) -> tuple[str, int]:
    host, _sep, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise DistError(f"ValueError: --dist-init-addr must be host:port, got {addr!r}")
    return host.strip("[]"), int(port)


def nccl_remote_error(peer: str) -> str:
    return (
        "torch.distributed.DistBackendError: NCCL error in: "
        "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, remote process exited "
        f"or there was a network error, NCCL version {NCCL_VERSION}\n"
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        f"exiting prematurely.\nLast error:\nsocketProgress: Connection closed by remote peer {peer}")


class Rendezvous:
    def __init__(self, addr: str, nnodes: int, node_rank: int, timeout: float,
                 on_lost: LostHandler) -> None:
        self.host, self.port = split_addr(addr)
        self.nnodes = nnodes
        self.node_rank = node_rank
        self.timeout = timeout
        self.on_lost = on_lost
        self._cond = threading.Condition()
        self._hello: dict[int, socket.socket] = {}
        self._loaded: set[int] = set()
        self._server: socket.socket | None = None
        self._peer: socket.socket | None = None

    # ---- node 0 -------------------------------------------------------------------------
    def listen(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        server = socket.socket(family, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", self.port))
        except OSError as error:
            server.close()
            raise DistError(
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                f"address. port: {self.port}, useIpv6: false, code: -98, name: EADDRINUSE, message: address "
                f"already in use ({error})"
            ) from None
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept_loop, name="dist-accept", daemon=True).start()

    def _accept_loop(self) -> None:
        assert self._server is not None
        while True:
            try:
                conn, peer = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve_peer, args=(conn, f"{peer[0]}<{peer[1]}>"), daemon=True).start()

    def _serve_peer(self, conn: socket.socket, peer: str) -> None:
        rank: int | None = None
        reader = conn.makefile("r", encoding="ascii", errors="replace")
        for text in reader:
            word, _sep, value = text.strip().partition(" ")
            if not value.isdigit():
                continue
            with self._cond:
                if word == "hello":
                    rank = int(value)
                    self._hello[rank] = conn
                elif word == "loaded":
                    self._loaded.add(int(value))
                self._cond.notify_all()
        if rank is not None:
            self.on_lost(peer)

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.timeout
        with self._cond:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    joined = len(self._hello) + 1
                    raise DistError(
                        f"torch.distributed.DistStoreError: Timed out after {int(self.timeout) + 1} seconds "
                        f"waiting for clients. {joined}/{self.nnodes} clients {what}."
                    )
                self._cond.wait(min(left, 0.5))

    def wait_for_peers(self) -> None:
        self._wait(lambda: len(self._hello) >= self.nnodes - 1, "joined")

    def wait_for_loaded(self) -> None:
        self._wait(lambda: len(self._loaded) >= self.nnodes - 1, "finished loading")

    # ---- other nodes ----------------------------------------------------------------------
    def connect(self) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                peer = socket.create_connection((self.host, self.port), timeout=2)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise DistError(
                        "torch.distributed.DistNetworkError: The client socket has timed out after "
                        f"{int(self.timeout * 1000)}ms while trying to connect to ({self.host}, {self.port})."
                    ) from None
                time.sleep(0.2)
        peer.settimeout(None)
        peer.sendall(f"hello {self.node_rank}\n".encode())
        self._peer = peer
        threading.Thread(target=self._watch_root, name="dist-watch", daemon=True).start()

    def _watch_root(self) -> None:
        assert self._peer is not None
        try:
            while self._peer.recv(4096):
                pass
        except OSError:
            pass
        self.on_lost(f"{self.host}<{self.port}>")

    def send_loaded(self) -> None:
        if self._peer is not None:
            self._peer.sendall(f"loaded {self.node_rank}\n".encode())
