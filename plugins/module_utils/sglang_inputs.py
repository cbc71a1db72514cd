# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check every variable a user gives, for every role, before any play changes a host.

Ansible validates each entry point's argument spec when a play enters it, one role at a time, after earlier
plays may have changed hosts. This module checks every role's at once, first (``playbooks/check.yml``), with
Ansible's own validator (``ArgumentSpecValidator``: the type conversion and the choices are Ansible's), and adds
what an argument spec cannot say: stricter shapes (a string that is not a mapping, a list given as a list, no
bool for a number), ranges, characters that would break a unit, environment or config line, paths systemd
reads, names it refuses, conditions that would only fail when the server starts, typos of our variable names,
and internal switches set from outside.

``check(given, names, specs)``: ``given`` maps each variable the user set (inventory or ``-e``) to
its value, ``names`` is every variable name the host has (for typos), ``specs`` maps role name to
the ``options`` of its ``main`` entry point, ``groups`` the host's inventory groups (the router's rules
apply on the hosts of group sglang_routers). Returns refusals, each "<variable>: <why>; allowed: ...".
Standard library and ansible-core's module_utils only.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import os
import re
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import ArgumentValueError

from ._stall import ALLOWED as STALL_ALLOWED
from ._stall import stall_bounds
from .sglang_config import checked
from .sglang_quote import first_control_character
from .sglang_settings import ALIASES, SETTINGS, Kind, bind_address
from .sglang_types import SIZE_ALLOWED, Problems, is_unset, to_bool, to_bytes, to_float, to_int

# The settings table's variables: typed and ranged by their row, as the resolve step does.
ROWS: dict[str, Kind] = {s.var: s.kind for s in SETTINGS if s.var and s.emit != "derived"}
# Variables that are ours but in no role's argument spec: the play-level ones, and the fact the
# resolve step publishes.
PLAY_VARIABLES = {
    "sglang_rolling_serial": "a count >= 1 or a percentage such as 25%",
    "sglang_config": "",  # the published fact (roles/sglang_config)
}
PREFIXES = ("sglang_", "nvidia_driver_")
INTERNAL = re.compile(r"^__(sglang|nvidia|render)")

# Numbers: (minimum, maximum, what is allowed). An int option not listed must be >= 1. The SGLang
# settings' own ranges are their rows' in the settings table (sglang_settings), checked from there.
RANGES: dict[str, tuple[float, float, str]] = {
    "sglang_dist_init_port": (1, 65535, "an integer from 1 to 65535"),
    "sglang_router_port": (1, 65535, "an integer from 1 to 65535"),
    "sglang_router_prometheus_port": (1, 65535, "an integer from 1 to 65535"),
    "sglang_host_memory_available_gb": (0.0, 1e6, "a number of GB above 0 and at most 1000000"),
    "sglang_plan_host_memory_available_gb": (0.0, 1e6, "a number of GB above 0 and at most 1000000"),
    "sglang_service_restart_sec": (0, 86400, "whole seconds from 0 to 86400"),
    "sglang_ready_timeout": (60, 7 * 86400, "whole seconds from 60 to 604800 (a model load takes minutes)"),
    "sglang_service_probe_timeout": (30, 86400, "whole seconds from 30 to 86400"),
    "sglang_service_probe_nccl_timeout": (5, 86400, "whole seconds from 5 to 86400"),
}
_EXCLUSIVE_MINIMUM = {"sglang_host_memory_available_gb", "sglang_plan_host_memory_available_gb"}
_INT_DEFAULT = (1, float(1 << 31), "an integer from 1 to 2147483648")
_FLOAT_DEFAULT = (-1e12, 1e12, "a finite number")

