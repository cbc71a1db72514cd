# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of operations: rollout batches, a server's metrics, drifted files and status row, probe
lines, apt, and the readiness budget learned from the last load."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from collections.abc import Iterator
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils import _load, _prometheus
from ansible_collections.sglang.deploy.plugins.module_utils._stall import stall_bounds
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_quote import exec_argv

DOCUMENTATION = r"""
name: rollout_batches
short_description: Rollout batches, metrics, drifted files, the status table, probe lines, missing apt packages
description:
  - C(sglang.deploy.rollout_batches) gives the batch sizes of the rolling play, a multi-node group per batch,
    over the servers that restart (group C(sglang_rollout_restart)); all in one batch for a first install.
  - C(sglang.deploy.rollout_plan) says which servers restart in which batch, and which are left alone; with
    C(why) (host -> reasons), what changes on each and whether it reboots.
  - "C(sglang.deploy.restart_plan) decides what a host's rolling batch does before anything changes,
    C(drift | restart_plan(active_state, driver_plan, pending_reboot, reboot_pending, container_reboots, running,
    unit_text)), and returns C(restart), C(driver), C(reboot), C(why), C(files) and C(stale): a restart for new
    files, a stopped unit, or a running server not started from the files on disk (C(running), what
    sglang_service_state read of it, against C(unit_text), the unit as it renders now: its argv, a unit file
    systemd has not loaded, a file changed after it started; C(stale) lists why); C(rejoin) for a server started
    from its files that is still loading (C(running.listening) false), to wait for before draining another; for a
    serving host, a driver
    change (or a running driver other than the pin) made in the batch with a reboot, and a pending reboot when
    allowed."
  - C(sglang.deploy.stale_process) gives those reasons alone, C(running | stale_process(unit_text)), for status.yml.
  - "C(sglang.deploy.restart_decision) is restart_plan over the server's files as rendered now and as read on
    the host, in one pass, C(rendered | restart_decision(files, deployed, driver_plan, reboot_pending,
    container_reboots)): C(rendered) the texts of C(files) (the unit first), C(deployed) what
    sglang_service_state read (files, unit, running, reboot)."
  - C(sglang.deploy.metrics) reads SGLang's C(/metrics) into one number per name, each aggregated as what it
    is - by default the gauges the status table shows, or the names given. A per-rank gauge (pool sizes, usage
    shares, the start-up constants every TP rank writes) is the largest rank's, not their sum; a queue or
    running count, or the throughput, is one TP rank's per DP rank, added over C(dp_rank), from the total
    series only (not the per-priority ones of C(--enable-priority-scheduling)); counters and histograms are
    summed. Another scheduler gauge (one with C(tp_rank)) is read as per rank, another gauge is summed.
  - C(sglang.deploy.drifted_files) lists the destinations of the files whose content on the host (their SHA-1
    checksums as module C(sglang.deploy.sglang_service_state) read them, null when missing) differs from what
    their templates render now, C(files | drifted_files(rendered, checksums)), C(rendered) in the order of
    C(files).
  - C(sglang.deploy.status_table) prints status.yml's table.
  - C(sglang.deploy.probe_line) formats one check of the pre-restart probe.
  - C(sglang.deploy.apt_missing) keeps the C(name) or C(name=version) specs that package_facts does not show installed.
  - C(sglang.deploy.files_to_copy) lists the files of a controller directory that a host lacks or holds with other
    content, given what C(ansible.builtin.find) with C(get_checksum) found there; a wheelhouse is compared in one
    module call instead of one per file.
  - C(sglang.deploy.load_budget) gives the readiness budget and stall bounds of the next load, C(record |
    load_budget(identity, sglang_ready_timeout, sglang_service_stall_timeouts)) - the configured ones, raised to
    what the host's last recorded load of the same model needed (module_utils _load).
  - C(sglang.deploy.load_summary) gives one line of a load's timings (the RV(load) of sglang_ready).
  - C(sglang.deploy.dd_rate) reads the rate in GB/s from what C(dd) prints on its standard error, or none.
  - C(sglang.deploy.stamp_digest) gives the SHA-256 of a role's inputs, C(inputs | stamp_digest(paths)), over the
    inputs as canonical JSON and the content of every file under the controller paths given (the role's own
    directory and the collection's plugins, so that a new release of the role converges again).
  - "C(sglang.deploy.role_dir) gives the directory of one of the collection's roles, C('sglang_stack' | role_dir),
    wherever the task that asks runs (C(role_path) is the running task's role): the code a role's stamp digests
    when a play decides for several roles in one task."
  - C(sglang.deploy.stamp_state) decides from a host's stamp (module C(sglang.deploy.converge_stamp)) whether a role
    has nothing to do there, C(stamp | stamp_state(digest, enabled)) -> C({digest, converged, why}).
"""

