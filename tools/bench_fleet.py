"""How the deploy's cost grows with the fleet: N sandbox hosts, a first install, the no-op deploy timed
(wall and controller CPU, median of --repeat runs) and one configuration roll, for each N given.

    .venv/bin/python tools/bench_fleet.py --hosts 1,5 [--repeat 3] [--json OUT]   (make bench)

Each N gets its own inventory (hosts bench-1..bench-N as Debian 12 systemd containers running the SGLang
simulator, on the Docker network sglang-bench, with the sandbox's group variables), created with
playbooks/sandbox.yml and removed with playbooks/sandbox-destroy.yml afterwards, whatever happened. The
controller CPU is the user + system time of the ansible-playbook process and everything it started
(its workers, the docker exec clients), read from the kernel's accounting of children. The machine CPU is
what the whole machine spent busy meanwhile (/proc/stat): the controller and what runs for it elsewhere, the
modules in the containers and Docker's daemons, all on the same cores; divided by the wall time, how many
cores the run kept busy. Ansible's start (the median wall of `deploy.yml --list-hosts`: imports, inventory,
parsing, on one core before any task) bounds the no-op's wall from below with that CPU: at least
start + (machine CPU - start) / cores; the tool prints that bound and the machine CPU an added host may use for
the largest fleet to stay within 1.5 times the first's. The machine the figures come from is printed with them:
they mean nothing without it.

Beside them, Ansible's own floor on that machine: the same sizes of local-connection hosts running a play of
40 trivial set_fact tasks (--floor-only runs just that, without Docker). How that play's time grows from 1 to
N hosts is what any playbook's per-task cost does there, with no module, connection or container in it.

And on each fleet's own hosts, before they are removed, the floor of the no-op's shape: a play with as many
tasks per host as the no-op ran there (read from its recap), one of them a module (`ansible.builtin.ping`)
and the rest trivial, a play of that one module alone, and the deploy's minimum: a play that resolves each
server's configuration and reads its host exactly as the deploy's validation play does (sglang_config's
resolve.yml and read_host.yml, with deploy.yml's own arguments), which no no-op can leave out. What each host
beyond the first costs in the deploy, in its minimum, in its shape and with one module, is printed beside what
it may cost for the no-op of the largest fleet to take at most 1.5 times the first's, given the deploy's part
that does not grow with the fleet.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
NETWORK = "sglang-bench"
FLOOR_TASKS = 40
TARGET_RATIO = 1.5
RECAP_LINE = re.compile(r"^\S+\s+: ok=(?P<ok>\d+)\s+changed=\d+\s+unreachable=\d+\s+failed=\d+"
                        r"\s+skipped=(?P<skipped>\d+)")


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # the controller's: ansible-playbook and every process it started
    rc: int
    machine_s: float = 0.0  # the whole machine's busy CPU meanwhile: the controller, the containers, Docker


def machine_busy(stat: str | None = None) -> float:
    """Seconds of CPU the machine has been busy since boot: the first line of /proc/stat (proc(5): user, nice,
    system, idle, iowait, irq, softirq, steal, in USER_HZ ticks), all but idle and iowait. Guest time is already
    part of user and nice."""
    text = Path("/proc/stat").read_text() if stat is None else stat
    first = text.split("\n", 1)[0].split()
    if not first or first[0] != "cpu":
        raise ValueError(f"not the first line of /proc/stat: {first[:1]}")
    user, nice, system, _idle, _iowait, irq, softirq, steal = ([int(value) for value in first[1:9]] + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass
class Shape:
    """The no-op's tasks: how many every host ran, and how many more the first ran alone (run_once)."""
    per_host: int
    run_once: int


@dataclass
class Result:
    hosts: int
    install: Run
    noop: list[Run] = field(default_factory=list)
    roll: Run | None = None
    shape: Shape | None = None
    module: Run | None = None
    shaped: Run | None = None
    start: Run | None = None  # ansible-playbook --list-hosts: Ansible's start, before any task (one core)
    minimum: Run | None = None  # the deploy's resolve and read alone (minimum_play)

    def median(self, attribute: str) -> float:
        return statistics.median(getattr(run, attribute) for run in self.noop)