# Paths systemd reads from the unit (WorkingDirectory=, EnvironmentFile=, ReadWritePaths=, ...) or
# the roles create on the host: absolute, and no blank (a separator in ReadWritePaths=), '%'
# (a systemd specifier), quote or backslash.
UNIT_PATHS = {
    "sglang_home", "sglang_venv_dir", "sglang_model_path", "sglang_speculative_draft_model_path",
    "sglang_service_unit_dir", "sglang_service_config_dir", "sglang_rollout_rollback_dir",
    "sglang_service_read_write_paths", "sglang_stack_wheelhouse_dir", "sglang_stack_uv_dir", "sglang_stack_python",
    "sglang_stack_python_install_dir", "sglang_router_venv_dir", "sglang_router_config_dir",
    "sglang_router_wheelhouse_dir", "sglang_weights_state_dir", "sglang_weights_hf_venv",
    "sglang_weights_hf_token_file", "nvidia_driver_proc_dir", "nvidia_driver_mok_keys",
}
_PATH_RE = re.compile(r"^/[^\s%\"'\\]*\Z")
# useradd's default NAME_REGEX (Debian adduser.conf), which User=/Group= also accept.
USER_NAMES = {"sglang_user", "sglang_group", "sglang_router_user"}
_USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\Z")
BIND_ADDRESSES = {"sglang_router_host"}  # sglang_host: its row in the settings table
# The router's listeners take IP addresses only: sglang-router 0.3.2 exits on a host name for --host ("Invalid
# address") and binds every interface for one in --prometheus-host (both measured). Empty: the role's default.
ROUTER_ADDRESSES = {"sglang_router_host", "sglang_router_prometheus_host"}
_SERIAL_RE = re.compile(r"^([1-9][0-9]*)%?\Z")
# Lists whose every item must match (sglang_service's unit lines): a DeviceAllow= value, a unit name.
PATTERNS = {
    "sglang_service_device_allow_extra": (
        re.compile(r"^(/dev/[A-Za-z0-9_./:+-]+|(char|block)-[A-Za-z0-9_.*?/+-]+)( [rwm]{1,3})?\Z"),
        'a DeviceAllow= value: "/dev/<node> rw" or "char-<group from /proc/devices> rw" (access r, w, m)'),
    "sglang_service_requires": (re.compile(r"^[A-Za-z0-9@_.:-]+\.(service|target|mount|socket|path|device)\Z"),
                                "a unit name such as nvidia-device-nodes.service"),
}
# API keys travel as HTTP bearer tokens: one word of printable ASCII. Refusals never show the value.
API_KEYS = {"sglang_api_key", "sglang_admin_api_key", "sglang_router_api_key", "sglang_router_admin_api_key"}
# Router flags the deploy owns (the launcher adds them from files) or that would put a secret on argv.
_ROUTER_OWN_FLAGS = {"api-key": "sglang_router_api_key", "control-plane-api-keys": "sglang_router_admin_api_key",
                     "worker-urls": "the inventory's group sglang_workers"}
_ROUTER_SECRET_FLAG = re.compile(r"api-keys?$|password|passwd|secret|credential|(^|-)token$")
# Task files the rollout includes on the controller; a missing one would stop the rollout mid-way.
HOOK_FILES = {"sglang_rollout_pre_restart_hooks", "sglang_rollout_post_restart_hooks"}
# Model config files read on the controller for the capacity plan.
JSON_FILES = {"sglang_model_config_file", "sglang_draft_config_file"}
# Text files read on the controller for the capacity plan.
TEXT_FILES = {"sglang_startup_log"}
# Sizes that state their unit (sglang_types.to_bytes), above 0 and at most 1 PB.
SIZES = {"sglang_model_weight_size", "sglang_draft_weight_size"}
_SIZE_MAX = 10**15
# Variables of earlier releases: refused with what replaced them, since ignoring them would plan without them.
# Old name -> (its successor, why, what the successor allows).
RENAMED: dict[str, tuple[str, str, str]] = {
    "sglang_model_weight_gb": ("sglang_model_weight_size", "a size that states its unit", ""),
    "sglang_draft_weight_gb": ("sglang_draft_weight_size", "a size that states its unit", ""),
}
# 2.0.0 split role sglang_service into the service, the rollout and the host maintenance: their variables moved.
_MOVED = {
    "sglang_rollout": ("pre_restart_hooks", "post_drain_hooks", "pre_start_hooks", "pre_rejoin_hooks",
                       "post_restart_hooks", "router_timeout", "rollback_dir", "lease", "lease_host", "lease_file",
                       "lease_ttl", "lease_takeover"),
    "sglang_maintenance": ("reboot_force", "reboot_timeout", "reboot_command"),
}
RENAMED |= {f"sglang_service_{suffix}": (f"{role}_{suffix}", f"role {role} owns it since 2.0.0",
                                         "the same value under the new name")
            for role, suffixes in _MOVED.items() for suffix in suffixes}