EXAMPLES = r"""
- name: Batch sizes of a rolling play that restarts one server (or one multi-node group) at a time
  ansible.builtin.debug:
    msg: "{{ groups | sglang.deploy.rollout_batches(1) }}"

- name: Requests in flight
  ansible.builtin.debug:
    msg: "{{ metrics_page.content | sglang.deploy.metrics(['num_running_reqs', 'num_queue_reqs']) }}"

- name: The deployed files that differ from what their templates render now
  ansible.builtin.debug:
    msg: "{{ files | sglang.deploy.drifted_files(query('ansible.builtin.template', *templates), deployed.files) }}"
"""

RETURN = r"""
_value:
  description: Depends on the filter; see its description.
  type: raw
"""


def rollout_batches(groups: Any, serial: Any = 1, members: str = "sglang_workers", parallel: bool = False) -> list[int]:
    """Batch sizes for the rolling play's `serial`, over the hosts of group `members` (the servers that
    restart; by default every server) in inventory order, where the hosts of one sglang_multinode_<name>
    group form a single unit (restarted together). `serial` is a count of units or a percentage ("25%")
    of all the servers' units per batch. `parallel` (a first install: nothing serves yet) puts them all
    in one batch."""
    units = rollout_units(groups, members)
    if parallel:
        return [sum(len(u) for u in units) or 1]
    per_batch = _units_per_batch(serial, len(rollout_units(groups, "sglang_workers")))
    return [sum(len(u) for u in units[i:i + per_batch]) for i in range(0, len(units), per_batch)] or [1]


def rollout_units(groups: Any, members: str = "sglang_workers") -> list[list[str]]:
    """The hosts of group `members`, in the order of sglang_workers, as units: a multi-node server's hosts
    together, which must be next to each other and all in `members` or none."""
    chosen = set(groups.get(members, []))
    workers = [host for host in groups.get("sglang_workers", []) if host in chosen]
    owner = {host: name for name, hosts in groups.items() if name.startswith("sglang_multinode_") for host in hosts}
    units: list[list[str]] = []
    for host in workers:
        if host in owner and units and units[-1][0] in owner and owner[units[-1][0]] == owner[host]:
            units[-1].append(host)
        else:
            units.append([host])
    for name in {owner[host] for host in workers if host in owner}:
        found = [u for u in units if owner.get(u[0]) == name]
        if len(found) != 1 or sorted(found[0]) != sorted(groups[name]):
            raise AnsibleFilterError(
                f"the hosts of {name} must all be in sglang_workers, next to each other in inventory order, "
                f"so they roll out as one unit; got {groups[name]} within {workers}")
    return units


# What a plan prints for each rolling action: the groups of the hosts it takes and leaves (made by
# deploy.yml and reboot.yml), its title, what it does to a host, and what the hosts left alone are.
_PLANS = {
    "restart": ("sglang_rollout_restart", "sglang_rollout_keep", "ROLLOUT PLAN", "restarted",
                "Unchanged and serving"),
    "reboot": ("sglang_reboot", "sglang_reboot_not", "REBOOT PLAN", "rebooted", "No reboot pending"),
}