def inventory(directory: Path, hosts: int) -> Path:
    """An inventory of `hosts` sandbox servers, with the sandbox's group variables on another network."""
    (directory / "group_vars").mkdir(parents=True)
    (directory / "group_vars" / "all.yml").symlink_to(ROOT / "inventory" / "sandbox" / "group_vars" / "all.yml")
    members = {f"bench-{n}": {"ansible_host": f"sglang-bench-{n}", "sandbox_network": NETWORK}
               for n in range(1, hosts + 1)}
    (directory / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {
        "sglang_workers": {"hosts": members}, "sglang_routers": {"hosts": {}}}}}))
    return directory


ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def timed(argv: list[str], config: Path, out: Any) -> Run:
    """Run argv with ANSIBLE_CONFIG=config, its output to out: wall time, the CPU time of it and its children
    (the kernel's accounting of children), exit status."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(config), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    before, busy_before = resource.getrusage(resource.RUSAGE_CHILDREN), machine_busy()
    started = time.monotonic()
    rc = subprocess.run(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.monotonic() - started
    after, busy = resource.getrusage(resource.RUSAGE_CHILDREN), machine_busy() - busy_before
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(round(wall, 2), round(cpu, 2), rc, round(busy, 2))


def playbook(name: str, inv: Path, *extra: str, log: Path) -> Run:
    """ansible-playbook NAME -i INV EXTRA with this project's ansible.cfg, its output appended to log."""
    with log.open("a") as out:
        out.write(f"\n$ ansible-playbook {name} -i {inv} {' '.join(extra)}\n")
        out.flush()
        return timed([ANSIBLE_PLAYBOOK, name, "-i", str(inv), *extra], ROOT / "ansible.cfg", out)


def floor_files(directory: Path, hosts: int, tasks: int = FLOOR_TASKS) -> tuple[Path, Path, Path]:
    """What Ansible itself costs per task and host on this machine: `hosts` local-connection hosts, a play of
    `tasks` trivial set_fact tasks, and a configuration with this project's forks and nothing else (no
    callbacks, no collections): (inventory, playbook, ansible.cfg)."""
    directory.mkdir(parents=True, exist_ok=True)
    members = {f"floor-{n}": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
               for n in range(1, hosts + 1)}
    inv = directory / f"floor-{hosts}.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": members}}))
    play = directory / "floor-play.yml"
    play.write_text(yaml.safe_dump([{"name": "Ansible's own cost per task and host", "hosts": "all",
                                     "gather_facts": False,
                                     "tasks": [{"name": f"Trivial task {n}",
                                                "ansible.builtin.set_fact": {f"floor_{n}": f"{{{{ {n} + 1 }}}}"}}
                                               for n in range(tasks)]}], sort_keys=False))
    config = directory / "floor.cfg"
    config.write_text("[defaults]\nforks = 25\nretry_files_enabled = false\n")
    return inv, play, config


def floor(hosts: int, repeat: int, work: Path) -> Run:
    """The median run of the trivial play on `hosts` local hosts (what any playbook pays per task and host)."""
    inv, play, config = floor_files(work / "floor", hosts)
    runs = [timed([ANSIBLE_PLAYBOOK, str(play), "-i", str(inv)], config, subprocess.DEVNULL) for _run in range(repeat)]
    failed = [run.rc for run in runs if run.rc != 0]
    if failed:
        raise SystemExit(f"the floor play failed on {hosts} local hosts (exit {failed[0]}): {play}")
    return median_run(runs)


def floor_line(sizes: list[int], runs: list[Run]) -> str:
    """One line: the trivial play's wall time per size and the ratio of each to the first."""
    base = runs[0].wall_s or 1.0
    parts = [f"{size} host{'s' if size > 1 else ''} {run.wall_s:.1f} s ({run.wall_s / base:.2f}x)"
             for size, run in zip(sizes, runs, strict=True)]
    return (f"Ansible's own floor ({FLOOR_TASKS} trivial set_fact tasks per host, local connection, median): "
            + ", ".join(parts))


def recap_shape(output: str) -> Shape:
    """The shape of the last play recap in an ansible-playbook output: the tasks (ok, changed or skipped) of the
    host that ran the fewest, and how many more the host that ran the most did. One host's tasks are all per host."""
    recap = output.rsplit("PLAY RECAP", 1)[-1] if "PLAY RECAP" in output else ""
    counts = [int(m["ok"]) + int(m["skipped"]) for m in map(RECAP_LINE.match, recap.splitlines()) if m]
    if not counts:
        raise ValueError("no PLAY RECAP with host lines in the output")
    return Shape(min(counts), max(counts) - min(counts))


