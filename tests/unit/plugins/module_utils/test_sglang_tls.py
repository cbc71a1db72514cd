"""TLS on the server (sglang_tls_cert/_key/_ca): the resolve step's flags and refusals, the one scheme rule every
client's URL follows, the PEM checks of the central input check, and the Prometheus targets."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.filter import live as live_filter
from ansible_collections.sglang.deploy.plugins.module_utils import (
    _live,
    sglang_config,
    sglang_inputs,
    sglang_monitoring,
)
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_quote import systemd_exec_line
from helpers import BASE, CATALOGS
from hypothesis import given
from hypothesis import strategies as st

FILES = {"certfile": "/etc/sglang/kimi.tls.crt", "keyfile": "/etc/sglang/kimi.tls.key",
         "cafile": "/etc/sglang/kimi.tls-ca.crt"}
ON = {"cert": True, "key": True, "ca": True, **FILES}
CERT = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUW\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n"


def resolve(tls: dict[str, Any] | None, **changes: Any) -> dict[str, Any]:
    inputs = dict(BASE, sglang_advertise_host="10.0.0.11", **changes)
    if tls is not None:
        inputs["tls"] = tls
    return sglang_config.resolve(inputs, str(CATALOGS))


def value_of(result: dict[str, Any], flag: str) -> str | None:
    argv = result["argv"]
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_tls_on_passes_the_three_paths_and_makes_the_url_https() -> None:
    result = resolve(ON)
    assert result["ok"], result["errors"]
    assert value_of(result, "--ssl-certfile") == FILES["certfile"]
    assert value_of(result, "--ssl-keyfile") == FILES["keyfile"]
    assert value_of(result, "--ssl-ca-certs") == FILES["cafile"]
    assert "--ssl-keyfile-password" not in result["argv"]
    assert result["tls"] == {"enabled": True, "https": True, "certfile": FILES["certfile"],
                             "keyfile": FILES["keyfile"], "ca_file": FILES["cafile"]}
    assert result["url"] == "https://10.0.0.11:30000"
    assert result["settings"]["ssl_certfile"] == {"flag": "--ssl-certfile", "value": FILES["certfile"],
                                                  "source": "sglang_tls_cert"}
    # In the unit's ExecStart, as paths (no secret on argv: the key is in the 0640 file).
    line = systemd_exec_line(["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server"], result["args"])
    assert f"--ssl-certfile {FILES['certfile']}" in line and f"--ssl-keyfile {FILES['keyfile']}" in line


@pytest.mark.parametrize("tls", [None, {}, {"cert": False, "key": False, "ca": False, **FILES}])
def test_tls_off_changes_nothing(tls: dict[str, Any] | None) -> None:
    result = resolve(tls)
    assert result["ok"], result["errors"]
    assert not any(word.startswith("--ssl") for word in result["argv"])
    assert result["tls"]["enabled"] is False and result["tls"]["https"] is False
    assert result["url"] == "http://10.0.0.11:30000"
    assert result["argv"] == resolve(None)["argv"]


@pytest.mark.parametrize(("given", "variable"), [
    ({"cert": True, "ca": True}, "sglang_tls_key"),
    ({"key": True, "ca": True}, "sglang_tls_cert"),
    ({"ca": True}, "sglang_tls_cert"),
    ({"cert": True, "key": True}, "sglang_tls_ca"),
])
def test_tls_needs_all_three(given: dict[str, bool], variable: str) -> None:
    result = resolve({**FILES, **given})
    assert not result["ok"]
    assert [e for e in result["errors"] if e.startswith(variable + ":") and "allowed:" in e], result["errors"]
    assert not any(word.startswith("--ssl") for word in result["argv"])


@pytest.mark.parametrize("flag", ["ssl-certfile", "ssl_keyfile", "ssl-ca-certs"])
@pytest.mark.parametrize("tls", [None, ON])
def test_the_tls_flags_are_refused_through_extra_args(flag: str, tls: dict[str, Any] | None) -> None:
    result = resolve(tls, sglang_extra_args={flag: "/etc/ssl/x.pem"})
    assert not result["ok"]
    assert any(e.startswith(f"sglang_extra_args['{flag}']:") and "sglang_tls_" in e for e in result["errors"])


def test_the_key_password_stays_refused_as_a_secret() -> None:
    result = resolve(ON, sglang_extra_args={"ssl-keyfile-password": "x"})
    assert any(e.startswith("sglang_extra_args['ssl-keyfile-password']:") and "secret" in e for e in result["errors"])


def test_a_multinode_rank_above_0_keeps_the_files_but_answers_plain_http() -> None:
    """Ranks > 0 run SGLang's dummy health server, which has no TLS (0.5.23 launch_dummy_health_check_server)."""
    multinode = {"group": "kimi_pair", "members": ["a", "b"], "host": "b", "first_host": "10.0.0.1", "port": 20000}
    result = resolve(ON, multinode=multinode)
    assert result["ok"], result["errors"]
    assert value_of(result, "--ssl-certfile") == FILES["certfile"]
    assert result["tls"]["enabled"] and not result["tls"]["https"]
    assert result["url"] == "http://10.0.0.11:30000"
    assert resolve(ON, multinode=dict(multinode, host="a"))["tls"]["https"] is True


