"""playbooks/render.yml with routers and Prometheus hosts: the example server's unit lets them through its IP
firewall (role sglang_service, sglang_service_ip_firewall), each under a comment naming it, and a name that does not
resolve is refused naming the router and the variable, with no file written. Addresses only, but for the one name
that cannot resolve anywhere (RFC 6761's .invalid)."""

from __future__ import annotations

from pathlib import Path

import yaml
from helpers import render

# The example's model config files are found relative to the inventory: other inventories' hosts do without.
OFFLINE = {"sglang_model_config_file": "", "sglang_draft_config_file": ""}
# A router off loopback needs its two keys (role sglang_router): these routers have them.
ROUTER_KEYS = {"sglang_router_api_key": "fw-client-k1", "sglang_router_admin_api_key": "fw-admin-k1"}


def inventory(tmp: Path, routers: dict[str, str], prometheus: dict[str, str]) -> Path:
    path = tmp / "fleet.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {
        "sglang_routers": {"hosts": {name: {"ansible_host": address, **OFFLINE, **ROUTER_KEYS}
                                     for name, address in routers.items()}},
        "sglang_prometheus": {"hosts": {name: {"ansible_host": address, **OFFLINE}
                                        for name, address in prometheus.items()}},
    }}}))
    return path


def firewall_lines(unit: str) -> list[str]:
    lines = unit.splitlines()
    start = lines.index("IPAddressDeny=any")
    return [line for line in lines[start:] if line.startswith(("IPAddress", "# "))][:12]


def test_routers_and_prometheus_are_let_in_each_under_its_comment(tmp_path: Path) -> None:
    fleet = inventory(tmp_path, {"router-1": "10.0.0.5", "router-2": "fd00::6"}, {"prom-1": "10.0.0.5/32"})
    proc = render(tmp_path / "out", "-i", str(fleet), "-e", '{"sglang_service_ip_allow_extra": ["10.9.0.7/24"]}')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    unit = (tmp_path / "out" / "gpu-node-1" / "sglang-kimi.service").read_text()
    lines = firewall_lines(unit)
    assert [line for line in lines if line.startswith("IPAddress")] == [
        "IPAddressDeny=any", "IPAddressAllow=localhost", "IPAddressAllow=10.0.0.5", "IPAddressAllow=fd00::6",
        "IPAddressAllow=10.9.0.0/24"]
    assert "# router router-1 (group sglang_routers); Prometheus prom-1 (group sglang_prometheus)" in lines
    assert "# router router-2 (group sglang_routers)" in lines and "# sglang_service_ip_allow_extra" in lines


def test_the_switch_off_writes_no_ip_line(tmp_path: Path) -> None:
    fleet = inventory(tmp_path, {"router-1": "10.0.0.5"}, {})
    proc = render(tmp_path / "out", "-i", str(fleet), "-e", '{"sglang_service_ip_firewall": false}')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "IPAddress" not in (tmp_path / "out" / "gpu-node-1" / "sglang-kimi.service").read_text()


def test_a_router_name_that_does_not_resolve_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    fleet = inventory(tmp_path, {"router-1": "10.0.0.5", "router-9": "router-9.invalid"}, {})
    proc = render(tmp_path / "out", "-i", str(fleet))
    assert proc.returncode != 0
    assert ("sglang_service_ip_firewall: router router-9 (group sglang_routers): the host name 'router-9.invalid' "
            "does not resolve on the controller") in proc.stdout + proc.stderr
    assert not (tmp_path / "out" / "gpu-node-1" / "sglang-kimi.service").exists()
