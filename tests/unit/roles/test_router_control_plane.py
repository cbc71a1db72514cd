"""The real sglang-router 0.3.2 (the pinned wheel, .cache/wheelhouse-router) on loopback, started through the
role's launcher with the clients' key and the control plane's admin key from files: the clients' key (and no key)
cannot add, remove or list a worker; the admin key can, and the deploy's module (sglang_router_workers) uses it;
no key is on the router's command line; a server registered by the launcher gets its own key.

The router's process and a fake SGLang server are real processes on 127.0.0.1; every wait is on an observable
state (a port answering, the router's list), bounded by helpers.wait_for."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.client import HTTPException
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from ansible_collections.sglang.deploy.plugins.modules import sglang_router_workers as mod
from helpers import ROOT, send_json, wait_for
from pki import Pki, make_pki

LAUNCHER = ROOT / "roles/sglang_router/files/sglang_router_launch.py"
WHEELHOUSE = ROOT / ".cache/wheelhouse-router"
CONSTRAINTS = ROOT / "roles/sglang_router/files/constraints-0.3.2.txt"
CLIENT_KEY, ADMIN_KEY, WORKER_KEY = "client-K3y-5d1", "admin-K3y-9c7:with:colons", "worker-K3y-2b4"


class FakeServer(BaseHTTPRequestHandler):
    """What the router asks of an SGLang server at registration, in health checks and for a generation; records
    the bearer token of each request."""

    seen: list[tuple[str, str | None]]

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.seen.append((self.path, self.headers.get("Authorization")))
        body = ({"text": "ok", "meta_info": {"completion_tokens": 1}} if self.path.startswith("/generate")
                else {"model_path": "fake", "is_generation": True})
        send_json(self, 200, body)

    do_GET = do_POST = _answer

    def log_message(self, *_args: Any) -> None:
        pass


class Router(NamedTuple):
    url: str
    pid: int
    worker: str
    seen: list[tuple[str, str | None]]


@pytest.fixture(scope="module")
def router_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the pinned sglang-router, installed as the role installs it (no index, the wheelhouse)."""
    assert (WHEELHOUSE / "sglang_router-0.3.2-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl").exists(), (
        f"{WHEELHOUSE} lacks the sglang-router wheel: run scripts/setup.sh (make setup) first")
    venv = tmp_path_factory.mktemp("router-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-input",
                    "--no-compile", "--no-index", "--find-links", str(WHEELHOUSE), "-c", str(CONSTRAINTS),
                    "sglang-router==0.3.2"], check=True)
    return python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def call(url: str, method: str = "GET", key: str | None = None, body: dict[str, Any] | None = None,
         context: ssl.SSLContext | None = None) -> int:
    """The HTTP status of one call (https verified by ``context``)."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def listed(router: str) -> dict[str, dict[str, Any]]:
    return mod.Router(router, ADMIN_KEY).workers()


@contextlib.contextmanager
def started_router(python: Path, tmp: Path, workers: dict[str, str], *flags: str,
                   env: dict[str, str] | None = None, tls: Pki | None = None,
                   metrics_port: int | None = None) -> Iterator[tuple[str, int]]:
    """The real router through the role's launcher on a free loopback port, with the clients' and the admin key
    from files, registering ``workers`` (URL -> key), with ``env`` added to its environment, serving https with
    ``tls``'s certificate as role sglang_router runs it (--tls-cert-path/--tls-key-path, the launcher's --ca); yields
    (its URL, its PID) once it answers /liveness."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "workers.json").write_text(json.dumps({"workers": workers}))
    (tmp / "api-key").write_text(CLIENT_KEY + "\n")
    (tmp / "admin-api-key").write_text(ADMIN_KEY + "\n")
    port = free_port()
    own = ["--ca", str(tls.ca)] if tls else []
    router_tls = ["--tls-cert-path", str(tls.cert), "--tls-key-path", str(tls.key)] if tls else []
    argv = [str(python), str(LAUNCHER), "--workers", str(tmp / "workers.json"), "--key", str(tmp / "api-key"),
            "--admin-key", str(tmp / "admin-api-key"), *own, "--", "--host", "127.0.0.1", "--port", str(port),
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port or free_port()),
            "--policy", "round_robin", "--health-check-interval-secs", "1", *router_tls, *flags]
    with (tmp / "router.log").open("w") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, **(env or {})})
        url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        context = ssl.create_default_context(cafile=str(tls.ca)) if tls else None
        try:
            wait_for(lambda: process.poll() is not None
                     or (port_open(port) and call(url + "/liveness", context=context) == 200), 60,
                     0.1, "the router to answer /liveness")
            assert process.poll() is None, (tmp / "router.log").read_text()
            yield url, process.pid
        finally:
            os.killpg(process.pid, signal.SIGTERM)  # the router and the launcher's detached registrar
            process.wait(timeout=30)