# --- one scheme rule ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("tls", "scheme"), [
    (True, "https"), (False, "http"), (None, "http"), ("True", "https"), ("false", "http"), ("", "http"),
])
def test_one_function_decides_the_scheme(tls: object, scheme: str) -> None:
    assert _live.scheme(tls) == scheme
    assert live_filter.server_url("0.0.0.0", 30000, tls) == f"{scheme}://127.0.0.1:30000"
    assert _live.base_url("fd00::5", 30000, tls) == f"{scheme}://[fd00::5]:30000"


def test_the_filter_keeps_http_without_the_argument() -> None:
    assert live_filter.server_url("10.0.0.5", 30000) == "http://10.0.0.5:30000"


# --- the central input check: PEM texts ------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "value"), [
    ("sglang_tls_cert", CERT), ("sglang_tls_cert", CERT + "\n" + CERT), ("sglang_tls_ca", CERT),
    ("sglang_tls_key", KEY), ("sglang_tls_key", KEY.replace("PRIVATE KEY", "EC PRIVATE KEY")),
    ("sglang_tls_key", ""), ("sglang_tls_cert", CERT.replace("\n", "\r\n")),
    ("sglang_router_worker_ca", CERT), ("sglang_router_worker_ca", CERT + "\n" + CERT), ("sglang_router_worker_ca", ""),
])
def test_pem_accepted(name: str, value: str) -> None:
    assert sglang_inputs._pem(name, value) == []


SECRET_BODY = "c2VjcmV0a2V5bWF0ZXJpYWw"


@pytest.mark.parametrize(("name", "value", "why"), [
    ("sglang_tls_key", f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{SECRET_BODY}\n-----END ENCRYPTED PRIVATE KEY-----",
     "encrypted"),
    ("sglang_tls_key", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n"
                       f"{SECRET_BODY}\n-----END RSA PRIVATE KEY-----", "encrypted"),
    ("sglang_tls_key", CERT, "not one private key"),
    ("sglang_tls_key", KEY + KEY, "not one private key"),
    ("sglang_tls_cert", KEY.replace("MIGHAgEAMBMGByqGSM49", SECRET_BODY), "not only certificates"),
    ("sglang_tls_ca", "/etc/ssl/certs/ca.pem", "but a path"),
    ("sglang_tls_cert", CERT + "trailing words", "not PEM"),
    ("sglang_tls_key", f"{SECRET_BODY}", "not PEM"),
    ("sglang_router_worker_ca", "/etc/ssl/certs/servers-ca.pem", "but a path"),
    ("sglang_router_worker_ca", KEY.replace("MIGHAgEAMBMGByqGSM49", SECRET_BODY), "not only certificates"),
])
def test_pem_refused_naming_the_variable_never_the_key(name: str, value: str, why: str) -> None:
    errors = sglang_inputs._pem(name, value)
    assert len(errors) == 1 and errors[0].startswith(name + ":") and why in errors[0] and "allowed:" in errors[0]
    assert SECRET_BODY not in errors[0]


@given(st.text(max_size=200))
def test_pem_check_never_raises_nor_echoes(text: str) -> None:
    for name in sglang_inputs.PEM:
        errors = sglang_inputs._pem(name, text)
        assert all(e.startswith(name + ":") for e in errors)
        if len(text.strip()) > 40 and "\n" in text.strip():
            assert all(text.strip() not in e for e in errors)


# --- Prometheus ------------------------------------------------------------------------------------------------

def test_prometheus_scrapes_an_https_server_over_https() -> None:
    on = sglang_monitoring.server("gpu-1", resolve(ON), 1080)
    off = sglang_monitoring.server("gpu-1", resolve(None), 1080)
    assert on is not None and off is not None
    assert on.target == off.target == "10.0.0.11:30000"
    groups = sglang_monitoring.targets([on, off], [], sglang_monitoring.options({}))
    assert groups[0]["labels"]["__scheme__"] == "https"
    assert "__scheme__" not in groups[1]["labels"]


def test_one_rule_says_all_three_or_none_for_the_servers_and_the_router() -> None:
    """sglang_types.all_or_none: the servers' resolve step and the router's input check refuse the same way."""
    from ansible_collections.sglang.deploy.plugins.module_utils.sglang_types import all_or_none
    what = {"a": "A", "b": "B", "c": "C"}
    assert all_or_none({"a": False, "b": False, "c": False}, what, "off") == []
    assert all_or_none({"a": True, "b": True, "c": True}, what, "off") == []
    assert all_or_none({"a": True, "b": False, "c": True}, what, "off") == [
        ("b", "is empty while a and c are set; allowed: B, with the other 2, or all 3 empty (off)")]
    assert [name for name, _message in all_or_none({"a": False, "b": True, "c": False}, what, "off")] == ["a", "c"]
    server = resolve({**FILES, "cert": True})["errors"]
    assert sorted(e.split(":")[0] for e in server if "is empty while" in e) == ["sglang_tls_ca", "sglang_tls_key"]
    assert all("is empty while sglang_tls_cert is set; allowed: " in e and "(no TLS on the server)" in e
               for e in server if "is empty while" in e)
