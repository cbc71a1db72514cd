"""tools/bench_fleet.py: the inventory it creates and the table it prints (the runs themselves need Docker)."""

from __future__ import annotations

from pathlib import Path

import pytest
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


# The end of a real no-op deploy of five bench hosts (ansible-core 2.19.14, 761cdc1; bench-1 also ran the two
# run_once tasks, and bench-4's changed=1 was added), profile_tasks' own recap after it with no host lines.
FIVE_HOST_RECAP = (ROOT / "tests" / "fixtures" / "ansible" / "noop-deploy-recap-five-hosts.txt").read_text()


def test_the_shape_is_the_fewest_tasks_a_host_ran_and_the_first_hosts_run_once_tasks() -> None:
    earlier = FIVE_HOST_RECAP.replace("ok=10", "ok=99").replace("ok=12", "ok=99")
    assert bench.recap_shape(earlier + "\n" + FIVE_HOST_RECAP) == bench.Shape(per_host=14, run_once=2)
    one = "PLAY RECAP ***\nbench-1                    : ok=12   changed=0    unreachable=0    failed=0    skipped=4 "
    assert bench.recap_shape(one) == bench.Shape(per_host=16, run_once=0)


def test_an_output_without_a_recap_has_no_shape() -> None:
    with pytest.raises(ValueError, match="no PLAY RECAP"):
        bench.recap_shape("ERROR! the playbook could not be parsed\n")


def test_the_shape_play_has_the_no_ops_tasks_per_host_one_of_them_a_module(tmp_path: Path) -> None:
    shaped, module = bench.shape_plays(tmp_path, bench.Shape(per_host=14, run_once=2))
    play = yaml.safe_load(shaped.read_text())[0]
    assert (play["hosts"], play["gather_facts"]) == ("sglang_workers", False)
    tasks = play["tasks"]
    assert len(tasks) == 16
    assert tasks[0] == {"name": "The one module", "ansible.builtin.ping": {}}
    assert [task for task in tasks if "ansible.builtin.set_fact" not in task] == tasks[:1]
    assert [task.get("run_once", False) for task in tasks] == [False] * 14 + [True] * 2
    assert yaml.safe_load(module.read_text())[0]["tasks"] == tasks[:1]


def test_the_budget_is_what_an_added_host_may_cost_for_the_ratio() -> None:
    # 1 host 2.58 s and 5 hosts 4.74 s: each added host 0.54 s, the part that does not grow 2.04 s.
    added = bench.growth(1, 2.58, 5, 4.74)
    assert round(added, 2) == 0.54
    limit = bench.budget(1, 2.58, added, 5)
    assert round(limit, 3) == round(2.04 * 0.5 / 3.5, 3)
    # At the budget, five hosts take exactly 1.5 times one.
    fixed = 2.58 - added
    assert abs((fixed + 5 * limit) - 1.5 * (fixed + limit)) < 1e-9
    assert bench.budget(4, 8.0, 0.5, 5) == float("inf")  # 5 hosts within 1.5x of 4 whatever each costs


def test_the_growth_line_sets_the_deploy_beside_its_shape_its_module_and_the_budget() -> None:
    def result(hosts: int, wall: float, shaped: float, module: float, shape: object) -> object:
        return bench.Result(hosts, bench.Run(100.0, 50.0, 0), [bench.Run(wall, 1.0, 0)], None, shape,
                            bench.Run(module, 1.0, 0), bench.Run(shaped, 1.0, 0))
    one = result(1, 2.58, 1.7, 1.2, bench.Shape(16, 0))
    five = result(5, 4.74, 2.7, 1.8, bench.Shape(14, 2))
    [line] = bench.growth_lines([one, five])
    assert line.startswith("each host beyond 1 (to 5): the no-op deploy 0.54 s; Ansible alone in its shape (14 tasks "
                           "per host, one of them a module, and 2 run_once) 0.25 s; one module alone 0.15 s. "
                           "At most 0.29 s each for 1.5x")
    unshaped = bench.Result(5, bench.Run(100.0, 50.0, 0), [bench.Run(4.74, 1.0, 0)])
    assert bench.growth_lines([one, unshaped]) == []  # a size whose shape was not timed has no line
    assert bench.growth_lines([one, result(1, 2.6, 1.7, 1.2, bench.Shape(16, 0))]) == []  # nothing added


# proc(5): the first line of /proc/stat, in USER_HZ ticks: user nice system idle iowait irq softirq steal guest
# guest_nice. This one was read on the sandbox machine (Linux 6.18, 2 CPUs); the cpu0 line is made up.
PROC_STAT = ("cpu  7632107 0 2190296 7149570 18455 0 27033 217725 0 0\n"
             "cpu0 3816053 0 1095148 3574785 9227 0 13516 108862 0 0\n")


def test_the_machines_busy_time_is_all_of_proc_stat_but_idle_and_iowait() -> None:
    hz = bench.os.sysconf("SC_CLK_TCK")
    assert bench.machine_busy(PROC_STAT) == pytest.approx((7632107 + 0 + 2190296 + 0 + 27033 + 217725) / hz)
    assert bench.machine_busy() > 0  # this machine's own
    with pytest.raises(ValueError, match="not the first line of /proc/stat"):
        bench.machine_busy("intr 1 2 3\n")


