"""The server unit's IP allow-list (module_utils _firewall, filters ip_sources/ip_names/ip_allow): what may reach a
server, each entry's normal form, host names resolved by getent, and the refusals, which name the variable.

The property test turns any text given as sglang_service_ip_allow_extra into either a refusal naming the variable
(the central input check, sglang_inputs) or one IPAddressAllow= line that systemd reads back as the same entry."""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.filter import firewall as filters
from ansible_collections.sglang.deploy.plugins.lookup.variable_problems import ROLES, _specs
from ansible_collections.sglang.deploy.plugins.module_utils import _firewall, sglang_inputs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

VAR = "sglang_service_ip_allow_extra"
SPECS = _specs(ROLES)
PROPERTY = settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
ANALYZE = shutil.which("systemd-analyze")
LOOPBACK = {"why": _firewall.sources({}, {}, "h")[0]["why"], "address": "localhost"}


def getent(name: str, *addresses: str) -> dict[str, Any]:
    """One result of ansible.builtin.getent's loop (database ahosts, fail_key false), as the module returns it:
    keyed by address, or by the name with no value when it does not resolve."""
    table: dict[str, Any] = {a: ["STREAM", name] for a in addresses} if addresses else {name: None}
    return {"item": name, "ansible_facts": {"getent_ahosts": table}, "changed": False}


INVENTORY_GROUPS = {
    "sglang_workers": ["a", "b", "c"],
    "sglang_routers": ["r1", "r2"],
    "sglang_prometheus": ["prom"],
    "sglang_multinode_kimi": ["a", "b"],
}
HOSTVARS: dict[str, dict[str, Any]] = {
    "a": {"ansible_host": "10.0.0.11"},
    "b": {"ansible_host": "gpu-b.example", "sglang_advertise_host": "192.168.7.12"},
    "c": {},
    "r1": {"ansible_host": "10.0.0.5"},
    "r2": {"ansible_host": "router-2.example"},
    "prom": {"ansible_host": "10.0.0.5"},  # the same host as r1: one line, both reasons
}


# --- entries ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "line"), [
    ("10.0.0.5", "10.0.0.5"), (" 10.0.0.5 ", "10.0.0.5"), ("10.0.0.5/24", "10.0.0.0/24"), ("10.0.0.0/8", "10.0.0.0/8"),
    ("10.0.0.5/32", "10.0.0.5"), ("fd00::1/128", "fd00::1"),
    ("fd00::1", "fd00::1"), ("FD00:0::/64", "fd00::/64"), ("::1", "::1"), ("localhost", "localhost"),
    ("link-local", "link-local"), ("multicast", "multicast"), ("0.0.0.0/0", "0.0.0.0/0"),
])
def test_an_entry_is_normalised(given: str, line: str) -> None:
    assert _firewall.entry(given) == line


@pytest.mark.parametrize("given", ["", "any", "10.0.0.256", "10.0.0.0/33", "fe80::1%eth0", "10.0.0.1 10.0.0.2",
                                   "gpu-node-1", "%H", "10.0.0.1\n", "010.0.0.1", 10, None, ["10.0.0.1"]])
def test_what_is_not_an_entry(given: Any) -> None:
    with pytest.raises(ValueError, match="is not"):
        _firewall.entry(given)


def test_the_input_check_refuses_bad_extras_naming_the_variable_and_the_item() -> None:
    errors = sglang_inputs.check({VAR: ["10.0.0.1", "any", "clients.example", "10.1.0.0/16", "fe80::1%eth0"]},
                                 [VAR], SPECS)
    assert [e.split(":", 1)[0] for e in errors] == [f"{VAR}[1]", f"{VAR}[2]", f"{VAR}[4]"], errors
    assert "sglang_service_ip_firewall: false" in errors[0] and "allowed: an IPv4 or IPv6 address" in errors[1]
    assert sglang_inputs.check({VAR: ["10.0.0.1", "fd00::/64", "link-local"]}, [VAR], SPECS) == []


def test_the_input_check_refuses_a_string_where_the_list_goes() -> None:
    errors = sglang_inputs.check({VAR: "10.0.0.1"}, [VAR], SPECS)
    assert errors and all(e.startswith(VAR) for e in errors), errors


# --- sources ----------------------------------------------------------------------------------------------

def test_the_sources_of_a_multinode_server_behind_routers() -> None:
    found = filters.ip_sources(HOSTVARS, INVENTORY_GROUPS, "a", "sglang_multinode_kimi", "sglang_prometheus",
                               "0.0.0.0", ["10.9.0.0/16"])
    assert [(s["why"].split(" (", maxsplit=1)[0], s["address"]) for s in found] == [
        ("loopback", "localhost"), ("router r1", "10.0.0.5"), ("router r2", "router-2.example"),
        ("Prometheus prom", "10.0.0.5"), ("multi-node peer b", "192.168.7.12"), (VAR, "10.9.0.0/16")]


def test_a_single_host_server_with_a_specific_bind_and_no_router() -> None:
    found = filters.ip_sources(HOSTVARS, {"sglang_workers": ["c"]}, "c", "", "sglang_prometheus", "10.0.0.13", [])
    assert [s["address"] for s in found] == ["localhost", "10.0.0.13"]
    assert "sglang_host" in found[1]["why"]


