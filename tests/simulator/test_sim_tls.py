"""TLS: the simulator serves https exactly when given --ssl-certfile/--ssl-keyfile, as SGLang 0.5.23's uvicorn does
(plain HTTP is then refused), warms itself up verified against --ssl-ca-certs, and refuses half a pair at start
(arg_groups/serving_hook.py handle_ssl_validation). The collection's readiness waiter (sglang_waiter.SystemdHost,
what sglang_ready runs) reaches it over https against the CA, and refuses a server whose certificate another CA
signed. Certificates are made here, on loopback only."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_waiter
from cryptography import x509
from helpers import PATIENCE, wait_for
from pki import Pki, make_pki
from sim_helpers import LaunchFn, free_port, server_args


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), "deploy")


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("other-pki"), "stranger")


def https_get(port: int, path: str, ca: Path) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10,
                                       context=ssl.create_default_context(cafile=str(ca)))
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def plain_get(port: int, path: str) -> Any:
    """A plain-HTTP request: its status, or the exception the connection ended with."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    except (http.client.HTTPException, OSError) as error:
        return error
    finally:
        conn.close()


def tls_args(pki: Pki, model: Path, port: int) -> list[str]:
    return server_args(model, port, "--ssl-certfile", str(pki.cert), "--ssl-keyfile", str(pki.key),
                       "--ssl-ca-certs", str(pki.ca), tp=1)


def wait_https_ready(server: Any, port: int, ca: Path) -> None:
    def ready() -> bool:
        assert server.running(), f"server exited:\n{server.stderr[-3000:]}"
        try:
            return https_get(port, "/health", ca)[0] == 200
        except (OSError, http.client.HTTPException):
            return False

    wait_for(ready, 2 * PATIENCE, interval=0.05, what="https health 200")


class FakeModule:
    """What SystemdHost reads of the AnsibleModule: its parameters."""

    def __init__(self, **params: Any) -> None:
        self.params = params


def test_https_only_verified_against_the_ca(launch: LaunchFn, model_dir: Path, pki: Pki, other_pki: Pki) -> None:
    port = free_port()
    server = launch(tls_args(pki, model_dir, port))
    wait_https_ready(server, port, pki.ca)
    # Ready means SGLang's warm-up (GET /model_info, POST /generate) passed over https, verified against the CA.
    server.wait_log("The server is fired up and ready to roll!")
    assert f"Uvicorn running on https://127.0.0.1:{port}" in server.stderr
    status, body = https_get(port, "/model_info", pki.ca)
    assert status == 200 and json.loads(body)["model_path"] == str(model_dir)
    # Plain HTTP is refused: the TLS handshake fails and the connection is closed, no HTTP answer.
    refused = plain_get(port, "/health")
    assert isinstance(refused, (http.client.HTTPException, OSError)), refused
    # A client that trusts another CA does not accept the server.
    with pytest.raises(ssl.SSLCertVerificationError):
        https_get(port, "/health", other_pki.ca)
    assert server.running()

    # The collection's readiness waiter: ready over https with the CA; never with another CA or plain HTTP.
    ok, why = sglang_waiter.SystemdHost(FakeModule(ca_path=str(pki.ca))).health(
        f"https://127.0.0.1:{port}/health_generate", 30)
    assert (ok, why) == (True, "HTTP 200")
    ok, why = sglang_waiter.SystemdHost(FakeModule(ca_path=str(other_pki.ca))).health(
        f"https://127.0.0.1:{port}/health_generate", 30)
    assert not ok and "CERTIFICATE_VERIFY_FAILED" in why.upper().replace(" ", "_"), why
    ok, why = sglang_waiter.SystemdHost(FakeModule(ca_path=None)).health(f"http://127.0.0.1:{port}/health", 30)
    assert not ok, why


def test_a_certificate_for_another_address_fails_the_warm_up_and_the_waiter(
        launch: LaunchFn, model_dir: Path, tmp_path: Path) -> None:
    """Host names are verified: a certificate that names only gpu-node-1.example does not pass for 127.0.0.1, where
    the deploy's own calls and SGLang's warm-up reach the server. With --ssl-ca-certs the warm-up fails and the
    server stops; without it (SGLang then warms up unverified) the server serves, and the waiter still refuses it."""
    elsewhere = make_pki(tmp_path / "pki", "deploy", [x509.DNSName("gpu-node-1.example")])
    verified = launch(tls_args(elsewhere, model_dir, free_port()))
    assert verified.wait_exit(PATIENCE) != 0
    assert "CERTIFICATE_VERIFY_FAILED" in verified.stderr.upper().replace(" ", "_")

    port = free_port()
    unverified = launch(server_args(model_dir, port, "--ssl-certfile", str(elsewhere.cert), "--ssl-keyfile",
                                    str(elsewhere.key), tp=1))
    unverified.wait_log("The server is fired up and ready to roll!", 2 * PATIENCE)
    ok, why = sglang_waiter.SystemdHost(FakeModule(ca_path=str(elsewhere.ca))).health(
        f"https://127.0.0.1:{port}/health", 30)
    assert not ok and "mismatch" in why.lower(), why
    assert unverified.running()


def test_without_the_flags_it_serves_plain_http(launch: LaunchFn, model_dir: Path, pki: Pki) -> None:
    port = free_port()
    server = launch(server_args(model_dir, port, tp=1))
    server.wait_ready()
    assert f"Uvicorn running on http://127.0.0.1:{port}" in server.stderr
    with pytest.raises(ssl.SSLError):
        https_get(port, "/health", pki.ca)


@pytest.mark.parametrize(("given", "error"), [
    (["--ssl-keyfile", "KEY"], "ValueError: --ssl-keyfile requires --ssl-certfile to be specified as well."),
    (["--ssl-certfile", "CERT"], "ValueError: --ssl-certfile requires --ssl-keyfile to be specified as well."),
    (["--ssl-certfile", "CERT", "--ssl-keyfile", "/nonexistent/server.key"],
     "ValueError: SSL key file not found: '/nonexistent/server.key'. Please check the --ssl-keyfile path."),
])
def test_half_a_pair_or_a_missing_file_stops_the_start(launch: LaunchFn, model_dir: Path, pki: Pki,
                                                       given: list[str], error: str) -> None:
    words = [{"KEY": str(pki.key), "CERT": str(pki.cert)}.get(word, word) for word in given]
    server = launch(server_args(model_dir, free_port(), *words, tp=1))
    assert server.wait_exit(PATIENCE) != 0
    assert error in server.stderr