def rollout_plan(groups: Any, serial: Any = 1, parallel: bool = False, action: str = "restart",
                 why: Any = None) -> str:
    """What the rolling play will do, printed before any server is drained: the servers that restart (or
    reboot, playbooks/reboot.yml), in their batches, and the ones left alone; `why` (host -> reasons) says
    after each host what changes there and whether it reboots."""
    if action not in _PLANS:
        raise AnsibleFilterError(f"rollout_plan: action {action!r}; allowed: {', '.join(_PLANS)}")
    members, others, title, done, left = _PLANS[action]
    units = rollout_units(groups, members)
    reasons = {host: list(value or []) for host, value in dict(why or {}).items()}
    kept = [_with_reasons(host, reasons) for host in groups.get("sglang_workers", [])
            if host in set(groups.get(others, []))]
    alone = f"{left}, not drained: {', '.join(kept)}." if kept else ""
    waited = [host for host in groups.get("sglang_workers", []) if host in set(groups.get("sglang_rollout_rejoin", []))]
    if waited:  # started by an earlier run and still loading: out of service until ready, so before any batch
        alone = (f"Waited for first, then back in the routers (an earlier run started them; still loading): "
                 f"{', '.join(waited)}. " + alone).strip()
    if not units:
        return f"{title}: no server {action}s. " + alone
    hosts = [_with_reasons(host, reasons) for unit in units for host in unit]
    if parallel:
        return (f"{title}: first install, no server runs yet: {', '.join(hosts)} start together. " + alone)
    sizes, lines, index = rollout_batches(groups, serial, members), [], 0
    for number, size in enumerate(sizes, 1):
        lines.append(f"batch {number}: {', '.join(hosts[index:index + size])}")
        index += size
    count = len(hosts)
    return (f"{title}: {count} server{'s' if count != 1 else ''} {action} in {len(sizes)} "
            f"batch{'es' if len(sizes) != 1 else ''} (sglang_rolling_serial {serial}), each drained, {done} "
            f"and back before the next: {'; '.join(lines)}. " + alone).strip()


def _with_reasons(host: str, reasons: dict[str, list[str]]) -> str:
    return f"{host} ({'; '.join(reasons[host])})" if reasons.get(host) else host


def stale_process(running: Any, unit_text: Any = None) -> list[str]:
    """Why the running server (sglang_service_state's ``running``: pid, argv, need_daemon_reload,
    changed_after_start) was not started from the files now on disk, given the unit as it renders now (whose
    ExecStart it should run); empty when it was, or when nothing runs. A process whose argv is not the server's
    launch (unreadable, or rewritten) is judged by the other evidence only."""
    if not isinstance(running, dict) or not running.get("pid"):
        return []
    reasons = []
    if running.get("need_daemon_reload"):
        reasons.append("systemd still runs an older version of its unit file (NeedDaemonReload=yes)")
    argv, wanted = running.get("argv"), exec_argv(str(unit_text)) if unit_text else None
    if isinstance(argv, list) and wanted and "sglang.launch_server" in argv and argv != wanted:
        reasons.append(f"the running server (PID {running['pid']}) was started with {_argv_difference(argv, wanted)}")
    changed = [os.path.basename(str(path)) for path in running.get("changed_after_start") or []]
    if changed:
        reasons.append(f"the running server (PID {running['pid']}) started before {', '.join(changed)} changed")
    return reasons


def _argv_difference(running: list[str], wanted: list[str]) -> str:
    """The first words where two argvs part, as "`--x 2.0`, its unit says `--x 3.0`"."""
    shorter = min(len(running), len(wanted))
    index = next((i for i in range(shorter) if running[i] != wanted[i]), shorter)
    start = index - 1 if index > 0 and wanted[index - 1].startswith("--") else index

    def words(argv: list[str]) -> str:
        return shlex.join(argv[start:start + 2]) or "nothing more"

    return f"`{words(running)}`, its unit says `{words(wanted)}`"