@contextlib.contextmanager
def fake_server(pki: Pki | None = None) -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    """A fake SGLang server on a free loopback port, https with ``pki``'s certificate when given; yields its URL
    and the (path, Authorization) of each request it answered."""
    seen: list[tuple[str, str | None]] = []
    handler = type("Recording", (FakeServer,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if pki is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.cert, pki.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"{'https' if pki else 'http'}://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def router(router_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Router]:
    with contextlib.ExitStack() as stack:
        worker, seen = stack.enter_context(fake_server())
        url, pid = stack.enter_context(started_router(router_python, tmp_path_factory.mktemp("router"),
                                                      {worker: WORKER_KEY}))
        yield Router(url, pid, worker, seen)


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_the_launcher_registers_the_server_with_the_admin_key_and_the_server_gets_its_own(router: Router) -> None:
    wait_for(lambda: listed(router.url).get(router.worker, {}).get("is_healthy"), 60, 0.1,
             "the launcher to register the server, healthy")
    assert call(router.url + "/generate", "POST", CLIENT_KEY, {"text": "hi"}) == 200
    assert ("/generate", f"Bearer {WORKER_KEY}") in router.seen
    cmdline = Path(f"/proc/{router.pid}/cmdline").read_text()
    assert not [key for key in (CLIENT_KEY, ADMIN_KEY, WORKER_KEY) if key in cmdline]


def test_the_clients_key_cannot_add_remove_or_list_a_worker(router: Router) -> None:
    wait_for(lambda: router.worker in listed(router.url), 60, 0.1, "the server in the router's list")
    worker_id = listed(router.url)[router.worker]["id"]
    rogue = {"url": "http://192.0.2.1:30000"}
    for key in (None, CLIENT_KEY):
        assert call(router.url + "/workers", "POST", key, rogue) == 401
        assert call(router.url + f"/workers/{worker_id}", "DELETE", key) == 401
        assert call(router.url + "/workers", "GET", key) == 401
    assert list(listed(router.url)) == [router.worker]
    # The admin key is the control plane's only: the inference routes refuse it.
    assert call(router.url + "/generate", "POST", ADMIN_KEY, {"text": "hi"}) == 401


def test_the_deploys_module_takes_a_server_out_and_back_with_the_admin_key(router: Router) -> None:
    wait_for(lambda: listed(router.url).get(router.worker, {}).get("is_healthy"), 60, 0.1, "a healthy server")
    out = mod.run(mod.Router(router.url, ADMIN_KEY), [router.worker], "absent", wait=True, timeout=60, check=False)
    assert out["removed"] == [router.worker] and listed(router.url) == {}
    back = mod.run(mod.Router(router.url, ADMIN_KEY), [router.worker], "present", wait=True, timeout=60, check=False,
                   worker_keys={router.worker: WORKER_KEY})
    assert back["added"] == [router.worker] and listed(router.url)[router.worker]["is_healthy"]
    # The same module with the clients' key is refused, naming the status, and changes nothing.
    with pytest.raises(mod.RouterError, match="HTTP 401"):
        mod.run(mod.Router(router.url, CLIENT_KEY), [router.worker], "absent", wait=True, timeout=60, check=False)
    assert list(listed(router.url)) == [router.worker]


# --- https workers: the router verifies them against the servers' CAs (role sglang_router's --ca-cert-paths) -----

def health_checks(seen: list[tuple[str, str | None]]) -> int:
    return sum(1 for path, _key in seen if path == "/health")


def test_the_router_verifies_an_https_server_against_the_ca_file_the_role_writes(
        router_python: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A server with TLS (sglang_tls_*, role sglang) serves https only, with a certificate a private CA signed. The
    role gives the router that CA as its unit does (--ca-cert-paths <config dir>/workers-ca.pem, and the same file in
    SSL_CERT_FILE): the server is registered, stays healthy through the router's periodic health checks and serves
    with its own key. With the flag alone, as sglang-router 0.3.2 documents it, the registration passes but the
    periodic health check (sgl-model-gateway src/core/worker.rs, a client built without the flag) cannot verify the
    server and marks it unhealthy: what the engine scenario's drill 14 met on the real SGLang, and why the unit sets
    the variable. With neither, the registration itself fails."""
    tmp = tmp_path_factory.mktemp("router-tls")
    pki = make_pki(tmp / "pki", "deploy")
    other = make_pki(tmp / "other", "stranger")
    bundle = tmp / "workers-ca.pem"  # what the role writes: each https server's CA once, one after another
    bundle.write_text(other.ca.read_text().strip() + "\n" + pki.ca.read_text().strip() + "\n")
    with fake_server(pki) as (worker, seen):
        with started_router(router_python, tmp / "role", {worker: WORKER_KEY}, "--ca-cert-paths", str(bundle),
                            env={"SSL_CERT_FILE": str(bundle)}) as (url, _pid):
            wait_for(lambda: listed(url).get(worker, {}).get("is_healthy"), 60, 0.1,
                     "the launcher to register the https server, healthy")
            checked = health_checks(seen)
            wait_for(lambda: health_checks(seen) >= checked + 3, 60, 0.1, "three periodic health checks")
            assert listed(url)[worker]["is_healthy"], (tmp / "role" / "router.log").read_text()[-3000:]
            assert call(url + "/generate", "POST", CLIENT_KEY, {"text": "hi"}) == 200
            assert ("/generate", f"Bearer {WORKER_KEY}") in seen
        with started_router(router_python, tmp / "flag-only", {worker: WORKER_KEY}, "--ca-cert-paths",
                            str(bundle)) as (url, _pid):
            log = tmp / "flag-only" / "router.log"
            wait_for(lambda: worker in listed(url), 60, 0.1, "the launcher to register the https server")
            wait_for(lambda: f"HTTP health check failed for {worker}/health" in log.read_text(), 60, 0.1,
                     "the periodic health check's failure")
            assert "certificate verify failed" in log.read_text()
            wait_for(lambda: not listed(url)[worker]["is_healthy"], 60, 0.1, "the server marked unhealthy")
        seen.clear()
        with started_router(router_python, tmp / "without", {worker: WORKER_KEY}) as (url, _pid):
            log = tmp / "without" / "router.log"
            # The router's registration workflow logs each failed check: it cannot verify the certificate.
            wait_for(lambda: f"health checks failed for {worker}" in log.read_text(), 60, 0.1,
                     "the router's failed health check of the https server")
            assert not listed(url).get(worker, {}).get("is_healthy")
            assert call(url + "/generate", "POST", CLIENT_KEY, {"text": "hi"}) != 200
            assert ("/generate", f"Bearer {WORKER_KEY}") not in seen


# --- the router's own TLS listener (role sglang_router's sglang_router_tls_*) -------------------------------------

def test_the_router_serves_https_only_with_its_certificate_and_the_deploy_reaches_it_against_its_ca(
        router_python: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The role's router with TLS on its listener (--tls-cert-path, --tls-key-path; the launcher's --ca): the
    launcher registers the server over https, verifying the router against its CA; clients reach it over https with
    the CA and their key; plain http and another CA are refused; the deploy's module reaches it only with the CA
    (router_ca, the role's sglang_router_api_ca); the metrics listener stays plain http."""
    tmp = tmp_path_factory.mktemp("router-listener-tls")
    pki, stranger = make_pki(tmp / "pki", "router"), make_pki(tmp / "stranger", "stranger")
    metrics = free_port()
    with contextlib.ExitStack() as stack:
        worker, seen = stack.enter_context(fake_server())
        url, _pid = stack.enter_context(started_router(router_python, tmp / "router", {worker: WORKER_KEY}, tls=pki,
                                                       metrics_port=metrics))
        assert url.startswith("https://")
        verified = ssl.create_default_context(cafile=str(pki.ca))
        module = mod.Router(url, ADMIN_KEY, ca_path=str(pki.ca))
        wait_for(lambda: module.workers().get(worker, {}).get("is_healthy"), 60, 0.1,
                 "the launcher to register the server over https, healthy")
        assert "registered " + worker in (tmp / "router" / "router.log").read_text()
        assert call(url + "/generate", "POST", CLIENT_KEY, {"text": "hi"}, context=verified) == 200
        assert ("/generate", f"Bearer {WORKER_KEY}") in seen
        with pytest.raises((OSError, HTTPException)):  # a TLS alert where a status line should be, or a reset
            call(url.replace("https://", "http://") + "/liveness")
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            call(url + "/liveness", context=ssl.create_default_context(cafile=str(stranger.ca)))
        with pytest.raises(mod.RouterDown, match="CERTIFICATE_VERIFY_FAILED"):
            mod.Router(url, ADMIN_KEY).workers()
        out = mod.run(module, [worker], "absent", wait=True, timeout=60, check=False)
        assert out["removed"] == [worker] and module.workers() == {}
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as answer:
            assert answer.status == 200
