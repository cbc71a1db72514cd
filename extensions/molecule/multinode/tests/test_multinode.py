"""Verify the multinode scenario: two hosts form one server; it converges, rolls and serves as one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import ipfirewall
import testinfra.utils.ansible_runner
import yaml
from drill import run_playbook, why

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]

testinfra_hosts = ["sglang-multinode-a"]
UNIT = "sglang-kimi.service"
HOSTS = ["sglang-multinode-a", "sglang-multinode-b"]
NETWORK = "sglang-multinode-net"
# The sandbox's client key (inventory/sandbox/group_vars/all.yml, this scenario's group_vars/all.yml): sent as a
# client sends it (/health_generate needs none).
KEY = yaml.safe_load((Path(__file__).parents[1] / "group_vars" / "all.yml").read_text())["sglang_api_key"]


def on(name: str) -> Any:
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def invocation(name: str) -> str:
    return on(name).check_output(f"systemctl show {UNIT} --property=InvocationID --value")


def http(name: str, path: str) -> str:
    return on(name).run(f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 30 -H 'Authorization: Bearer {KEY}' "
                        f"http://127.0.0.1:30000{path}").stdout


def test_ranks_and_rendezvous_come_from_the_group_order() -> None:
    for rank, name in enumerate(HOSTS):
        unit = on(name).file(f"/etc/systemd/system/{UNIT}").content_string
        for flag in ("--tp-size 4", "--nnodes 2", f"--node-rank {rank}", "--dist-init-addr sglang-multinode-a:20000"):
            assert f"    {flag} \\" in unit, (name, flag)


def test_only_rank_0_serves_generation() -> None:
    assert http("sglang-multinode-a", "/health_generate") == "200"
    assert http("sglang-multinode-a", "/v1/models") == "200"
    assert http("sglang-multinode-b", "/health_generate") == "200"  # the dummy health of a non-zero rank
    assert http("sglang-multinode-b", "/v1/models") == "404"
    schedulers = on("sglang-multinode-b").check_output("cat /proc/[0-9]*/comm | grep -c '^sglang::schedul' || true")
    assert schedulers.strip() == "2"


def test_the_ip_firewall_lets_in_the_peer_and_keeps_out_the_docker_host() -> None:
    """Each host's unit allows loopback and its peer, whose inventory address is a container name that the server
    host resolved (getent ahosts, Docker's DNS) to its address on the scenario's network. The rendezvous between
    the ranks crossed both firewalls already (the server serves). The peer reaches rank 0's HTTP port; the Docker
    host, on no list, reaches a control listener of the same container but times out on the server's port."""
    for name, peer in zip(HOSTS, reversed(HOSTS), strict=True):
        unit = on(name).file(f"/etc/systemd/system/{UNIT}").content_string
        peer_ip = ipfirewall.container_ip(peer, NETWORK)
        assert "IPAddressDeny=any\n" in unit and "IPAddressAllow=localhost\n" in unit, name
        assert (f"# multi-node peer {peer} (group sglang_multinode_kimi: torch.distributed, NCCL) ({peer})\n"
                f"IPAddressAllow={peer_ip}\n") in unit, name
        allowed = on(name).check_output(f"systemctl show {UNIT} --property=IPAddressAllow --value").split()
        assert sorted(allowed) == sorted(["127.0.0.0/8", "::1/128", f"{peer_ip}/32"]), (name, allowed)
        assert ipfirewall.bpf_unsupported_lines(on(name)) == "", name
    peer = on("sglang-multinode-b").run("curl -s -o /dev/null -w '%{http_code}' --max-time 10 "
                                        "http://sglang-multinode-a:30000/health")
    assert peer.stdout == "200", peer.stdout + peer.stderr
    address = ipfirewall.container_ip("sglang-multinode-a", NETWORK)
    ipfirewall.start_control(on("sglang-multinode-a"))
    try:
        control = ipfirewall.wait_connected(address, ipfirewall.CONTROL_PORT)
    finally:
        ipfirewall.stop_control(on("sglang-multinode-a"))
    assert control == "connected", "the Docker host cannot reach the container at all: the drill proves nothing"
    outcome = ipfirewall.connect(address, 30000)
    print(f"MEASURED IP firewall, multinode: peer b -> a:30000 HTTP {peer.stdout}; Docker host -> a:30000 "
          f"{outcome}; control port: {control}")
    assert outcome == "timeout"


def test_a_change_restarts_the_group_as_one_unit() -> None:
    before = {name: invocation(name) for name in HOSTS}
    rc, out, seconds = run_playbook("deploy.yml", "-e", "hicache_ratio=3.0")
    print(f"MEASURED multi-node group change: {seconds:.1f} s, rc={rc}")
    assert rc == 0, why(out)
    assert all(invocation(name) != before[name] for name in HOSTS)
    assert http("sglang-multinode-a", "/health_generate") == "200"