def restart_plan(drift: Any, state: Any, driver: Any = None, reboot: Any = None, reboot_pending: bool = False,
                 container_reboots: bool = False, running: Any = None, unit_text: Any = None) -> dict:
    """What this host's rolling batch does, decided before anything changes anywhere:
    `{restart, driver, reboot, why}`. It restarts when its files would change (`drift`, their paths) or its
    unit is not running (`state`, the unit's ActiveState). While it serves, a driver change (`driver`, the
    plan nvidia_driver's preflight made: pin, packages, installed, running, reboot_policy) or a running
    driver other than the pin is made in its batch, with the server stopped, and reboots the host unless
    the policy is `never` or the host is a container (`driver.container`) that cannot reboot
    (`container_reboots`: sglang_service_reboot_command is set) - then the driver changes in place, as the
    role does alone; a pending reboot
    (`reboot`, sglang_service_state's: required, packages) is done in the batch when `reboot_pending` allows it."""
    drift, driver, pending = list(drift or []), dict(driver or {}), dict(reboot or {})
    serving = state in ("active", "activating", "reloading")
    why = [f"new {', '.join(os.path.basename(path) for path in drift)}"] if drift else []
    # The files may be as the repository renders them while the process predates them: a run that died
    # between writing them and restarting.
    stale = stale_process(running, unit_text) if serving and not drift else []
    why += stale
    if not serving:
        why.append(f"{state or 'unknown'}: will be started")
    note = _driver_change(driver)
    stays = ("not serving" if not serving else "nvidia_driver_reboot_policy never"
             if driver.get("reboot_policy") == "never" else "a container that cannot reboot"
             if driver.get("container") and not container_reboots else "")
    rolled = bool(note) and not stays
    # A server an earlier run restarted that has not opened its port yet is loading: it is out of service, so it
    # is waited for (and put back in the routers) before any other server is drained.
    loading = serving and not drift and not stale and isinstance(running, dict) and running.get("listening") is False
    if loading:
        why.append("still loading, started by an earlier run (its port is not open yet): waited for before any "
                   "other server is drained, then put back in the routers")
    if note:
        why.append(note + (f", in place ({stays})" if stays else ""))
    if pending.get("required"):
        asked = ", ".join(pending.get("packages") or []) or "/run/reboot-required"
        why.append(f"reboot pending ({asked})" + ("" if reboot_pending and serving else
                                                  ": left for playbooks/reboot.yml" if serving else ""))
    reboots = rolled or (serving and bool(pending.get("required")) and bool(reboot_pending))
    if reboots:
        why.append("REBOOTS")
    restart = bool(drift) or bool(stale) or not serving or reboots
    return {"restart": restart, "rejoin": loading and not restart, "driver": rolled, "reboot": reboots, "why": why,
            "files": drift, "stale": stale}


def restart_decision(rendered: Any, files: Any, deployed: Any, driver: Any = None, reboot_pending: bool = False,
                     container_reboots: bool = False) -> dict:
    """restart_plan of one host from its files as they render now (``rendered``, in the order of ``files``, the
    unit first) and as sglang_service_state read them and the unit (``deployed``)."""
    rendered, deployed = list(rendered or []), dict(deployed or {})
    drift = drifted_files(files, rendered, deployed.get("files") or {})
    return restart_plan(drift, (deployed.get("unit") or {}).get("ActiveState"), driver, deployed.get("reboot"),
                        reboot_pending, container_reboots, deployed.get("running"), rendered[0] if rendered else None)


def _driver_change(driver: dict[str, Any]) -> str:
    """What changes in the driver by nvidia_driver's plan: its packages move, or the running driver is not the
    installed pin (a reboot an earlier run could not do); nothing for a host without the driver yet."""
    pin, installed = str(driver.get("pin") or ""), dict(driver.get("installed") or {})
    if not pin or not installed:
        return ""
    if any(not str(installed.get(name, "")).startswith(f"{pin}-") for name in driver.get("packages") or []):
        held = sorted({str(version).rsplit("-", 1)[0] for version in installed.values()})
        return f"driver {'/'.join(held)} -> {pin}"
    running = driver.get("running")
    # None: no driver runs at all (its module did not load at the last boot), which a reboot may mend.
    return f"driver {pin} installed, {running or 'none'} running" if running != pin else ""


def _units_per_batch(serial: Any, units: int) -> int:
    text = str(serial).strip()
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if not 0 < percent <= 100:
                raise ValueError
            return max(1, int(units * percent / 100))
        count = int(text)
        if count < 1:
            raise ValueError
        return count
    except ValueError:
        raise AnsibleFilterError(f"sglang_rolling_serial: {serial!r} is not a count >= 1 or a percentage "
                                 "like 25%; allowed: 1, 2, ... or 1%..100%") from None


# How status.yml reads each SGLang gauge it shows (by its name after "sglang:"), as a real 0.5.23 server writes
# it (sglang/srt/observability/metrics_collector.py, "mc.py", and managers/scheduler.py of 0.5.23):
# - every scheduler process has its own series, labelled engine_type, model_name, tp_rank, pp_rank, moe_ep_rank,
#   + dp_rank with --dp-size > 1, + priority="" with --enable-priority-scheduling (mc.py:1375-1396);
# - the start-up constants (max_total_num_tokens, context_len, page_size, ...) come from EVERY scheduler, one
#   equal series per TP rank (emit_constants mc.py:1769-1800, called by scheduler.py:631 and 1278-1282);
# - the others come from attention-TP rank 0 of each DP rank, or from every rank with
#   --enable-metrics-for-all-schedulers (mc.py:1362-1367), so the TP ranks of one DP rank repeat its values;
# - a queue count also writes one series per priority beside its total under priority="" (mc.py:1415-1429).
PER_RANK = "per rank"          # one rank's pool or share: the largest rank's (the fullest DP rank with DP)
SERVER_TOTAL = "server total"  # a DP rank's part of the server's work: one TP rank's per dp_rank, added up
ADDED = "added"                # counters and histograms, and gauges of one writer split by a label: the sum
STATUS_GAUGES: dict[str, str] = {
    "num_running_reqs": SERVER_TOTAL, "num_queue_reqs": SERVER_TOTAL, "gen_throughput": SERVER_TOTAL,
    "token_usage": PER_RANK, "num_used_tokens": PER_RANK, "max_total_num_tokens": PER_RANK,
    "hicache_host_used_tokens": PER_RANK, "hicache_host_total_tokens": PER_RANK, "cache_hit_rate": PER_RANK,
}
_PREFIX = "sglang:"