@pytest.mark.parametrize("bind", ["", "0.0.0.0", "::", "127.0.0.1", "localhost"])
def test_a_wildcard_or_loopback_bind_adds_nothing_but_loopback(bind: str) -> None:
    assert filters.ip_sources(HOSTVARS, {}, "c", "", "", bind, []) == [LOOPBACK]


def test_a_host_without_address_is_its_inventory_name_and_an_empty_group_name_counts_nothing() -> None:
    found = filters.ip_sources(HOSTVARS, {"sglang_routers": ["c"], "": ["a"]}, "a", "", "", "", [])
    assert [s["address"] for s in found] == ["localhost", "c"]
    assert filters.ip_names(found) == ["c"]


# --- the lines --------------------------------------------------------------------------------------------

def test_names_resolve_and_each_address_comes_once_with_every_reason() -> None:
    found = filters.ip_sources(HOSTVARS, INVENTORY_GROUPS, "b", "sglang_multinode_kimi", "sglang_prometheus",
                               "0.0.0.0", ["10.0.0.11"])
    assert filters.ip_names(found) == ["router-2.example"]
    lines = filters.ip_allow(found, [getent("router-2.example", "10.0.0.6", "fd00::6")], "b")
    assert [line["allow"] for line in lines] == ["localhost", "10.0.0.5", "10.0.0.6", "fd00::6", "10.0.0.11"]
    assert lines[1]["why"] == "router r1 (group sglang_routers); Prometheus prom (group sglang_prometheus)"
    assert lines[2]["why"] == lines[3]["why"] == "router r2 (group sglang_routers) (router-2.example)"
    assert lines[4]["why"] == f"multi-node peer a (group sglang_multinode_kimi: torch.distributed, NCCL); {VAR}"


def test_a_name_that_does_not_resolve_is_refused_naming_the_host_the_name_and_the_way_out() -> None:
    found = filters.ip_sources(HOSTVARS, INVENTORY_GROUPS, "a", "", "", "", [])
    with pytest.raises(AnsibleFilterError) as caught:
        filters.ip_allow(found, [getent("router-2.example")], "gpu-node-1")
    message = str(caught.value)
    assert message.startswith("sglang_service_ip_firewall: router r2 (group sglang_routers): the host name "
                              "'router-2.example' does not resolve on gpu-node-1")
    assert "allowed: an address in the inventory" in message and "sglang_service_ip_firewall: false" in message
    with pytest.raises(AnsibleFilterError, match="does not resolve"):
        filters.ip_allow(found, [], "gpu-node-1")  # never looked up


def test_getent_results_keep_only_addresses_in_order() -> None:
    got = _firewall.resolved([getent("n", "fd00::2", "10.0.0.9", "10.0.0.10", "10.0.0.9"), getent("m"),
                              {"skipped": True}])
    assert got == {"n": ["10.0.0.9", "10.0.0.10", "fd00::2"], "m": []}


def test_a_comment_stays_one_line() -> None:
    lines = _firewall.allow_list([{"why": "router r\n1\x00", "address": "10.0.0.1"}])
    assert lines == [{"allow": "10.0.0.1", "why": "router r?1?"}]


# --- any text, to the unit line ---------------------------------------------------------------------------

SPECIAL = st.sampled_from(["any", "localhost", "link-local", "multicast", "10.0.0.1", "/", "%", " ", "\n", ":",
                           "::", "fd00::", "/24", "/129", "0", "."])
TEXT = st.lists(st.one_of(st.text(max_size=5), SPECIAL), max_size=6).map("".join)
ADDRESS = st.one_of(st.ip_addresses().map(str),
                    st.ip_addresses(v=4).flatmap(lambda a: st.integers(0, 32).map(lambda n: f"{a}/{n}")),
                    st.ip_addresses(v=6).flatmap(lambda a: st.integers(0, 128).map(lambda n: f"{a}/{n}")))


def systemd_reads(line: str) -> set[ipaddress.IPv4Network | ipaddress.IPv6Network] | str:
    """What an IPAddressAllow= value is to systemd: a keyword, or a prefix with its host bits cleared."""
    return line if line in _firewall.KEYWORDS else {ipaddress.ip_network(line, strict=False)}


def assert_unit_line(tmp: Path, line: str) -> None:
    assert line == line.strip() and line.isprintable() and " " not in line and "%" not in line
    if ANALYZE:
        unit = tmp / "allow.service"
        unit.write_text(f"[Service]\nExecStart=/bin/true\nIPAddressDeny=any\nIPAddressAllow={line}\n")
        run = subprocess.run([ANALYZE, "verify", str(unit)], capture_output=True, text=True, check=False)
        assert run.returncode == 0 and not run.stderr.strip(), run.stderr


@PROPERTY
@given(text=st.one_of(TEXT, ADDRESS))
def test_any_text_is_refused_naming_the_variable_or_becomes_a_line_systemd_reads_as_it(
        tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    errors = sglang_inputs.check({VAR: [text]}, [VAR], SPECS)
    if errors:
        assert all(error.startswith(VAR) for error in errors), errors
        return
    lines = filters.ip_allow(filters.ip_sources({}, {}, "h", "", "", "", [text]), [], "h")
    line = lines[-1]["allow"]
    assert systemd_reads(line) == systemd_reads(text.strip())
    assert_unit_line(tmp_path_factory.mktemp("unit"), line)