def shape_plays(directory: Path, shape: Shape) -> tuple[Path, Path]:
    """Two plays on sglang_workers: the no-op's shape (one module, then trivial tasks up to shape.per_host, and
    shape.run_once trivial run_once tasks), and the one module alone."""
    directory.mkdir(parents=True, exist_ok=True)
    module = {"name": "The one module", "ansible.builtin.ping": {}}
    trivial = [{"name": f"Trivial task {n}", "ansible.builtin.set_fact": {f"shape_{n}": f"{{{{ {n} + 1 }}}}"}}
               for n in range(shape.per_host - 1)]
    once = [{"name": f"Trivial run_once task {n}", "ansible.builtin.set_fact": {f"shape_once_{n}": True},
             "run_once": True} for n in range(shape.run_once)]
    plays = []
    for name, tasks in (("shape", [module, *trivial, *once]), ("module", [module])):
        play = directory / f"{name}-{shape.per_host}-{shape.run_once}.yml"
        play.write_text(yaml.safe_dump([{"name": f"The no-op's {name} on these hosts", "hosts": "sglang_workers",
                                         "gather_facts": False, "tasks": tasks}], sort_keys=False))
        plays.append(play)
    return plays[0], plays[1]


READ_TASKS_FROM = "assess"  # the validation play's task that resolves, reads and plans (playbooks/deploy.yml)


def deploy_read_vars(deploy: Path = ROOT / "playbooks" / "deploy.yml") -> dict[str, Any]:
    """The variables deploy.yml's validation play reads each host with: those of its task that imports
    sglang_config's assess.yml (the install roles' stamps, the deployed files)."""
    for play in yaml.safe_load(deploy.read_text()):
        for task in play.get("tasks") or []:
            imported = task.get("ansible.builtin.import_role") or {}
            if imported.get("name") == "sglang_config" and imported.get("tasks_from") == READ_TASKS_FROM:
                return dict(task.get("vars") or {})
    raise ValueError(f"{deploy}: no task imports sglang_config's {READ_TASKS_FROM}")


def minimum_play(directory: Path, read_vars: dict[str, Any]) -> Path:
    """A play on sglang_workers of what no no-op can leave out, exactly as the deploy does it: resolve each server's
    configuration (sglang_config's resolve.yml, with its dependency's argument check) and read its host
    (read_host.yml: one sglang_host_facts call, with the deploy's read_vars). No decision, no plan, no report."""
    directory.mkdir(parents=True, exist_ok=True)

    def imported(role: str, tasks_from: str) -> dict[str, Any]:
        return {"name": role, "tasks_from": tasks_from, "rolespec_validate": False}
    tasks = [{"name": "Resolve the configuration as the deploy does",
              "ansible.builtin.import_role": imported("sglang_config", "resolve.yml")},
             {"name": "The service's variables, for the files it deploys (no task)",
              "ansible.builtin.import_role": imported("sglang_service", "variables.yml")},
             {"name": "Read the host as the deploy does",
              "ansible.builtin.import_role": imported("sglang_config", "read_host.yml"), "vars": read_vars}]
    play = directory / "minimum.yml"
    play.write_text(yaml.safe_dump([{"name": "The no-op's minimum on these hosts: resolve and read",
                                     "hosts": "sglang_workers", "gather_facts": False, "tasks": tasks}],
                                   sort_keys=False))
    return play