def metrics(text: Any, names: Any = None) -> dict[str, float]:
    """SGLang's Prometheus text -> {name: value}, each name aggregated over its series as what it is (see
    STATUS_GAUGES), for STATUS_GAUGES or the names given."""
    page = str(text or "")
    families = _prometheus.types(page)
    found = _prometheus.series(page, prefix=_PREFIX, names=STATUS_GAUGES if names is None else names)
    return {name: _aggregate(samples, _kind(name, samples, families)) for name, samples in found.items()}


def _kind(name: str, samples: list[_prometheus.Sample], families: dict[str, str]) -> str:
    """How a name is aggregated: as STATUS_GAUGES says, else by its TYPE and whether schedulers write it."""
    if name in STATUS_GAUGES:
        return STATUS_GAUGES[name]
    kind = _prometheus.type_of(_PREFIX + name, families)
    if kind in ("counter", "histogram", "summary") or (kind == "untyped" and name.endswith("_total")):
        return ADDED
    return PER_RANK if any("tp_rank" in sample.labels for sample in samples) else ADDED


def _aggregate(samples: list[_prometheus.Sample], kind: str) -> float:
    if kind == ADDED:
        return _prometheus.total(samples)
    totals = [sample for sample in samples if not sample.labels.get("priority")]  # priority="" is the total
    if kind == SERVER_TOTAL:
        return _prometheus.sum_of_largest(totals, "dp_rank")
    return _prometheus.largest(totals)


def drifted_files(files: Any, rendered: Any, checksums: Any) -> list[str]:
    """The `dest` of each of `files` whose checksum on the host is missing or not the SHA-1 of its rendering."""
    files, rendered, checksums = list(files or []), list(rendered or []), dict(checksums or {})
    if len(files) != len(rendered):
        raise AnsibleFilterError(f"drifted_files: {len(files)} files but {len(rendered)} renderings")
    return [file["dest"] for file, text in zip(files, rendered, strict=True)
            if checksums.get(file["dest"]) != hashlib.sha1(str(text).encode("utf-8")).hexdigest()]


def _row_metrics(row: dict[str, Any]) -> dict[str, float]:
    """A status row's metrics: the parsed gauges, or the /metrics text itself."""
    value = row.get("metrics") or {}
    return metrics(value) if isinstance(value, str) else dict(value)


def status_table(rows: Any) -> str:
    """status.yml's table, one line per server; a row's metrics are parsed gauges or the /metrics text.
    "config" is DRIFT when the deployed files differ from what the repository renders, STALE when they do not
    but the running server was not started from them (its reasons follow the table), else "in sync".
    "KV pool planned" ends in "*" when the plan is calibrated from the last start; "weights read" is the
    last load's rate, "disk reads" the disk's sequential rate, and "at disk rate" the weights' size over it."""
    head = f"{'host':<24} {'state':<16} {'health':<7} {'uptime':>8} {'restarts':>8} {'version':<12} {'config':<8}" \
           f" {'KV used':>8} {'host KV used':>13} {'KV pool planned':>16} {'KV pool seen':>13}" \
           f" {'last load':>10} {'weights read':>13} {'disk reads':>11} {'at disk rate':>13}"
    lines = [head, "-" * len(head)]
    for row in rows or []:
        gauges = _row_metrics(row)
        host_total = gauges.get("hicache_host_total_tokens") or 0
        host_used = (f"{gauges.get('hicache_host_used_tokens', 0) / host_total:.0%}" if host_total else "-")
        kv = f"{gauges['token_usage']:.0%}" if "token_usage" in gauges else "-"
        uptime = int(row.get("uptime_s") or 0)
        planned = _tokens(row.get("kv_tokens_planned")) + ("*" if _true(row.get("plan_calibrated")) else " ")
        lines.append(f"{row['host']:<24} {row['state']:<16} {'ok' if row['healthy'] else str(row['health']):<7}"
                     f" {uptime // 3600:>4}h{uptime % 3600 // 60:02d}m {row['restarts']:>8} {row['version']!s:<12}"
                     f" {_config(row):<8} {kv:>8} {host_used:>13}"
                     f" {planned:>16} {_tokens(row.get('kv_tokens_observed')):>13} {_load_columns(row)}")
    lines += [f"{row['host']}: STALE: {reason}" for row in rows or [] if not row.get("drift")
              for reason in row.get("stale") or []]
    return "\n".join(lines)