def known_names(specs: dict[str, dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Variable -> (role, option) for every option of every role's main entry point."""
    return {name: (role, option or {}) for role, options in specs.items() for name, option in (options or {}).items()}


def check(given: dict[str, Any], names: list[str], specs: dict[str, dict[str, Any]],
          command_line: set[str] | frozenset[str] = frozenset(),
          groups: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The refusals for one host's variables (see the module docstring). ``command_line``: the names given
    with -e, where one of our variables without its ``sglang_`` prefix is a mistake, not another tool's.
    ``groups``: the host's inventory groups."""
    known = known_names(specs)
    errors: list[str] = []
    errors += _names(names, given, known, command_line)
    for name in sorted(given):
        value = given[name]
        option = known.get(ALIASES.get(name, name), (None, None))[1]
        errors += _characters(name, value)
        if option is not None and not errors_about(errors, name):
            errors += _option(name, ALIASES.get(name, name), value, option)
        if ALIASES.get(name, name) in ROWS and not errors_about(errors, name) and not is_unset(value):
            errors += _row(name, value)
    errors += _cross(given, known)
    if "sglang_routers" in groups:
        errors += [e for e in _router_control_plane(given, known) if not errors_about(errors, e.split(":", 1)[0])]
    return errors


def errors_about(errors: list[str], name: str) -> bool:
    return any(e.startswith(name + ":") or e.startswith(name + "[") for e in errors)


# --- names -------------------------------------------------------------------------------------

def _names(names: list[str], given: dict[str, Any], known: dict[str, Any],
           command_line: set[str] | frozenset[str] = frozenset()) -> list[str]:
    ours = sorted({*known, *ALIASES, *PLAY_VARIABLES})
    errors = []
    for name in sorted(command_line - set(ours)):
        if "sglang_" + name in known:
            errors.append(f"{name}: is not a variable of sglang-deploy and would be ignored; allowed: did you mean "
                          f"sglang_{name}?")
    for name in sorted((set(names) | set(given)) - {e.split(":", 1)[0] for e in errors}):
        if name in RENAMED:
            successor, why, allowed = RENAMED[name]
            errors.append(f"{name}: was replaced by {successor}, {why}; allowed: {successor}: "
                          f"{allowed or SIZE_ALLOWED}")
            continue
        if INTERNAL.match(name) and name in given:
            errors.append(f"{name}: is internal to the roles and cannot be set from outside; allowed: the documented "
                          "variables (README, roles/*/README.md)")
            continue
        if name in ours or name.startswith("ansible_"):
            continue
        normal = name.lower().replace("-", "_").strip("_")
        close = [normal] if normal in ours else difflib.get_close_matches(normal, ours, n=2, cutoff=0.85)
        if name.startswith(PREFIXES) or close:
            hint = f"did you mean {' or '.join(close)}?" if close else "a variable the roles document"
            errors.append(f"{name}: is not a variable of sglang-deploy and would be ignored; allowed: {hint}")
    return errors


# --- one value -------------------------------------------------------------------------------

def _characters(name: str, value: Any, path: str = "") -> list[str]:
    """Any text that reaches a unit, environment or config file must be one line of printable text."""
    where = name + path
    if isinstance(value, str):
        index = first_control_character(value)
        if index is None:
            return []
        return [f"{where}: contains the control character {value[index]!r} at position {index} (a newline would "
                "start a new line of the unit or file); allowed: one line of printable text"]
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            found += _characters(name, key, f"{path}[key {key!r}]") if isinstance(key, str) else []
            found += _characters(name, item, f"{path}[{key!r}]")
        return found
    if isinstance(value, list):
        return [e for index, item in enumerate(value) for e in _characters(name, item, f"{path}[{index}]")]
    return []


def _option(name: str, var: str, value: Any, option: dict[str, Any]) -> list[str]:
    """One value against its argument spec (type, choices), its range, and the rules of its variable."""
    kind = option.get("type") or "str"
    if value is None or (value == "" and kind != "str"):
        if value == "" and name in ALIASES:
            return [f"{name}: is given empty; allowed: {ROWS[var].allowed if var in ROWS else 'a value'}, or leave "
                    "it out"]
        return ansible_checked(name, value, option)[1]  # empty is unset, unless the entry point's check refuses it
    try:
        _typed(value, kind, option)  # the shapes a spec cannot make strict (a bool is no number, "a,b" no list)
    except ValueError as exc:
        word = "off" if value is False else "on"
        if isinstance(value, bool) and word in (option.get("choices") or []):
            return [f"{name}: is the bool {value}, which is how YAML reads a bare {word}; allowed: "
                    f"{', '.join(map(str, option['choices']))}, quoted (\"{word}\")"]
        return [f"{name}: {exc}"]
    typed, errors = ansible_checked(name, value, option)
    if errors:
        return errors
    if kind in ("int", "float") and var not in ROWS:
        errors += _range(name, var, typed, kind)
    return errors + [f"{name}{problem}" for rule in _RULES for problem in rule(var, typed)]


def ansible_checked(name: str, value: Any, option: dict[str, Any]) -> tuple[Any, list[str]]:
    """The value as Ansible's argument-spec validator converts it (type, elements, choices: what the entry point's
    own validation will see), and its refusals in this module's form."""
    spec = {key: option[key] for key in ("type", "elements", "choices") if key in option}
    result = ArgumentSpecValidator({name: spec}).validate({name: value})
    typed = result.validated_parameters.get(name, value)
    errors = []
    for error in result.errors:
        choices = option.get("choices") or []
        if isinstance(error, ArgumentValueError) and choices:
            near = [c for c in choices if str(c).lower() == str(typed).lower()]
            hint = f" (did you mean {near[0]}?)" if near else ""
            errors.append(f"{name}: {typed!r} is not one of the choices{hint}; allowed: "
                          f"{', '.join(map(str, choices))}")
        elif value == "":
            errors.append(f"{name}: is given empty; allowed: a value of type {spec.get('type', 'str')}, or leave it "
                          "out")
        else:
            errors.append(f"{name}: {error}; allowed: a value of type {spec.get('type', 'str')}")
    return typed, errors


def _paths(var: str, typed: Any) -> list[str]:
    if var not in UNIT_PATHS:
        return []
    return [f": {item!r} is not a plain absolute path; allowed: an absolute path without blanks, '%', quotes or "
            "backslashes (systemd reads it from the unit)"
            for item in (typed if isinstance(typed, list) else [typed]) if item != "" and not _PATH_RE.match(str(item))]


def _names_of_users(var: str, typed: Any) -> list[str]:
    if var not in USER_NAMES or _USER_RE.match(str(typed)):
        return []
    return [f": {typed!r} is not a user or group name; allowed: lower-case letters, digits, '_' and '-', starting "
            "with a letter or '_', at most 32 characters"]


def _patterns(var: str, typed: Any) -> list[str]:
    if var not in PATTERNS:
        return []
    pattern, allowed = PATTERNS[var]
    return [f": {item!r} does not fit; allowed: {allowed}" for item in typed if not pattern.match(str(item))]


def _files(var: str, typed: Any) -> list[str]:
    if var in HOOK_FILES:
        return [f": {item!r} is not an existing task file; allowed: the absolute path of a task file on the "
                "controller" for item in typed if not (str(item).startswith("/") and os.path.isfile(item))]
    if var in JSON_FILES and typed:
        return _json_file(str(typed))
    if var in TEXT_FILES and typed and not os.path.isfile(str(typed)):
        return [f": {typed!r} is not an existing file; allowed: the path on the controller of a server's startup "
                "output, or empty"]
    return []


def _addresses(var: str, typed: Any) -> list[str]:
    if var in ROUTER_ADDRESSES:
        empty_allowed = var != "sglang_router_host"
        if (empty_allowed and typed == "") or _ip_address(str(typed)):
            return []
        empty = ", or empty for the host's own address" if empty_allowed else ""
        return [f": {typed!r} is not an IP address; allowed: an IPv4 or IPv6 address (sglang-router refuses a host "
                f"name, or binds every interface for one){empty}"]
    if var not in BIND_ADDRESSES or _bind_address(str(typed)):
        return []
    return [f": {typed!r} is not an address to bind; allowed: an IPv4 or IPv6 address, or a host name"]


def _ip_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def _api_keys(var: str, typed: Any) -> list[str]:
    if var not in API_KEYS or all("!" <= c <= "~" for c in str(typed)):
        return []
    return [": contains a blank or a character outside printable ASCII (the value is not shown); allowed: one word "
            "of printable ASCII, sent as an HTTP bearer token"]


def _router_flags(var: str, typed: Any) -> list[str]:
    if var != "sglang_router_extra_args":
        return []
    errors = []
    for flag in typed:
        name = str(flag).lstrip("-").replace("_", "-")
        if name in _ROUTER_OWN_FLAGS:
            errors.append(f"[{flag!r}]: is set by the deploy; allowed: other router flags (use "
                          f"{_ROUTER_OWN_FLAGS[name]})")
        elif _ROUTER_SECRET_FLAG.search(name):
            errors.append(f"[{flag!r}]: would put a secret on the router's command line, readable by every user; "
                          "allowed: flags without secrets (the router's keys go in sglang_router_api_key and "
                          "sglang_router_admin_api_key)")
    return errors


def _sizes(var: str, typed: Any) -> list[str]:
    if var not in SIZES or is_unset(typed):
        return []
    try:
        size = to_bytes(typed)
    except ValueError as exc:
        return [f": {exc}; allowed: {SIZE_ALLOWED}"]
    if not 0 < size <= _SIZE_MAX:
        return [f": {typed!r} is out of range; allowed: above 0 and at most 1 PB"]
    return []


NUMA_MEMORY_ALLOWED = ("{nodes_gb: {<node>: <GB available>, ...}, gpus: [<node of GPU 0>, <node of GPU 1>, ...]}, "
                       "with two or more nodes")


def numa_memory(value: Any) -> dict[str, Any]:
    """sglang_host_numa_memory (GB per node, the node of each GPU) as the plan counts it (bytes per node), the
    shape sglang_host_facts reads on the host; ValueError names what is wrong."""
    if not isinstance(value, dict) or set(value) != {"nodes_gb", "gpus"}:
        raise ValueError("must have exactly the keys nodes_gb and gpus")
    nodes, gpus = value["nodes_gb"], value["gpus"]
    if not isinstance(nodes, dict) or len(nodes) < 2:
        raise ValueError("nodes_gb must map two or more NUMA nodes to their available GB")
    parsed: dict[str, int] = {}
    for node, gb in nodes.items():
        if not re.fullmatch(r"[0-9]{1,4}", str(node)) or isinstance(gb, bool) or not isinstance(gb, (int, float)) \
                or not 0 < gb <= 1e6:
            raise ValueError(f"nodes_gb[{node!r}]: {gb!r} is not a node number with a number of GB above 0")
        parsed[str(int(str(node)))] = int(gb * 1e9)
    if not isinstance(gpus, list) or not gpus or any(isinstance(n, bool) or not isinstance(n, int) for n in gpus):
        raise ValueError("gpus must list the NUMA node (an integer) of each GPU, GPU 0 first")
    unknown = sorted({n for n in gpus if str(n) not in parsed})
    if unknown:
        raise ValueError(f"gpus names node(s) {unknown} that nodes_gb does not give")
    return {"nodes": parsed, "gpus": list(gpus)}


def _numa(var: str, typed: Any) -> list[str]:
    if var != "sglang_host_numa_memory" or is_unset(typed):
        return []
    try:
        numa_memory(typed)
    except ValueError as exc:
        return [f": {exc}; allowed: {NUMA_MEMORY_ALLOWED}"]
    return []


def _stalls(var: str, typed: Any) -> list[str]:
    return _stall_timeouts(typed) if var == "sglang_service_stall_timeouts" else []


def _row(name: str, value: Any) -> list[str]:
    """A setting of the table, typed and ranged by its row, named as the resolve step names it."""
    var = ALIASES.get(name, name)
    problems = Problems()
    checked(problems, f"{name} (overrides {var})" if name in ALIASES else name, value, ROWS[var])
    return problems.errors


def _as_text(value: Any, _option: dict[str, Any]) -> str:
    if isinstance(value, (dict, list, bool)):
        raise ValueError(f"is a {type(value).__name__}; allowed: a string")
    return str(value)


def _as_bool(value: Any, _option: dict[str, Any]) -> bool:
    try:
        return to_bool(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a boolean; allowed: true or false") from None


def _as_number(kind: str) -> Any:
    def convert(value: Any, _option: dict[str, Any]) -> Any:
        what = "an integer" if kind == "int" else "a finite number"
        try:
            return (to_int if kind == "int" else to_float)(value)
        except (ValueError, OverflowError):
            raise ValueError(f"{value!r} is not {what}; allowed: {what}") from None
    return convert


def _as_list(value: Any, option: dict[str, Any]) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"is a {type(value).__name__}, not a list; allowed: a list (with -e, give JSON: "
                         "-e '{\"name\": [...]}')")
    for index, item in enumerate(value):
        if option.get("elements") == "str" and (isinstance(item, (dict, list, bool)) or item is None):
            raise ValueError(f"item {index} is a {type(item).__name__}; allowed: a list of strings")
    return value


def _as_dict(value: Any, _option: dict[str, Any]) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"is a {type(value).__name__}, not a mapping; allowed: a mapping (with -e, give JSON: "
                         "-e '{\"name\": {...}}')")
    return value


_TYPES = {"str": _as_text, "path": _as_text, "bool": _as_bool, "int": _as_number("int"),
          "float": _as_number("float"), "list": _as_list, "dict": _as_dict}


def _typed(value: Any, kind: str, option: dict[str, Any]) -> Any:
    convert = _TYPES.get(kind)
    return convert(value, option) if convert else value


def _range(name: str, var: str, number: float, kind: str) -> list[str]:
    low, high, allowed = RANGES.get(var, _INT_DEFAULT if kind == "int" else _FLOAT_DEFAULT)
    too_low = number <= low if var in _EXCLUSIVE_MINIMUM else number < low
    too_high = number > high
    if too_low or too_high:
        return [f"{name}: {number!r} is out of range; allowed: {allowed}"]
    return []


def _stall_timeouts(bounds: dict[Any, Any]) -> list[str]:
    return [f": {problem}; allowed: {STALL_ALLOWED}" for problem in stall_bounds(bounds)[1]]


def _json_file(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [f": {path!r} cannot be read as JSON ({exc}); allowed: the model's config.json, copied to the "
                "controller"]
    if not isinstance(data, dict):
        return [f": {path!r} holds a {type(data).__name__}, not a JSON object; allowed: the model's config.json"]
    return []


def _bind_address(text: str) -> bool:
    try:
        bind_address(text)
        return True
    except ValueError:
        return False


# --- across variables ----------------------------------------------------------------------

def _effective(given: dict[str, Any], known: dict[str, Any], name: str) -> Any:
    if name in given:
        return given[name]
    option = known.get(name, (None, {}))[1]
    return option.get("default")


def _cross(given: dict[str, Any], known: dict[str, Any]) -> list[str]:
    """Conditions that would otherwise fail only when the server or the rollout starts."""
    errors = []
    try:
        port = to_int(_effective(given, known, "sglang_port"))
    except (ValueError, TypeError):
        port = 1024
    user = str(_effective(given, known, "sglang_user"))
    hardening = str(_effective(given, known, "sglang_service_hardening"))
    if port < 1024 and (user != "root" or hardening == "strict"):
        errors.append(f"sglang_port: {port} is a privileged port, which the server (user {user}, hardening "
                      f"{hardening}, no capabilities) cannot bind; allowed: a port from 1024 to 65535")
    if "sglang_rolling_serial" in given:
        serial = str(given["sglang_rolling_serial"]).strip()
        match = _SERIAL_RE.match(serial)
        if not match or (serial.endswith("%") and int(match.group(1)) > 100):
            errors.append(f"sglang_rolling_serial: {serial!r} is not a batch size; allowed: "
                          f"{PLAY_VARIABLES['sglang_rolling_serial']} (at most 100%)")
    return errors


def _router_control_plane(given: dict[str, Any], known: dict[str, Any]) -> list[str]:
    """On a router host: the control plane (the worker API) has a key of its own, held by the deploy, unless
    the router listens on loopback only or the inventory opts out."""
    key = str(_effective(given, known, "sglang_router_api_key") or "")
    admin = str(_effective(given, known, "sglang_router_admin_api_key") or "")
    host = str(_effective(given, known, "sglang_router_host"))
    if key and admin and key == admin:
        return ["sglang_router_admin_api_key: is the same as sglang_router_api_key, so every client could add and "
                "remove the router's workers (the value is not shown); allowed: a key of its own for the "
                "control plane"]
    try:
        insecure = to_bool(_effective(given, known, "sglang_router_allow_insecure_control_plane"))
    except ValueError:
        return []  # refused as that variable's own problem
    if insecure or not _ip_address(host) or ipaddress.ip_address(host).is_loopback:
        return []
    allowed = ("allowed: a key (one word of printable ASCII, in Ansible Vault), a loopback sglang_router_host "
               "(127.0.0.1, ::1), or sglang_router_allow_insecure_control_plane: true")
    where = f"is empty while the router binds {host} (sglang_router_host), off loopback, so"
    errors = []
    if not admin:
        who = "every holder of the clients' key (sglang_router_api_key)" if key else "anyone who reaches it"
        errors.append(f"sglang_router_admin_api_key: {where} {who} could add a worker (which then receives a share "
                      f"of every prompt) or remove every worker; {allowed}")
    if not key:
        errors.append(f"sglang_router_api_key: {where} anyone who reaches it uses every server behind it; {allowed}")
    return errors


# The rules of particular variables, each (variable, typed value) -> problems as ": why; allowed: ...".
_RULES = (_paths, _names_of_users, _patterns, _files, _addresses, _api_keys, _router_flags, _sizes, _stalls,
          _numa)
