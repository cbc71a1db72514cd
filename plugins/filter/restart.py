# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of a server's restart decision, made before anything changes: its drifted files, a running process not
started from the files on disk, and what its rolling batch does. Each filter is documented in its sidecar file,
<filter>.yml."""

from __future__ import annotations

import hashlib
import os
import shlex
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils._live import describe, live_change, split_live
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_quote import exec_argv


def drifted_files(files: Any, rendered: Any, checksums: Any) -> list[str]:
    """The `dest` of each of `files` whose checksum on the host is missing or not the SHA-1 of its rendering."""
    files, rendered, checksums = list(files or []), list(rendered or []), dict(checksums or {})
    if len(files) != len(rendered):
        raise AnsibleFilterError(f"drifted_files: {len(files)} files but {len(rendered)} renderings")
    return [file["dest"] for file, text in zip(files, rendered, strict=True)
            if checksums.get(file["dest"]) != hashlib.sha1(str(text).encode("utf-8")).hexdigest()]


def stale_process(running: Any, unit_text: Any = None, live_unit: Any = None) -> list[str]:
    """Why the running server (sglang_service_state's ``running``: pid, argv, need_daemon_reload,
    changed_after_start) was not started from the files now on disk, given the unit as it renders now (whose
    ExecStart it should run); empty when it was, or when nothing runs. A process whose argv is not the server's
    launch (unreadable, or rewritten) is judged by the other evidence only. ``live_unit``: the unit's path when
    what the server differs in is live (the live settings, which a live change set through its API and wrote in
    the unit after it started): those are not reasons."""
    if not isinstance(running, dict) or not running.get("pid"):
        return []
    reasons = []
    if running.get("need_daemon_reload"):
        reasons.append("systemd still runs an older version of its unit file (NeedDaemonReload=yes)")
    argv, wanted = running.get("argv"), exec_argv(str(unit_text)) if unit_text else None
    if live_unit and isinstance(argv, list) and wanted:
        argv, wanted = split_live(argv)[0], split_live(wanted)[0]
    if isinstance(argv, list) and wanted and "sglang.launch_server" in argv and argv != wanted:
        reasons.append(f"the running server (PID {running['pid']}) was started with {_argv_difference(argv, wanted)}")
    changed = [os.path.basename(str(path)) for path in running.get("changed_after_start") or []
               if not live_unit or str(path) != str(live_unit)]
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
                 container_reboots: bool = False, running: Any = None, unit_text: Any = None,
                 live: Any = None) -> dict:
    """What this host's rolling batch does, decided before anything changes anywhere:
    `{restart, driver, reboot, why}`. It restarts when its files would change (`drift`, their paths) or its
    unit is not running (`state`, the unit's ActiveState). While it serves, a driver change (`driver`, the
    plan nvidia_driver's preflight made: pin, packages, installed, running, reboot_policy) or a running
    driver other than the pin is made in its batch, with the server stopped, and reboots the host unless
    the policy is `never` or the host is a container (`driver.container`) that cannot reboot
    (`container_reboots`: sglang_maintenance_reboot_command is set) - then the driver changes in place, as the
    role does alone; a pending reboot
    (`reboot`, sglang_service_state's: required, packages) is done in the batch when `reboot_pending` allows it.
    `live` (_live.live_change's, with the unit's path as ``path``): what the server differs in is changed through
    its API, unless something else restarts it; `drift` then leaves the unit out."""
    drift, driver, pending = list(drift or []), dict(driver or {}), dict(reboot or {})
    live = dict(live) if isinstance(live, dict) else None
    serving = state in ("active", "activating", "reloading")
    why = [f"new {', '.join(os.path.basename(path) for path in drift)}"] if drift else []
    # The files may be as the repository renders them while the process predates them: a run that died
    # between writing them and restarting.
    stale = stale_process(running, unit_text, live and live.get("path")) if serving and not drift else []
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
    applies = bool(live) and not restart and not loading and bool(live.get("changes") or live.get("unit"))
    if applies:
        what = describe(live.get("changes") or {}, (running or {}).get("live"))
        why.append(f"live: {what or 'the unit catches up with the server'}"
                   + (" through POST /set_internal_state, read back from /server_info" if what else "")
                   + (f"; {os.path.basename(str(live.get('path')))} rewritten" if live.get("unit") else "")
                   + "; no restart")
    return {"restart": restart, "rejoin": loading and not restart, "driver": rolled, "reboot": reboots, "why": why,
            "files": drift, "stale": stale, "live": live if applies else None}


def restart_decision(rendered: Any, files: Any, deployed: Any, driver: Any = None, reboot_pending: bool = False,
                     container_reboots: bool = False) -> dict:
    """restart_plan of one host from its files as they render now (``rendered``, in the order of ``files``, the
    unit first) and as sglang_service_state read them and the unit (``deployed``)."""
    rendered, deployed, files = list(rendered or []), dict(deployed or {}), list(files or [])
    drift = drifted_files(files, rendered, deployed.get("files") or {})
    state = (deployed.get("unit") or {}).get("ActiveState")
    unit_path = files[0]["dest"] if files else None
    live = None
    if rendered and unit_path and state in ("active", "activating", "reloading") and set(drift) <= {unit_path}:
        live = live_change(rendered[0], deployed.get("unit_file"), deployed.get("running"), unit_path in drift)
    if live is not None:
        live["path"] = unit_path
    plan = restart_plan([path for path in drift if path != unit_path] if live is not None else drift, state, driver,
                        deployed.get("reboot"), reboot_pending, container_reboots, deployed.get("running"),
                        rendered[0] if rendered else None, live)
    plan["files"] = drift  # what status shows as drift: the unit too, until the live change rewrites it
    return plan


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


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"drifted_files": drifted_files, "stale_process": stale_process, "restart_plan": restart_plan,
                "restart_decision": restart_decision}