def _config(row: dict[str, Any]) -> str:
    return "DRIFT" if row.get("drift") else "STALE" if row.get("stale") else "in sync"


def _true(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def _load_columns(row: dict[str, Any]) -> str:
    load = row.get("load") if isinstance(row.get("load"), dict) else {}
    disk = _number(row.get("disk_read_gb_per_s"))
    read = _number(load.get("read_gb_per_s"))
    size = _number(load.get("weights_bytes"))
    floor = _duration(size / 1e9 / disk) if disk and size else "-"
    return (f"{_duration(_number(load.get('total_s'))):>10} {_rate(read):>13} {_rate(disk):>11} {floor:>13}")


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _rate(value: float | None) -> str:
    return f"{value:.2f} GB/s" if value else "-"


def _duration(seconds: float | None) -> str:
    if not seconds:
        return "-"
    whole = round(seconds)
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{seconds:.1f}s"


def _tokens(value: Any) -> str:
    """A token count with thousands separators, or '-' when there is none."""
    try:
        return f"{int(value):,}" if value not in (None, "", "None") else "-"
    except (TypeError, ValueError):
        return "-"


def probe_line(check: Any) -> str:
    """One line of the probe report: `  ok   cuda: ...` / `  FAIL toolchain: ...`."""
    item = dict(check or {})
    return f"  {'ok  ' if item.get('ok') else 'FAIL'} {item.get('check')}: {item.get('detail')}"


def apt_missing(specs: Any, packages: Any) -> list[str]:
    """`['g++', 'cuda-nvcc-13-0=13.0.88-1'] | sglang_apt_missing(ansible_facts.packages)`: the specs
    that package_facts does not show installed (at exactly that version, for name=version)."""
    missing = []
    for spec in specs or []:
        name, _sep, version = str(spec).partition("=")
        installed = [str(entry.get("version")) for entry in (packages or {}).get(name) or []]
        if not installed or (version and version not in installed):
            missing.append(str(spec))
    return missing


def _sha1(path: str) -> str:
    with open(path, "rb") as handle:  # SHA-1: what ansible.builtin.find's get_checksum reports
        return hashlib.file_digest(handle, "sha1").hexdigest()


def files_to_copy(directory: Any, found: Any) -> list[str]:
    """`dir | sglang.deploy.files_to_copy(find_result)`: paths of the files of the controller directory
    `dir` that the host lacks, or holds with another checksum, in the directory `find` read."""
    on_host = {os.path.basename(str(f.get("path"))): f.get("checksum") for f in (found or {}).get("files") or []}
    try:
        names = sorted(os.listdir(str(directory)))
    except OSError as exc:
        raise AnsibleFilterError(f"files_to_copy: {exc}") from exc
    paths = [os.path.join(str(directory), name) for name in names]
    return [path for path in paths if os.path.isfile(path) and on_host.get(os.path.basename(path)) != _sha1(path)]


# This file is <collection>/plugins/filter/ops.py.
COLLECTION_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def role_dir(name: Any, collection_dir: str = COLLECTION_DIR) -> str:
    """`'sglang_stack' | role_dir`: <collection>/roles/<name>, which must exist."""
    path = os.path.join(collection_dir, "roles", str(name))
    if not re.fullmatch(r"[a-z][a-z0-9_]*", str(name)) or not os.path.isdir(path):
        roles = sorted(entry for entry in os.listdir(os.path.join(collection_dir, "roles"))
                       if not entry.startswith("."))
        raise AnsibleFilterError(f"role_dir: the collection has no role {name!r}; it has {', '.join(roles)}")
    return path


# The collection's own code trees as stamp_digest reads them, read once in Ansible's main process before it forks
# a worker per task and host (before_fork, called by the sglang.deploy.prefork callback): the workers that digest
# a role's code for every host inherit them. Paths not read then (a test's, a wheelhouse) are read each time.
_TREES: dict[str, bytes] = {}


def _tree_chunks(top: str) -> Iterator[bytes]:
    """What stamp_digest hashes for a directory, piece by piece: every file's relative name and content, in a
    stable order (byte-code caches left out)."""
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(n for n in files if not n.endswith(".pyc")):
            full = os.path.join(root, name)
            yield f"\0{os.path.relpath(full, top)}\0".encode()
            with open(full, "rb") as handle:
                yield handle.read()


def before_fork(collection_dir: str = COLLECTION_DIR) -> None:
    """Read the collection's plugins and roles for stamp_digest, once per run in the main process."""
    roles = os.path.join(collection_dir, "roles")
    for top in [os.path.join(collection_dir, "plugins")] + [os.path.join(roles, name) for name in os.listdir(roles)]:
        if os.path.isdir(top):
            _TREES[os.path.abspath(top)] = b"".join(_tree_chunks(top))


def stamp_digest(inputs: Any, paths: Any = ()) -> str:
    """`inputs | stamp_digest([role_path, plugins_dir])`: SHA-256 of the inputs as canonical JSON, and of
    every file under the paths (relative name and content; byte-code caches left out)."""
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode())
    for top in [str(path) for path in paths or ()]:
        if not os.path.isdir(top):
            raise AnsibleFilterError(f"stamp_digest: {top} is not a directory")
        known = _TREES.get(os.path.abspath(top))
        for chunk in [known] if known is not None else _tree_chunks(top):  # a wheelhouse is hashed file by file
            digest.update(chunk)
    return digest.hexdigest()


