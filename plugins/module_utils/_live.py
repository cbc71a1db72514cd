# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Live changes: the settings a running SGLang server takes through its API, without a restart.

SGLang 0.5.23 changes a few settings of a running server through ``POST /set_internal_state``
(``srt/managers/scheduler_components/internal_state.py``, ``_update_handlers``): the two speculative
acceptance thresholds the settings table marks ``live_default`` (sglang_settings.LIVE), plus
``pp_max_micro_batch_size`` and two DSpark keys the package does not manage. It refuses the whole request when
any key is not one of them. ``GET /server_info`` reads the values back: its ``internal_states`` (one per
data-parallel rank) hold the resolved configuration with the overrides, while its top-level ``server_args``
keep the values of the launch.

A change is live when the unit as it renders now and the unit on the host differ only in those flags' values,
and the running server was started with the same argv but for them. The unit is rewritten all the same, so
that the next start keeps the change; what the running server holds is read from ``/server_info`` and not
from its argv, which keeps the launch's values. Standard library only.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from .sglang_quote import exec_argv
from .sglang_settings import LIVE

# The addresses a server bound to all interfaces, or to the loopback, answers on at 127.0.0.1.
LOCAL_BINDS = ("", "0.0.0.0", "::", "127.0.0.1", "localhost")


def scheme(tls: Any = False) -> str:
    """The one rule of the scheme every client of a server uses (the deploy's, the router's, Prometheus'):
    https when the server has TLS (sglang_tls_cert: SGLang then serves https only), else http."""
    return "https" if tls is True or str(tls).strip().lower() in ("true", "yes", "on", "1") else "http"


def base_url(host: Any, port: Any, tls: Any = False) -> str:
    """``<scheme>://<host>:<port>``, an IPv6 address in brackets."""
    text = str(host or "").strip()
    return f"{scheme(tls)}://{f'[{text}]' if ':' in text else text}:{int(port)}"


def server_url(bind: Any, port: Any, tls: Any = False) -> str:
    """The address this host reaches its own server at, from the address it binds (sglang_host) and its port:
    127.0.0.1 for a wildcard or loopback bind, else the bind itself (an IPv6 one in brackets); https with TLS."""
    host = "127.0.0.1" if str(bind or "").strip() in LOCAL_BINDS else str(bind).strip()
    return base_url(host, port, tls)


def split_live(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """``argv`` without the live flags (``--flag value`` or ``--flag=value``), and their values by key."""
    rest: list[str] = []
    values: dict[str, str] = {}
    index = 0
    while index < len(argv):
        word = argv[index]
        flag, equals, inline = word.partition("=")
        if flag in LIVE and equals:
            values[LIVE[flag][0]] = inline
        elif word in LIVE and index + 1 < len(argv):
            values[LIVE[word][0]] = argv[index + 1]
            index += 1
        else:
            rest.append(word)
        index += 1
    return rest, values


def live_values(argv: list[str]) -> dict[str, float | None]:
    """What each live setting is with this argv: its value, SGLang's default when the flag is absent, None when
    the value is not a number (the server would refuse it at start)."""
    given = split_live(argv)[1]
    values: dict[str, float | None] = {}
    for key, default in LIVE.values():
        try:
            values[key] = float(given[key]) if key in given else float(default)
        except ValueError:
            values[key] = None
    return values


def unit_rest(unit: str) -> str:
    """The SHA-1 of a unit file without its ExecStart= line (with its continuation lines): equal for two units that
    differ only in what they run."""
    kept, section, in_exec, continued = [], "", False, False
    for raw in str(unit).split("\n"):
        line = raw.strip(" \t\r")
        if not continued:
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
            in_exec = section == "Service" and line.startswith("ExecStart=")
        continued = line.endswith("\\")
        if not in_exec:
            kept.append(raw)
    return hashlib.sha1("\n".join(kept).encode("utf-8")).hexdigest()


def unit_summary(unit: str | None) -> dict[str, Any] | None:
    """What the live decision needs of a unit on the host: what its ExecStart= runs, and the digest of the rest."""
    if unit is None:
        return None
    return {"exec": exec_argv(unit), "rest": unit_rest(unit)}


def server_values(info: Any) -> dict[str, float] | None:
    """The live settings a running server holds, from its /server_info: the ``internal_states`` of every
    data-parallel rank, which must agree; None when they are missing or disagree (then the change is made again,
    which is harmless: it sets the same values)."""
    states = info.get("internal_states") if isinstance(info, dict) else None
    if not isinstance(states, list) or not states:
        return None
    values: dict[str, float] = {}
    for key, _default in LIVE.values():
        seen = {_number(state.get(key)) if isinstance(state, dict) else None for state in states}
        if len(seen) != 1 or None in seen:
            return None
        values[key] = seen.pop()  # type: ignore[assignment]
    return values


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def live_change(wanted_unit: str, deployed_unit: Any, running: Any, unit_drifts: bool) -> dict[str, Any] | None:
    """The live change that brings a running server to ``wanted_unit`` (the unit as it renders now), or None when
    one cannot: ``{changes: {key: value}, unit: whether the unit file is rewritten, explained: what the running
    server differs in}``. ``deployed_unit``: unit_summary of the unit on the host; ``running``: the deployed state's
    ``running`` (argv, listening, and ``live``, the values /server_info read, or None); ``unit_drifts``: whether the
    unit on the host differs from ``wanted_unit``. An empty ``changes`` with ``unit`` false: nothing to do."""
    wanted = exec_argv(str(wanted_unit))
    argv = running.get("argv") if isinstance(running, dict) else None
    if wanted is None or not isinstance(argv, list) or "sglang.launch_server" not in argv:
        return None
    if running.get("listening") is False:  # still loading: it cannot take a change yet
        return None
    if _nodes(wanted) != 1:  # only node 0 of a multi-node server serves HTTP: it restarts as one unit
        return None
    if split_live(argv)[0] != split_live(wanted)[0]:
        return None
    if unit_drifts:
        deployed = deployed_unit if isinstance(deployed_unit, dict) else {}
        exec_now = deployed.get("exec")
        if (not isinstance(exec_now, list) or deployed.get("rest") != unit_rest(str(wanted_unit))
                or split_live(exec_now)[0] != split_live(wanted)[0]):
            return None
    target = live_values(wanted)
    if None in target.values():
        return None
    held = running.get("live")
    if not isinstance(held, dict):
        # Unread (the server did not answer /server_info): set whatever the launch does not already hold.
        launched = live_values(argv)
        held = launched if not unit_drifts and launched == target else {}
    changes = {key: value for key, value in target.items() if _number(held.get(key)) != value}
    return {"changes": changes, "unit": bool(unit_drifts)}


def _nodes(argv: list[str]) -> int:
    try:
        return int(argv[argv.index("--nnodes") + 1]) if "--nnodes" in argv else 1
    except (IndexError, ValueError):
        return 0


def describe(changes: dict[str, Any], held: Any) -> str:
    """One line for the plan: each key, from what the server holds to the new value."""
    held = held if isinstance(held, dict) else {}
    parts = [f"{key} {held.get(key, '?')} -> {value}" for key, value in sorted(changes.items())]
    return ", ".join(parts)
