"""Verify the multinode scenario: two hosts form one server; it converges, rolls and serves as one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import testinfra.utils.ansible_runner
import yaml
from drill import run_playbook, why

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]

testinfra_hosts = ["sglang-multinode-a"]
UNIT = "sglang-kimi.service"
HOSTS = ["sglang-multinode-a", "sglang-multinode-b"]
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


def test_a_change_restarts_the_group_as_one_unit() -> None:
    before = {name: invocation(name) for name in HOSTS}
    rc, out, seconds = run_playbook("deploy.yml", "-e", "hicache_ratio=3.0")
    print(f"MEASURED multi-node group change: {seconds:.1f} s, rc={rc}")
    assert rc == 0, why(out)
    assert all(invocation(name) != before[name] for name in HOSTS)
    assert http("sglang-multinode-a", "/health_generate") == "200"