def stamp_state(stamp: Any, digest: str, enabled: Any = True) -> dict[str, Any]:
    """`stamps[role] | stamp_state(digest, enabled)`: {digest, converged, why}. Converged: the stamp
    exists, its digest is this run's and nothing it lists moved; never when not `enabled`."""
    stamp = stamp if isinstance(stamp, dict) else {}
    if not enabled:
        why = "the stamps are not trusted in this run (a phase of the role was asked for, or the skip is off)"
    elif not stamp.get("found"):
        why = "; ".join(stamp.get("drift") or ["no stamp was read"])
    elif stamp.get("digest") != digest:
        why = "its inputs changed (variables, the role or the collection) since it last converged here"
    elif stamp.get("drift"):
        why = "the host moved since it last converged here: " + "; ".join(stamp["drift"])
    else:
        why = ""
    return {"digest": digest, "converged": not why, "why": why}


def load_budget(record: Any, identity: Any, timeout: Any, stall_timeouts: Any) -> dict[str, Any]:
    """`observed | load_budget(identity, sglang_ready_timeout, sglang_service_stall_timeouts)`."""
    bounds, _problems = stall_bounds(dict(stall_timeouts or {}))  # the variable check refused bad ones already
    return _load.learned(record if isinstance(record, dict) else None, dict(identity or {}), int(timeout), bounds)


def load_summary(load: Any) -> str:
    return _load.summary(load if isinstance(load, dict) else None)


_DD = re.compile(r"^(\d+) bytes .* copied, ([\d.,]+) s", re.MULTILINE)


def dd_rate(stderr: Any) -> float | None:
    """GB/s from dd's summary ("1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.2 s, 5.4 GB/s"): bytes over
    seconds, computed here rather than read from dd's rounded figure and its locale's unit."""
    match = _DD.search(str(stderr or ""))
    if not match:
        return None
    seconds = float(match.group(2).replace(",", "."))
    copied = int(match.group(1))
    return round(copied / 1e9 / seconds, 6) if seconds > 0 and copied > 0 else None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"rollout_batches": rollout_batches, "rollout_plan": rollout_plan, "restart_plan": restart_plan,
                "stale_process": stale_process, "restart_decision": restart_decision, "metrics": metrics,
                "drifted_files": drifted_files, "status_table": status_table, "probe_line": probe_line,
                "apt_missing": apt_missing, "files_to_copy": files_to_copy, "load_budget": load_budget,
                "load_summary": load_summary, "dd_rate": dd_rate, "stamp_digest": stamp_digest,
                "stamp_state": stamp_state, "role_dir": role_dir}