def median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda run: run.wall_s)[len(runs) // 2]


def growth(base_hosts: int, base_wall: float, hosts: int, wall: float) -> float:
    """What each host beyond the baseline's adds to the wall time (a straight line through both)."""
    return (wall - base_wall) / (hosts - base_hosts)


def budget(base_hosts: int, base_wall: float, added: float, hosts: int, ratio: float = TARGET_RATIO) -> float:
    """The most each added host may cost for `hosts` to take at most `ratio` times `base_hosts`, the part that
    does not grow with the fleet (the baseline's wall less its hosts' share) staying as it is."""
    fixed = base_wall - base_hosts * added
    room = hosts - ratio * base_hosts
    return (ratio - 1) * fixed / room if room > 0 else math.inf


def growth_lines(results: list[Result]) -> list[str]:
    """Per size beyond the first: what an added host costs in the deploy, in its shape and with one module alone,
    against the budget for TARGET_RATIO."""
    base = results[0]
    lines = []
    for result in results[1:]:
        shape = result.shape
        if result.hosts == base.hosts or not (shape and base.shaped and base.module
                                              and result.shaped and result.module):
            continue
        added = growth(base.hosts, base.median("wall_s"), result.hosts, result.median("wall_s"))
        limit = budget(base.hosts, base.median("wall_s"), added, result.hosts)
        shaped = growth(base.hosts, base.shaped.wall_s, result.hosts, result.shaped.wall_s)
        module = growth(base.hosts, base.module.wall_s, result.hosts, result.module.wall_s)
        minimum = (f"; the deploy's resolve and read alone "
                   f"{growth(base.hosts, base.minimum.wall_s, result.hosts, result.minimum.wall_s):.2f} s"
                   if base.minimum and result.minimum else "")
        lines.append(
            f"each host beyond {base.hosts} (to {result.hosts}): the no-op deploy {added:.2f} s{minimum}; Ansible "
            f"alone in its shape ({shape.per_host} tasks per host, one of them a module, and {shape.run_once} "
            f"run_once) {shaped:.2f} s; one module alone {module:.2f} s. At most {limit:.2f} s each for "
            f"{TARGET_RATIO}x, the deploy's part that does not grow staying as it is.")
    return lines


def checked(run: Run, what: str, log: Path) -> Run:
    if run.rc != 0:
        raise SystemExit(f"{what} failed (exit {run.rc}); see {log}")
    return run


def bench(hosts: int, repeat: int, work: Path) -> Result:
    inv = inventory(work / f"inventory-{hosts}", hosts)
    log = work / f"bench-{hosts}.log"
    noop = ("-e", "hicache_ratio=2.0")  # the sandbox's own ratio: nothing to change

    def repeated(what: str, name: str, *extra: str) -> list[Run]:
        return [checked(playbook(name, inv, *extra, log=log), what, log) for _run in range(repeat)]
    try:
        checked(playbook("playbooks/sandbox.yml", inv, log=log), f"creating {hosts} sandbox hosts", log)
        result = Result(hosts, checked(playbook("deploy.yml", inv, *noop, log=log), "the first install", log))
        result.noop = repeated("a no-op deploy", "deploy.yml", *noop)
        result.start = median_run(repeated("Ansible's start (--list-hosts)", "deploy.yml", *noop, "--list-hosts"))
        result.shape = recap_shape(log.read_text())
        shaped, module = shape_plays(work / "shape", result.shape)
        result.shaped = median_run(repeated("the shape play", str(shaped)))
        result.module = median_run(repeated("the one-module play", str(module)))
        minimum = minimum_play(work / "shape", deploy_read_vars())
        result.minimum = median_run(repeated("the resolve-and-read play", str(minimum), *noop))
        result.roll = checked(playbook("deploy.yml", inv, "-e", "hicache_ratio=2.5", log=log), "the roll", log)
        return result
    finally:
        playbook("playbooks/sandbox-destroy.yml", inv, log=log)


def table(results: list[Result]) -> str:
    """Per size, the median no-op: wall, controller CPU, the machine's CPU and how many cores that kept busy."""
    base = results[0]
    columns = ["hosts", "no-op wall", "ratio", "no-op CPU", "CPU/host", "CPU ratio", "machine CPU", "cores busy",
               "roll wall", "first install"]
    lines = ["  ".join(columns), "  ".join("-" * len(column) for column in columns)]
    for result in results:
        wall, cpu, busy = result.median("wall_s"), result.median("cpu_s"), result.median("machine_s")
        lines.append(f"{result.hosts:>5}  {wall:>8.1f} s  {wall / base.median('wall_s'):>4.2f}x  {cpu:>7.1f} s"
                     f"  {cpu / result.hosts:>6.1f} s  {cpu / base.median('cpu_s'):>8.2f}x"
                     f"  {busy:>9.1f} s  {busy / wall if wall else 0:>10.2f}"
                     f"  {result.roll.wall_s if result.roll else 0:>7.1f} s  {result.install.wall_s:>11.1f} s")
    return "\n".join(lines)


def least_wall(machine_s: float, start_s: float, cores: int) -> float:
    """The least wall time a run that used machine_s of CPU can take on `cores` cores, when its first start_s
    (Ansible's start: imports, inventory, parsing) runs on one core and the rest keeps every core busy."""
    return start_s + max(machine_s - start_s, 0.0) / cores


def cpu_budget(base: Result, hosts: int, start_s: float, cores: int, ratio: float = TARGET_RATIO) -> float:
    """The most machine CPU each host beyond the first size's may use for `hosts` to take at most `ratio` times its
    wall, by least_wall (the first size's CPU and Ansible's start staying as they are)."""
    return (cores * (ratio * base.median("wall_s") - start_s) + start_s - base.median("machine_s")) \
        / (hosts - base.hosts)


def cpu_lines(results: list[Result], ratio: float = TARGET_RATIO) -> list[str]:
    """Per size beyond the first: the CPU each added host costs, the controller's and the rest of the machine's
    (its container, Docker); the least wall time the whole no-op's CPU takes on this machine's cores, with
    Ansible's start (when measured) on one core and the rest on all, against `ratio` times the first size's wall;
    and the machine CPU an added host may use for that ratio."""
    base, cores = results[0], os.cpu_count() or 1
    lines = []
    for result in results[1:]:
        if result.hosts == base.hosts:
            continue
        added = result.hosts - base.hosts
        controller = (result.median("cpu_s") - base.median("cpu_s")) / added
        busy = (result.median("machine_s") - base.median("machine_s")) / added
        start = result.start.wall_s if result.start else 0.0
        least = least_wall(result.median("machine_s"), start, cores)
        started = (f", {start:.2f} s of it Ansible's start on one core (imports, inventory, parsing: --list-hosts)"
                   if result.start else "")
        lines.append(f"CPU of each host beyond {base.hosts} (to {result.hosts}): {busy:.2f} s on the machine, "
                     f"{controller:.2f} s of it the controller's and {busy - controller:.2f} s the rest (its "
                     f"container, Docker). The no-op of {result.hosts} used {result.median('machine_s'):.1f} s of "
                     f"the machine's CPU{started}: at least {least:.2f} s of wall on {cores} cores, "
                     f"{least / base.median('wall_s'):.2f}x the first's ({ratio}x is "
                     f"{ratio * base.median('wall_s'):.2f} s). For {ratio}x each added host may use at most "
                     f"{cpu_budget(base, result.hosts, start, cores, ratio):.2f} s of the machine's CPU.")
    return lines


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.platform()}, {os.cpu_count()} CPUs, {memory:.0f} GiB, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="1,5", help="comma-separated fleet sizes, the first the baseline")
    parser.add_argument("--repeat", type=int, default=3, help="no-op deploys per size (the median is shown)")
    parser.add_argument("--json", type=Path, help="also write the runs as JSON here")
    parser.add_argument("--work", type=Path, help="keep inventories and logs here (default: a temporary dir)")
    parser.add_argument("--floor-only", action="store_true",
                        help="only time Ansible's own floor (a trivial play on local hosts; no Docker)")
    args = parser.parse_args()
    sizes = [int(size) for size in args.hosts.split(",")]
    if not sizes or min(sizes) < 1 or args.repeat < 1:
        parser.error("--hosts takes sizes >= 1 and --repeat a count >= 1")
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    work.mkdir(parents=True, exist_ok=True)
    floors = [floor(size, args.repeat, work) for size in sizes]
    results = [] if args.floor_only else [bench(size, args.repeat, work) for size in sizes]
    growth_text = "".join(f"\n{line}" for line in cpu_lines(results) + growth_lines(results)) if results else ""
    print(f"machine: {machine()}\nlogs: {work}\n\n{table(results) if results else ''}\n{floor_line(sizes, floors)}"
          f"{growth_text}")
    if args.json:
        floor_runs = {str(size): asdict(run) for size, run in zip(sizes, floors, strict=True)}
        report = {"machine": machine(), "results": [asdict(r) for r in results], "floor": floor_runs}
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
