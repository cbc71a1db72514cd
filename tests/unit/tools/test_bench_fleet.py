"""tools/bench_fleet.py: the inventory it creates and the table it prints (the runs themselves need Docker)."""

from __future__ import annotations

from pathlib import Path

import yaml
from helpers import ROOT, load_script

bench = load_script(ROOT / "tools" / "bench_fleet.py")


def test_the_inventory_has_n_servers_on_the_bench_network_with_the_sandboxs_variables(tmp_path: Path) -> None:
    inventory = bench.inventory(tmp_path / "inv", 3)
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())["all"]["children"]
    assert sorted(hosts["sglang_workers"]["hosts"]) == ["bench-1", "bench-2", "bench-3"]
    expected = {"ansible_host": "sglang-bench-2", "sandbox_network": "sglang-bench"}
    assert hosts["sglang_workers"]["hosts"]["bench-2"] == expected
    assert hosts["sglang_routers"]["hosts"] == {}
    assert (inventory / "group_vars" / "all.yml").resolve() == ROOT / "inventory/sandbox/group_vars/all.yml"


def test_the_table_gives_the_median_and_the_ratios_to_the_first_size() -> None:
    def result(hosts: int, walls: list[float], cpus: list[float]) -> object:
        runs = [bench.Run(wall, cpu, 0) for wall, cpu in zip(walls, cpus, strict=True)]
        return bench.Result(hosts, bench.Run(100.0, 50.0, 0), runs, bench.Run(200.0, 60.0, 0))
    one = result(1, [29.0, 30.0, 31.0], [11.0, 10.0, 12.0])
    five = result(5, [84.0, 90.0, 80.0], [55.0, 50.0, 60.0])
    text = bench.table([one, five])
    rows = [line.split() for line in text.splitlines()[2:]]
    assert rows[0][:9] == ["1", "30.0", "s", "1.00x", "11.0", "s", "11.0", "s", "1.00x"]
    assert rows[1][:9] == ["5", "84.0", "s", "2.80x", "55.0", "s", "11.0", "s", "5.00x"]


def test_the_floor_is_a_trivial_play_on_local_hosts_with_only_the_forks_set(tmp_path: Path) -> None:
    inventory, play, config = bench.floor_files(tmp_path, 5)
    hosts = yaml.safe_load(inventory.read_text())["all"]["hosts"]
    assert sorted(hosts) == [f"floor-{n}" for n in range(1, 6)]
    assert {host["ansible_connection"] for host in hosts.values()} == {"local"}
    tasks = yaml.safe_load(play.read_text())[0]["tasks"]
    assert len(tasks) == bench.FLOOR_TASKS
    assert tasks[3] == {"name": "Trivial task 3", "ansible.builtin.set_fact": {"floor_3": "{{ 3 + 1 }}"}}
    assert config.read_text() == "[defaults]\nforks = 25\nretry_files_enabled = false\n"


def test_the_floor_line_gives_each_size_and_its_ratio_to_the_first() -> None:
    line = bench.floor_line([1, 5], [bench.Run(2.0, 1.5, 0), bench.Run(4.4, 5.0, 0)])
    assert line.endswith("1 host 2.0 s (1.00x), 5 hosts 4.4 s (2.20x)")