def test_the_table_and_the_cpu_line_give_the_machines_cpu_beside_the_controllers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def result(hosts: int, wall: float, cpu: float, busy: float) -> object:
        return bench.Result(hosts, bench.Run(100.0, 50.0, 0), [bench.Run(wall, cpu, 0, busy)])
    one, five = result(1, 3.0, 2.6, 3.2), result(5, 6.0, 6.6, 9.6)
    rows = [line.split() for line in bench.table([one, five]).splitlines()[2:]]
    assert rows[1][9:12] == ["9.6", "s", "1.60"]  # 9.6 s of the machine's CPU in 6 s: 1.6 cores busy
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 2)  # the line's lower bound is on the machine's cores
    [line] = bench.cpu_lines([one, five])
    assert line == ("CPU of each host beyond 1 (to 5): 1.60 s on the machine, 1.00 s of it the controller's and "
                    "0.60 s the rest (its container, Docker). The no-op of 5 used 9.6 s of the machine's CPU: at "
                    "least 4.80 s of wall on 2 cores, 1.60x the first's (1.5x is 4.50 s). For 1.5x each added "
                    "host may use at most 1.45 s of the machine's CPU.")  # (2 x 4.5 - 3.2) / 4
    assert bench.cpu_lines([one, result(1, 3.1, 2.5, 3.0)]) == []
    # With Ansible's start measured (1 s on one core), the bound and the budget take it as serial.
    five.start = bench.Run(1.0, 0.9, 0)
    [line] = bench.cpu_lines([one, five])
    assert ("used 9.6 s of the machine's CPU, 1.00 s of it Ansible's start on one core (imports, inventory, "
            "parsing: --list-hosts): at least 5.30 s of wall on 2 cores, 1.77x the first's (1.5x is 4.50 s). "
            "For 1.5x each added host may use at most 1.20 s of the machine's CPU.") in line


def test_the_least_wall_runs_the_start_on_one_core_and_the_rest_on_all() -> None:
    assert bench.least_wall(8.0, 0.0, 2) == 4.0  # all of it parallel
    assert bench.least_wall(8.0, 8.0, 2) == 8.0  # all of it the start
    assert bench.least_wall(8.0, 2.0, 2) == 5.0
    assert bench.least_wall(1.0, 2.0, 2) == 2.0  # a start longer than the CPU measured is still its own wall


def test_the_cpu_budget_is_what_an_added_host_may_use_for_the_least_wall_to_meet_the_ratio() -> None:
    base = bench.Result(1, bench.Run(100.0, 50.0, 0), [bench.Run(2.0, 1.6, 0, 2.0)])
    allowed = bench.cpu_budget(base, 5, 0.8, 2)
    five = 2.0 + 4 * allowed  # the machine CPU of five hosts each using exactly the budget
    assert bench.least_wall(five, 0.8, 2) == pytest.approx(1.5 * 2.0)
    assert bench.cpu_budget(base, 5, 0.8, 2, ratio=2.0) > allowed


def test_the_minimum_reads_each_host_with_the_deploys_own_arguments(tmp_path: Path) -> None:
    read_vars = bench.deploy_read_vars()
    assert read_vars["sglang_config_stamps"] == ["nvidia_driver", "sglang_stack", "sglang_weights"]
    assert "sglang_service_all_files" in read_vars["sglang_config_deployed_files"]
    play = yaml.safe_load(bench.minimum_play(tmp_path, read_vars).read_text())[0]
    assert (play["hosts"], play["gather_facts"]) == ("sglang_workers", False)
    imports = [(task["ansible.builtin.import_role"]["name"], task["ansible.builtin.import_role"]["tasks_from"])
               for task in play["tasks"]]
    assert imports == [("sglang_config", "resolve.yml"), ("sglang_service", "variables.yml"),
                       ("sglang_config", "read_host.yml")]
    assert play["tasks"][2]["vars"] == read_vars
    for role, tasks_from in imports:  # each entry point exists, and the service's brings no task
        assert (ROOT / "roles" / role / "tasks" / tasks_from).is_file()
    assert yaml.safe_load((ROOT / "roles/sglang_service/tasks/variables.yml").read_text()) == []


def test_a_deploy_without_the_read_task_is_refused(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy.yml"
    deploy.write_text(yaml.safe_dump([{"hosts": "all", "tasks": [{"ansible.builtin.debug": {"msg": "x"}}]}]))
    with pytest.raises(ValueError, match=r"no task imports sglang_config's assess$"):
        bench.deploy_read_vars(deploy)


def test_the_growth_line_gives_the_minimum_when_it_was_timed() -> None:
    def result(hosts: int, wall: float, minimum: float | None) -> object:
        runs = bench.Run(1.0, 1.0, 0)
        return bench.Result(hosts, bench.Run(100.0, 50.0, 0), [bench.Run(wall, 1.0, 0)], None, bench.Shape(14, 2),
                            runs, runs, None, None if minimum is None else bench.Run(minimum, 1.0, 0))
    [line] = bench.growth_lines([result(1, 1.91, 1.26), result(5, 3.56, 2.18)])
    assert line.startswith("each host beyond 1 (to 5): the no-op deploy 0.41 s; the deploy's resolve and read "
                           "alone 0.23 s; Ansible alone")
    [line] = bench.growth_lines([result(1, 1.91, None), result(5, 3.56, 2.18)])
    assert "resolve and read" not in line
