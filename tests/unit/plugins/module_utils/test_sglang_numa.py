"""NUMA binding: the host's nodes read from real outputs (tests/fixtures/numa, tests/fixtures/real-host), each node's
HiCache pools under SGLang's binding in the plan, and the inventory's offline form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_capacity as cap
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_numa as numa
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_inputs import numa_memory
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_plan_text import table as plan_table
from helpers import ROOT
from test_sglang_plan import plan

FIXTURES = ROOT / "tests" / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_the_node_of_each_gpu_from_a_real_two_node_host() -> None:
    assert numa.parse_topo_numa(fixture("real-host/nvidia-smi-topo-m-8gpu-pcie.txt")) == [0, 0, 0, 0, 1, 1, 1, 1]


def test_topo_with_tabs_nics_and_no_node() -> None:
    text = ("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tSYS\tNODE\t0-15\t0\t\tN/A\n"
            "GPU1\tSYS\t X \tSYS\t16-31\tN/A\t\tN/A\n"
            "NIC0\tNODE\tSYS\t X \n")
    assert numa.parse_topo_numa(text) == [0, None]
    assert numa.parse_topo_numa("GPU0 GPU1\nGPU0 X OK\n") == []  # no NUMA Affinity column
    assert numa.parse_topo_numa("") == []


def test_a_nodes_available_memory_counts_what_memavailable_counts() -> None:
    meminfo = fixture("numa/node0-meminfo-linux-6.18.txt")
    fields = {line.split()[2].rstrip(":"): int(line.split()[3]) * 1024 for line in meminfo.splitlines()
              if line.endswith("kB")}
    expected = fields["MemFree"] + fields["Active(file)"] + fields["Inactive(file)"] + fields["KReclaimable"]
    assert numa.node_available(meminfo) == expected
    assert 0 < expected < fields["MemTotal"]


def test_what_the_unit_holds_on_each_node() -> None:
    assert numa.numa_stat_held(fixture("numa/memory.numa_stat-cgroup-v2-4node-anon.txt")) == {
        "0": 98304, "1": 0, "2": 10250747904, "3": 2634334208}
    assert numa.numa_stat_held(fixture("numa/memory.numa_stat-cgroup-v2-2node.txt")) == {"0": 0, "1": 0}
    v1 = fixture("numa/memory.numa_stat-cgroup-v1-linux-6.18.txt")
    anon = next(line for line in v1.splitlines() if line.startswith("hierarchical_anon="))
    pages = int(anon.split()[1].split("=")[1])
    assert numa.numa_stat_held(v1) == {"0": pages * 4096}  # the hierarchy's, not the cgroup's own anon= line


# ---- the plan --------------------------------------------------------------------------------------------------

TWO_NODES = {"nodes": {"0": 220 * 10**9, "1": 220 * 10**9}, "gpus": [0, 0, 0, 0, 1, 1, 1, 1]}


def test_the_node_check_groups_ranks_by_their_gpus_node() -> None:
    nodes = cap.numa_node_check(25 * 10**9, 8, TWO_NODES["gpus"], TWO_NODES["nodes"])
    assert [(n.node, n.gpus, n.need_bytes, n.fits) for n in nodes] == [
        (0, (0, 1, 2, 3), 100 * 10**9, True), (1, (4, 5, 6, 7), 100 * 10**9, True)]
    # A GPU without a node is not bound; ranks beyond this host's are not counted.
    nodes = cap.numa_node_check(25 * 10**9, 2, [None, 1, 1], {"0": 1, "1": 10**9})
    assert [(n.node, n.gpus, n.fits) for n in nodes] == [(1, (1,), False)]


def test_auto_binding_checks_each_node_and_off_does_not() -> None:
    fits = plan(numa_bind="auto", numa_memory=TWO_NODES)
    assert fits["ok"], fits["errors"]
    assert [node["gpus"] for node in fits["host"]["numa"]] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    per_rank = fits["host_kv_bytes_per_rank"]
    # The whole host has room (449 GB), node 1 does not: its four ranks' pools must all come from it.
    short = {"nodes": {"0": 300 * 10**9, "1": 3 * per_rank}, "gpus": TWO_NODES["gpus"]}
    refused = plan(numa_bind="auto", numa_memory=short)
    assert not refused["ok"]
    [error] = refused["errors"]
    assert error.startswith("sglang_numa_bind: auto binds the ranks of GPUs 4, 5, 6, 7 to NUMA node 1")
    assert "allowed: sglang_numa_bind: off, or pools of at most" in error
    assert plan(numa_bind="off", numa_memory=short)["ok"]
    assert plan(numa_bind="auto", numa_memory={"nodes": {"0": 1}, "gpus": [0] * 8})["host"]["numa"] == []


def test_the_plan_table_shows_each_node() -> None:
    short = {"nodes": {"0": 300 * 10**9, "1": 50 * 10**9}, "gpus": TWO_NODES["gpus"]}
    result = plan(numa_bind="auto", numa_memory=short)
    checks = {"ok": False, "errors": result["errors"], "warnings": [], "plan": result}
    config: dict[str, Any] = {"ok": False, "errors": [], "checks": checks}
    table = plan_table("gpu-node-1", config)
    assert "NUMA node 0 (GPUs 0,1,2,3)" in table and "of 300.0 GB on the node" in table
    assert "NUMA node 1 (GPUs 4,5,6,7)" in table and "DOES NOT FIT" in table


@pytest.mark.parametrize(("value", "problem"), [
    ({"nodes_gb": {0: 220}, "gpus": [0]}, "two or more NUMA nodes"),
    ({"nodes_gb": {0: 220, 1: 220}}, "exactly the keys nodes_gb and gpus"),
    ({"nodes_gb": {0: 220, 1: -1}, "gpus": [0, 1]}, "nodes_gb[1]: -1 is not a node number"),
    ({"nodes_gb": {0: 220, "x": 1}, "gpus": [0, 1]}, "nodes_gb['x']"),
    ({"nodes_gb": {0: 220, 1: 220}, "gpus": [0, 2]}, "gpus names node(s) [2] that nodes_gb does not give"),
    ({"nodes_gb": {0: 220, 1: 220}, "gpus": [True]}, "gpus must list the NUMA node"),
])
def test_the_inventory_form_is_checked(value: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)")):
        numa_memory(value)


def test_the_inventory_form_is_what_the_host_reads() -> None:
    assert numa_memory({"nodes_gb": {"0": 220, 1: 220.5}, "gpus": [0, 0, 1, 1]}) == {
        "nodes": {"0": 220 * 10**9, "1": 220_500_000_000}, "gpus": [0, 0, 1, 1]}


def test_the_host_facts_read_nodes_and_add_back_what_the_unit_holds(tmp_path: Path) -> None:
    from ansible_collections.sglang.deploy.plugins.modules import sglang_host_facts as facts

    for node in (0, 1):
        (tmp_path / "node" / f"node{node}").mkdir(parents=True)
        meminfo = fixture("numa/node0-meminfo-linux-6.18.txt").replace("Node 0", f"Node {node}")
        (tmp_path / "node" / f"node{node}" / "meminfo").write_text(meminfo)
    (tmp_path / "node" / "possible").write_text("0-1\n")
    (tmp_path / "cg" / "system.slice" / "sglang-kimi.service").mkdir(parents=True)
    (tmp_path / "cg" / "system.slice" / "sglang-kimi.service" / "memory.numa_stat").write_text(
        "anon N0=1000 N1=2000\nshmem N0=10 N1=20\nfile N0=5 N1=5\n")

    class Answer:
        ok, out, error = True, fixture("real-host/nvidia-smi-topo-m-8gpu-pcie.txt"), ""

    class Answers:
        def ask(self, args: list[str]) -> Answer:
            assert args == ["topo", "-m"]
            return Answer()

    base = numa.node_available(fixture("numa/node0-meminfo-linux-6.18.txt"))
    found, notes = facts.numa_facts("/system.slice/sglang-kimi.service", Answers(), 8,  # type: ignore[arg-type]
                                    node_root=str(tmp_path / "node"), numa_stat_roots=(str(tmp_path / "cg"),))
    assert notes == []
    assert found == {"nodes": {"0": base + 1010, "1": base + 2020}, "gpus": [0, 0, 0, 0, 1, 1, 1, 1]}
    (tmp_path / "node" / "node1" / "meminfo").unlink()
    (tmp_path / "node" / "node1").rmdir()
    assert facts.numa_facts("", Answers(), 8, node_root=str(tmp_path / "node")) == (None, [])  # type: ignore[arg-type]
