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

from . import _field_rules
from ._firewall import EXTRA_VARIABLE as IP_ALLOW_EXTRA
from ._firewall import extra_errors as ip_allow_extra_errors
from ._stall import ALLOWED as STALL_ALLOWED
from ._stall import stall_bounds
from .sglang_config import MAX_ARG_STRLEN, checked
from .sglang_quote import first_control_character
from .sglang_settings import ALIASES, SETTINGS, Kind, bind_address
from .sglang_types import SIZE_ALLOWED, Problems, all_or_none, is_unset, to_bool, to_bytes, to_float, to_int

# The settings table's variables: typed and ranged by their row, as the resolve step does.
ROWS: dict[str, Kind] = {s.var: s.kind for s in SETTINGS if s.var and s.emit != "derived"}
# Variables that are ours but in no role's argument spec: the play-level ones, and the fact the
# resolve step publishes.
PLAY_VARIABLES = {
    "sglang_rolling_serial": "a count >= 1 or a percentage such as 25%",
    "sglang_config": "",  # the published fact (roles/sglang_config)
}
PREFIXES = ("sglang_", "nvidia_driver_")
INTERNAL = re.compile(r"^__(sglang|nvidia|render|check_|deploy_)")

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
    "sglang_rollout_lease_lock_timeout": (1, 3600, "whole seconds from 1 to 3600"),
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
                     "worker-urls": "the inventory's group sglang_workers",
                     "ca-cert-paths": "sglang_tls_ca of the servers that serve https",
                     "tls-cert-path": "sglang_router_tls_cert", "tls-key-path": "sglang_router_tls_key"}
_ROUTER_SECRET_FLAG = re.compile(r"api-keys?$|password|passwd|secret|credential|(^|-)token$")
# TLS (role sglang): PEM texts, several lines by nature; each must hold what its name says. Refusals never show the
# key. An encrypted key is refused: SGLang's --ssl-keyfile-password is returned by /server_info.
PEM = {"sglang_tls_cert": "certificate", "sglang_tls_ca": "certificate", "sglang_tls_key": "private key",
       "sglang_router_tls_cert": "certificate", "sglang_router_tls_ca": "certificate",
       "sglang_router_tls_key": "private key", "sglang_router_worker_ca": "certificate"}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\r?\n[A-Za-z0-9+/=\s:,-]*?\r?\n?-----END \1-----")
_PEM_ENCRYPTED = re.compile(r"ENCRYPTED|Proc-Type: *4, *ENCRYPTED")
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
          groups: set[str] | frozenset[str] = frozenset(),
          hosts: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The refusals for one host's variables (see the module docstring). ``command_line``: the names given
    with -e, where one of our variables without its ``sglang_`` prefix is a mistake, not another tool's.
    ``groups``: the host's inventory groups; ``hosts``: every host of the inventory (empty: not known)."""
    known = known_names(specs)
    errors: list[str] = []
    errors += _names(names, given, known, command_line)
    for name in sorted(given):
        value = given[name]
        option = known.get(ALIASES.get(name, name), (None, None))[1]
        errors += _characters(name, value) if name not in PEM else _pem(name, value)
        if option is not None and not errors_about(errors, name):
            errors += _option(name, ALIASES.get(name, name), value, option)
        if not errors_about(errors, name):  # the install roles' one-value rules, which their settings checks share
            errors += _field_rules.refusal(name, value)
        if ALIASES.get(name, name) in ROWS and not errors_about(errors, name) and not is_unset(value):
            errors += _row(name, value)
    errors += _cross(given, known)
    if "sglang_routers" in groups:
        errors += [e for e in _router_control_plane(given, known) + _router_tls(given, known)
                   if not errors_about(errors, e.split(":", 1)[0])]
    errors += safety(given, known, errors)
    errors += _lease_host(given, hosts, errors)
    return errors


def _lease_host(given: dict[str, Any], hosts: set[str] | frozenset[str], errors: list[str]) -> list[str]:
    """The lease host is where every deploy takes the lease (delegate_to): a host of this inventory, or empty."""
    value = given.get("sglang_rollout_lease_host")
    if is_unset(value) or not hosts or str(value) in hosts or errors_about(errors, "sglang_rollout_lease_host"):
        return []
    return [f"sglang_rollout_lease_host: {str(value)!r} is not a host of the inventory, so no deploy could take the "
            "lease there; allowed: a host of the inventory (a router, or a server), or empty for the first router "
            "(the first server without one)"]


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


def _pem(name: str, value: Any) -> list[str]:
    """A TLS variable: empty, or PEM blocks of its kind and nothing but blank lines around them (the value is never
    shown: one of them is a private key)."""
    if not isinstance(value, str) or not value.strip():
        return []
    kind = PEM[name]
    allowed = {"certificate": "PEM text of one or more -----BEGIN CERTIFICATE----- blocks",
               "private key": "an unencrypted PEM private key (-----BEGIN PRIVATE KEY----- or -----BEGIN RSA/EC "
                              "PRIVATE KEY-----), kept in Ansible Vault"}[kind]
    text = value.strip()
    blocks = list(_PEM_BLOCK.finditer(text))
    labels = [block.group(1) for block in blocks]
    if not blocks or _PEM_BLOCK.sub("", text).strip():
        path = "\n" not in text and text.startswith("/")
        hint = " (the text, not a path: \"{{ lookup('file', 'tls/server.pem') }}\")" if path else ""
        return [f"{name}: is not PEM text{' but a path' if path else ''} (the value is not shown); allowed: "
                f"{allowed}{hint}"]
    if kind == "private key":
        if any(_PEM_ENCRYPTED.search(block.group(0)) for block in blocks):
            return [f"{name}: is an encrypted private key, which SGLang could only open with --ssl-keyfile-password, "
                    f"and /server_info returns that password; allowed: {allowed} (openssl pkey -in key.pem -out "
                    "plain.pem)"]
        if len(blocks) != 1 or not labels[0].endswith("PRIVATE KEY"):
            return [f"{name}: holds {', '.join(labels)} (the value is not shown), not one private key; allowed: "
                    f"{allowed}"]
    elif any(label != "CERTIFICATE" for label in labels):
        return [f"{name}: holds {', '.join(sorted(set(labels)))}, not only certificates; allowed: {allowed}"]
    return []


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
    if var not in API_KEYS:
        return []
    if not all("!" <= c <= "~" for c in str(typed)):
        return [": contains a blank or a character outside printable ASCII (the value is not shown); allowed: one "
                "word of printable ASCII, sent as an HTTP bearer token"]
    if str(typed).startswith("-"):
        # SGLang's --config merger passes it as the word after --api-key; argparse reads a word starting with '-' as
        # an option, and the server exits 2 ("expected one argument").
        return [": starts with '-', which SGLang's argument parser would read as an option (the value is not "
                "shown); allowed: one word of printable ASCII that does not start with '-'"]
    return []


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
    # The playbook's batch size, and the role input deploy.yml passes it as (which -e would override).
    for name in ("sglang_rolling_serial", "sglang_service_rolling_serial"):
        if name in given:
            serial = str(given[name]).strip()
            match = _SERIAL_RE.match(serial)
            if not match or (serial.endswith("%") and int(match.group(1)) > 100):
                errors.append(f"{name}: {serial!r} is not a batch size; allowed: "
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


def _router_tls(given: dict[str, Any], known: dict[str, Any]) -> list[str]:
    """On a router host: sglang_router_tls_cert, _key and _ca, all three or none (the values are never shown)."""
    names = ("sglang_router_tls_cert", "sglang_router_tls_key", "sglang_router_tls_ca")
    present = {name: bool(str(_effective(given, known, name) or "").strip()) for name in names}
    what = {"sglang_router_tls_cert": "the router's PEM certificate (chain)",
            "sglang_router_tls_key": "its unencrypted PEM private key, in Ansible Vault",
            "sglang_router_tls_ca": "the PEM certificate of the CA that signed it, which the deploy verifies the "
                                    "router against"}
    return [f"{name}: {message}" for name, message in all_or_none(present, what, "no TLS on the router")]


# Names of the inventory's groups that a role reads (Ansible's own rule for a group name).
GROUP_NAMES = {"sglang_service_prometheus_group"}
_GROUP_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def _group_names(var: str, typed: Any) -> list[str]:
    if var not in GROUP_NAMES or _GROUP_RE.match(str(typed)):
        return []
    return [f": {str(typed)!r} is not a group name; allowed: a group of the inventory (letters, digits and _, "
            "not starting with a digit)"]


def _ip_allow(var: str, typed: Any) -> list[str]:
    """sglang_service_ip_allow_extra: each item an address, a CIDR or a systemd keyword (module_utils _firewall)."""
    if var != IP_ALLOW_EXTRA:
        return []
    return [error.removeprefix(IP_ALLOW_EXTRA) for error in ip_allow_extra_errors(typed)]


# The rules of particular variables, each (variable, typed value) -> problems as ": why; allowed: ...".
_RULES = (_paths, _names_of_users, _patterns, _files, _addresses, _api_keys, _router_flags, _sizes, _stalls,
          _numa, _ip_allow, _group_names)


# --- no input can hurt a host (issue 49) -------------------------------------------------------
# Appended rules, each a table and a function: the paths the package owns, chowns, makes writable or prunes;
# the accounts it creates; the presharded dump directory; hook files, URL paths and the lease; switches the
# playbooks set; cross-field rules. ``safety(given, known)`` (called by ``check``) returns their refusals.

# Directories of the system, refused as a path the package owns (creates, chowns, makes writable for the unit or
# prunes), with the reason. "tree": refused with everything under it; "dir": refused itself (a directory under
# it, /opt/sglang, /var/lib/sglang, /srv/models, is allowed).
SYSTEM_PATHS: dict[str, tuple[str, str]] = {
    "/": ("dir", "the root of the filesystem (chowned, sshd's StrictModes refuses every login key)"),
    "/bin": ("tree", "the system's programs (with merged /usr, a link into /usr)"),
    "/sbin": ("tree", "the system's programs (with merged /usr, a link into /usr)"),
    "/lib": ("tree", "the system's libraries (with merged /usr, a link into /usr)"),
    "/lib32": ("tree", "the system's libraries"),
    "/lib64": ("tree", "the system's libraries and the dynamic loader"),
    "/libx32": ("tree", "the system's libraries"),
    "/usr": ("tree", "the system's programs and libraries (read-only for the unit under ProtectSystem=strict)"),
    "/etc": ("tree", "the system's configuration (a writable /etc gives the server cron.d and ld.so.preload: root)"),
    "/boot": ("tree", "the kernel and the boot loader"),
    "/proc": ("tree", "the kernel's process interface, not storage"),
    "/sys": ("tree", "the kernel's device interface, not storage"),
    "/dev": ("tree", "device nodes, not storage"),
    "/run": ("tree", "a tmpfs emptied at every boot, and the system's sockets"),
    "/tmp": ("tree", "world-writable scratch, which the unit's PrivateTmp= hides and any user may pre-create"),
    "/var/tmp": ("tree", "world-writable scratch, which the unit's PrivateTmp= hides and any user may pre-create"),
    "/root": ("tree", "root's home"),
    "/home": ("dir", "the parent of the users' homes"),
    "/opt": ("dir", "the parent of every add-on package (use a directory of its own, /opt/<name>/...)"),
    "/srv": ("dir", "the parent of every site's data (use a directory of its own, /srv/<name>)"),
    "/mnt": ("dir", "the parent of mount points"),
    "/media": ("dir", "the parent of removable media"),
    "/var": ("dir", "the system's variable data"),
    "/var/lib": ("dir", "every package's state"),
    "/var/log": ("dir", "every program's logs"),
    "/var/cache": ("dir", "every package's caches"),
    "/var/spool": ("dir", "mail, print and cron queues"),
    "/var/mail": ("dir", "the users' mail"),
    "/var/opt": ("dir", "the add-on packages' variable data"),
    "/var/local": ("dir", "the local administrator's variable data"),
    "/var/backups": ("dir", "the system's backups"),
    "/snap": ("dir", "snap packages"),
    "/lost+found": ("dir", "fsck's recovered files"),
}
# Directories of /etc the operating system owns: a configuration directory of the package (root:<group> 0750) may
# be /etc/<name> of its own, never one of these, anything under them, nor /etc itself.
ETC_SYSTEM = frozenset({
    "alternatives", "apparmor.d", "apt", "cron.d", "cron.daily", "cron.hourly", "cron.monthly", "cron.weekly",
    "dbus-1", "default", "docker", "dpkg", "environment.d", "init.d", "kernel", "ld.so.conf.d", "logrotate.d",
    "modprobe.d", "modules-load.d", "netplan", "network", "NetworkManager", "pam.d", "polkit-1", "profile.d",
    "rc0.d", "rc1.d", "rc2.d", "rc3.d", "rc4.d", "rc5.d", "rc6.d", "rcS.d", "security", "selinux", "skel",
    "ssh", "ssl", "sudoers.d", "sysctl.d", "systemd", "tmpfiles.d", "udev", "X11",
})
# Paths the package owns: (variable, what the package does with it).
OWNED_PATHS: dict[str, str] = {
    "sglang_home": "the service user's home: created, chowned to sglang_user, writable for the unit",
    "sglang_presharded_dir": "the presharded dump directory: created for sglang_user, its old dumps pruned",
    "sglang_service_read_write_paths": "made writable for the unit (ReadWritePaths=)",
    "sglang_venv_dir": "the server's virtualenv: created (its parent chowned root:sglang_group 0755)",
    "sglang_router_venv_dir": "the router's virtualenv: created, with its parent",
    "sglang_stack_wheelhouse_dir": "the stack's wheelhouse: created and filled",
    "sglang_stack_uv_dir": "uv's directory: created and filled",
    "sglang_stack_python_install_dir": "uv's Python installs: created and filled",
    "sglang_router_wheelhouse_dir": "the router's wheelhouse: created root:root 0755 and filled",
    "sglang_weights_state_dir": "the weights' state: created and written",
}
# Of those, the ones whose parent directory the package creates and chowns too.
OWNED_PARENTS = {"sglang_venv_dir", "sglang_router_venv_dir"}
# Configuration directories (root:<group> 0750 and the files in them): /etc/<name> of their own, or owned as above.
CONFIG_DIRS: dict[str, str] = {
    "sglang_service_config_dir": "the server's configuration directory (root:sglang_group 0750)",
    "sglang_router_config_dir": "the router's configuration directory",
    "sglang_rollout_rollback_dir": "the rollback copies of the server's files",
}
# Files the package writes, whose directory it creates: the directory follows the owned paths' rule.
OWNED_FILES: dict[str, str] = {
    "sglang_rollout_lease_file": "the fleet's rollout lease, on the lease host",
    "sglang_weights_hf_token_file": "the Hugging Face token, on each server",
}
# Where the unit file goes: only a directory systemd reads system units from.
UNIT_DIRS = frozenset({"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system"})
# The model's and the draft's directories, which no owned path may equal, contain or lie in (the prune, the chown).
MODEL_PATHS = ("sglang_model_path", "sglang_speculative_draft_model_path")
OWNED_ALLOWED = ("a directory of the package's own: not /, not a top-level system directory (/opt, /srv, /var/lib "
                 "themselves), nothing under /etc, /usr, /boot, /proc, /sys, /dev, /run, /tmp, /var/tmp or /root, "
                 "not a user's home (/home/<user>), and neither the model's or the draft's directory nor one "
                 "inside or above them (docs/configuration.md, What is refused)")


def _norm(path: str) -> str:
    import posixpath
    return posixpath.normpath(path) if path.startswith("/") else path


def _under(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def system_path_reason(path: str) -> str | None:
    """Why ``path`` is the system's, never the package's; None when it may be the package's."""
    path = _norm(str(path))
    for root, (kind, reason) in SYSTEM_PATHS.items():
        if path == root or (kind == "tree" and _under(path, root)):
            return f"{root} is {reason}" if path == root else f"it is under {root}, {reason}"
    parts = path.strip("/").split("/")
    if parts[0] == "home" and len(parts) == 2:
        return "it is a user's home (/home/<user>)"
    return None


def config_dir_reason(path: str) -> str | None:
    """Why ``path`` may not be a configuration directory of the package; None when it may."""
    path = _norm(str(path))
    parts = path.strip("/").split("/")
    if parts[0] == "etc":
        if len(parts) == 1 or not parts[1]:
            return "/etc is the system's configuration"
        if parts[1] in ETC_SYSTEM:
            return f"/etc/{parts[1]} is the operating system's"
        return None
    return system_path_reason(path)


def _model_reason(path: str, models: dict[str, str]) -> str | None:
    for var, model in models.items():
        if _under(path, model):
            return f"it is {var} ({model}) or inside it"
        if _under(model, path):
            return f"it holds {var} ({model})"
    return None


def _path_values(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [_norm(str(item)) for item in items if isinstance(item, str) and item.startswith("/")]


def effective(given: dict[str, Any], known: dict[str, Any], name: str) -> Any:
    """The value a host gets: given, else the spec's default, with the templated defaults this module can follow
    (sglang_presharded_dir's "{{ sglang_home }}/presharded"); None for another templated default."""
    value = given[name] if name in given else known.get(name, (None, {}))[1].get("default")
    if isinstance(value, str) and "{{" in value:
        if name == "sglang_presharded_dir":
            home = effective(given, known, "sglang_home")
            return f"{home}/presharded" if isinstance(home, str) else None
        return None
    return value


def _models(given: dict[str, Any], known: dict[str, Any]) -> dict[str, str]:
    found = {}
    for var in MODEL_PATHS:
        value = effective(given, known, var)
        if isinstance(value, str) and value.startswith("/") and _norm(value) != "/":
            found[var] = _norm(value)
    return found


def owned_path_problems(given: dict[str, Any], known: dict[str, Any]) -> list[str]:
    """Every path the package owns, chowns, makes writable or prunes, against the system's and the model's."""
    errors = []
    models = _models(given, known)
    for var, what in {**OWNED_PATHS, **CONFIG_DIRS, **OWNED_FILES}.items():
        if var not in given:
            continue  # the defaults are the package's own (tests/unit: test_the_defaults_pass_the_safety_rules)
        for path in _path_values(given[var]):
            checked_path = posixpath_dirname(path) if var in OWNED_FILES else path
            reason = (config_dir_reason(checked_path) if var in CONFIG_DIRS else system_path_reason(checked_path)) \
                or _model_reason(checked_path, models)
            if reason is None and var in OWNED_PARENTS:
                parent = posixpath_dirname(path)
                reason = system_path_reason(parent) or _model_reason(parent, models)
                reason = reason and f"its parent {parent}, which the package creates and chowns: {reason}"
            if reason:
                where = "the directory of " if var in OWNED_FILES else ""
                errors.append(f"{var}: {where}{path} cannot be the package's ({what}): {reason}; allowed: "
                              f"{OWNED_ALLOWED}{', or /etc/<name> of its own' if var in CONFIG_DIRS else ''}")
    errors += _controller_dir_problems(given)
    unit_dir = given.get("sglang_service_unit_dir")
    if isinstance(unit_dir, str) and unit_dir.startswith("/") and _norm(unit_dir) not in UNIT_DIRS:
        errors.append(f"sglang_service_unit_dir: {unit_dir} is not where systemd reads system units; allowed: "
                      f"{', '.join(sorted(UNIT_DIRS))}")
    errors += _model_paths_problems(given, known)
    return errors


# Directories the package writes on the controller: (variable, what goes there). The operator's own scratch, root's
# home and the users' homes (which the system-path rule already leaves to them below /home/<user>) are theirs to use;
# the system's directories are not.
CONTROLLER_DIRS = {"sglang_monitoring_output_dir": "the alert rules, the scrape targets and the dashboard, written "
                                                   "on the controller"}
_CONTROLLER_SCRATCH = ("/tmp", "/var/tmp", "/root")


def _controller_dir_problems(given: dict[str, Any]) -> list[str]:
    errors = []
    for var, what in CONTROLLER_DIRS.items():
        value = given.get(var)
        if not isinstance(value, str) or not value.startswith("/"):
            continue
        path = _norm(value)
        if any(_under(path, root) and path != root for root in _CONTROLLER_SCRATCH):
            continue
        reason = config_dir_reason(path)
        if reason:
            errors.append(f"{var}: {value} cannot hold {what}: {reason}; allowed: a directory of its own, such as "
                          "the checkout's monitoring/ (the default), /etc/prometheus/..., one under /srv/<name>, "
                          "/opt/<name> or a home")
    return errors


def posixpath_dirname(path: str) -> str:
    import posixpath
    return posixpath.dirname(path.rstrip("/")) or "/"


def _model_paths_problems(given: dict[str, Any], known: dict[str, Any]) -> list[str]:
    """The model and the draft are read, never owned: neither is / nor a top-level system directory (the owned
    paths' rule keeps every owned path out of them and from above them)."""
    errors = []
    for var in MODEL_PATHS:
        value = given.get(var)
        if isinstance(value, str) and value.startswith("/"):
            path = _norm(value)
            parts = path.strip("/").split("/")
            if path == "/" or (path in SYSTEM_PATHS and SYSTEM_PATHS[path][0] == "dir") or \
                    (len(parts) == 1 and path in SYSTEM_PATHS):
                errors.append(f"{var}: {path} is a system directory, not a model's; allowed: the directory of the "
                              "model's files (config.json, *.safetensors), such as /models/<name>")
    return errors


# Accounts the package creates: never root, an account of the operating system, or the inventory's login user.
ACCOUNTS: dict[str, str] = {
    "sglang_user": "the server's service user (created with a nologin shell and sglang_home as its home)",
    "sglang_group": "the server's group (created; the service user's primary group)",
    "sglang_router_user": "the router's service user (created with a nologin shell)",
}
# The accounts and groups every Debian and Ubuntu host has (base-passwd, systemd, adduser's groups): taking one
# over changes the shell, the home or the members of an account the system relies on. root is uid and gid 0.
SYSTEM_ACCOUNTS = frozenset({
    "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data",
    "backup", "list", "irc", "gnats", "nobody", "nogroup", "_apt", "messagebus", "sshd", "syslog", "systemd-network",
    "systemd-resolve", "systemd-timesync", "systemd-journal", "systemd-coredump", "polkitd", "adm", "tty", "disk",
    "kmem", "dialout", "fax", "voice", "cdrom", "floppy", "tape", "sudo", "wheel", "audio", "dip", "operator",
    "src", "shadow", "utmp", "video", "render", "sasl", "plugdev", "staff", "users", "input", "kvm", "netdev",
    "docker", "lxd", "crontab", "ssh", "admin", "ubuntu", "debian",
})
# Where the inventory names the account Ansible logs in with.
LOGIN_VARIABLES = ("ansible_user", "ansible_ssh_user", "ansible_remote_user")
ACCOUNT_ALLOWED = ("a name of the package's own such as sglang (not root or another account of the operating "
                   "system, not the account Ansible logs in with)")


def account_problems(given: dict[str, Any], known: dict[str, Any]) -> list[str]:
    """The accounts the package creates are never root, the system's, nor the login user."""
    logins = {str(given[name]) for name in LOGIN_VARIABLES if isinstance(given.get(name), str) and given[name]}
    errors = []
    for var, what in ACCOUNTS.items():
        name = effective(given, known, var)
        if not isinstance(name, str):
            continue
        if name in SYSTEM_ACCOUNTS:
            why = "is root (uid and gid 0)" if name == "root" else "is an account of the operating system"
            errors.append(f"{var}: {name!r} {why}, and the package would make it {what}; allowed: {ACCOUNT_ALLOWED}")
        elif name in logins:
            source = next(n for n in LOGIN_VARIABLES if given.get(n) == name)
            errors.append(f"{var}: {name!r} is the account Ansible logs in with ({source}): the package would give it "
                          f"a nologin shell and another home, and the next run could not log in; allowed: "
                          f"{ACCOUNT_ALLOWED}")
    return errors


# The host side: an existing account the package did not create is refused unless the opt-in adopts it. The
# package's own: its passwd comment is ACCOUNT_COMMENT (this release on), or, made by a release before the comment,
# a system account (uid below 1000) with a nologin shell whose home is sglang_home, as the stack role makes it.
ACCOUNT_COMMENT = "sglang-deploy service account"
ADOPT_VARIABLE = "sglang_stack_adopt_existing_user"
_NOLOGIN = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false")


def _made_by_the_package(fields: list[str], home: str) -> bool:
    uid, gecos, their_home, shell = (fields + [""] * 6)[1], (fields + [""] * 6)[3], (fields + [""] * 6)[4], \
        (fields + [""] * 6)[5]
    if gecos == ACCOUNT_COMMENT:
        return True
    return uid.isdigit() and int(uid) < 1000 and shell in _NOLOGIN and their_home.rstrip("/") == home.rstrip("/")


def existing_account_problems(user: str, group: str, passwd: list[str] | None, group_entry: list[str] | None,
                              home: str, adopt: bool) -> list[str]:
    """Refusals of the service user and group found on the host (``getent``'s fields after the name:
    passwd ``[x, uid, gid, gecos, home, shell]``, group ``[x, gid, members]``); ``home``: sglang_home,
    ``adopt``: sglang_stack_adopt_existing_user."""
    errors = []
    if passwd:
        fields = [str(field) for field in passwd] + [""] * 6
        if fields[1] == "0":
            errors.append(f"sglang_user: the account {user!r} has uid 0 on this host; allowed: {ACCOUNT_ALLOWED}")
        elif not adopt and not _made_by_the_package(fields, home):
            errors.append(f"sglang_user: the account {user!r} already exists on this host (uid {fields[1]}, home "
                          f"{fields[4]}, shell {fields[5]}) and sglang-deploy did not create it: the install would "
                          f"give it a nologin shell and {home} as its home; allowed: a name with no account on the "
                          f"host yet, or {ADOPT_VARIABLE}: true to hand this account to the service")
    if group_entry and len(group_entry) > 1 and str(group_entry[1]) == "0":
        errors.append(f"sglang_group: the group {group!r} has gid 0 on this host; allowed: {ACCOUNT_ALLOWED}")
    return errors


# The presharded dump directory holds the package's dumps only: never the weights, the home or a cache.
CACHE_DIRS = (".cache", ".triton", ".nv", "huggingface")
PRESHARDED_ALLOWED = ("a directory for the dumps alone, such as <sglang_home>/presharded: not sglang_home itself nor "
                      "above it, not a cache (<home>/.cache ...), neither the model's or the draft's directory nor "
                      "inside or above them")


def presharded_problems(given: dict[str, Any], known: dict[str, Any]) -> list[str]:
    """sglang_presharded_dir against the weights, the home and the caches; the presharded load format through
    sglang_extra_args, which would bypass sglang_presharded's checks."""
    errors = []
    directory = effective(given, known, "sglang_presharded_dir")
    home = effective(given, known, "sglang_home")
    mentioned = {"sglang_presharded_dir", "sglang_home", *MODEL_PATHS} & set(given)
    if isinstance(directory, str) and directory.startswith("/") and mentioned:
        path = _norm(str(directory))
        reason = _model_reason(path, _models(given, known))
        if reason is None and isinstance(home, str) and home.startswith("/") and _under(_norm(home), path):
            reason = f"it is sglang_home ({home}) or above it, whose caches and state the prune would delete"
        if reason is None and any(part in CACHE_DIRS for part in path.strip("/").split("/")):
            reason = "it is a cache directory"
        if reason:
            errors.append(f"sglang_presharded_dir: {path} cannot hold the dumps: {reason}; allowed: "
                          f"{PRESHARDED_ALLOWED}")
    extra = given.get("sglang_extra_args")
    if isinstance(extra, dict):
        for key, value in extra.items():
            flag = str(key).lstrip("-").replace("_", "-")
            if (flag == "load-format" and str(value).strip().lower() == "presharded") or \
                    (flag == "model-loader-extra-config" and "presharded" in str(value)):
                errors.append(f"sglang_extra_args[{key!r}]: sets SGLang's presharded loading past the deploy's dump "
                              "key, directory check and prune; allowed: sglang_presharded: true (with "
                              "sglang_presharded_dir)")
    return errors


# Every hook the rollout includes is an existing task file on the controller (HOOK_FILES' rule).
HOOK_FILES |= {"sglang_rollout_post_drain_hooks", "sglang_rollout_pre_start_hooks", "sglang_rollout_pre_rejoin_hooks"}
# Paths of a URL the roles request: a path starting with '/', of the characters a URL path takes.
URL_PATHS = {"sglang_service_health_path"}
_URL_PATH_RE = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*(\?[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?\Z")
# The lease: its file an absolute path (one lease for every login user), its TTL at least LEASE_TTL_MIN and at least
# one batch's longest wait between renewals (the drain, then the load: sglang_service_drain_timeout +
# sglang_ready_timeout), so that a live deploy's lease never lapses to a second operator mid-batch.
LEASE_TTL_MIN = 600


def url_and_lease_problems(given: dict[str, Any], known: dict[str, Any]) -> list[str]:
    errors = []
    for var in sorted(URL_PATHS & set(given)):
        value = given[var]
        if isinstance(value, str) and not _URL_PATH_RE.match(value):
            errors.append(f"{var}: {value!r} is not the path of a URL (every readiness wait would run to its "
                          "timeout); allowed: a path starting with '/', such as /health_generate")
    lease_file = given.get("sglang_rollout_lease_file")
    if lease_file is not None and not (isinstance(lease_file, str) and _PATH_RE.match(lease_file)
                                       and not lease_file.endswith("/")):
        errors.append(f"sglang_rollout_lease_file: {lease_file!r} is not an absolute file path (a relative one "
                      "gives each login user a lease of their own); allowed: an absolute path such as "
                      "/var/lib/sglang-deploy/rollout-lease.json")
    timing = [n for n in ("sglang_rollout_lease_ttl", "sglang_ready_timeout", "sglang_service_drain_timeout")
              if n in given]
    if timing and to_bool_or(effective(given, known, "sglang_rollout_lease"), True):
        try:
            ttl = to_int(effective(given, known, "sglang_rollout_lease_ttl"))
            batch = to_int(effective(given, known, "sglang_ready_timeout")) + \
                to_int(effective(given, known, "sglang_service_drain_timeout"))
        except (TypeError, ValueError):
            return errors
        need = max(LEASE_TTL_MIN, batch)
        if ttl < need:
            errors.append(f"{timing[0]}: sglang_rollout_lease_ttl {ttl} s is shorter than a batch can wait "
                          "between two renewals (sglang_service_drain_timeout + sglang_ready_timeout = "
                          f"{batch} s), so the lease could lapse mid-batch and a second deploy take it; allowed: "
                          f"at least {need} s (never below {LEASE_TTL_MIN})")
    return errors


def to_bool_or(value: Any, default: bool) -> bool:
    try:
        return to_bool(value)
    except (TypeError, ValueError):
        return default


# Role variables the playbooks set for each task: from the inventory they are ignored, from -e they override the
# playbook and skip a safety step. Variable -> what it would skip.
PLAYBOOK_SWITCHES: dict[str, str] = {
    "sglang_config_refuse": "the refusal of a bad configuration (plan.yml sets it to report instead)",
    "sglang_rollout_lease_action": "the fleet's rollout lease (deploy.yml takes, renews and gives it back)",
    "sglang_config_refusals": "the roles' settings checks that deploy.yml collects",
    "sglang_service_refusals": "the refusals deploy.yml passes to the restart decision",
    "sglang_service_deployed_state": "the host's read of its deployed files, for the restart decision",
    "sglang_service_install_state": "the install roles' stamps, for the restart decision",
    "sglang_service_driver_plan": "the driver's plan, for the restart decision",
    "nvidia_driver_preflight_refuse": "the driver's preflight refusal",
}


def switch_problems(given: dict[str, Any]) -> list[str]:
    return [f"{name}: is set by the playbooks for each task, and given from the inventory or -e it would skip "
            f"{why}; allowed: leave it out (plan.yml reports refusals without failing; sglang_rollout_lease: false "
            "is the documented way to run without the lease)" for name, why in PLAYBOOK_SWITCHES.items()
            if name in given]


# Cross-field rules. SGLang 0.5.23 (srt/arg_groups/speculative_hook.py, _handle_eagle_family, lines 1255-1266): with
# speculative_eagle_topk 1, a speculative_num_draft_tokens other than speculative_num_steps + 1 is replaced by it,
# with a log line only; fewer draft tokens than steps + 1 cannot verify every step.
_EAGLE = {"EAGLE", "EAGLE3", "NEXTN"}


def _setting(given: dict[str, Any], known: dict[str, Any], var: str) -> Any:
    short = var.removeprefix("sglang_")
    for name, target in ALIASES.items():
        if target == var and name in given:
            return given[name]
    return given.get(var, given.get(short, known.get(var, (None, {}))[1].get("default")))


def cross_field_problems(given: dict[str, Any], known: dict[str, Any]) -> list[str]:
    errors = []
    names = ("sglang_speculative_num_steps", "sglang_speculative_num_draft_tokens", "sglang_speculative_eagle_topk")
    if any(n in given or n.removeprefix("sglang_") in given for n in names):
        algorithm = str(_setting(given, known, "sglang_speculative_algorithm") or "").upper()
        try:
            steps, tokens = (to_int(_setting(given, known, n)) for n in names[:2])
            topk_value = _setting(given, known, names[2])
            topk = to_int(topk_value) if not is_unset(topk_value) else 1
        except (TypeError, ValueError):
            steps = tokens = topk = None
        if algorithm in _EAGLE and steps is not None and tokens is not None \
                and (tokens < steps + 1 or (topk == 1 and tokens != steps + 1)):
            errors.append(f"sglang_speculative_num_draft_tokens: {tokens} with speculative_num_steps {steps} and "
                          f"eagle_topk {topk}: SGLang 0.5.23 silently replaces it by num_steps + 1 = {steps + 1} "
                          f"(speculative_hook.py, _handle_eagle_family); allowed: {steps + 1}"
                          f"{' or more (eagle_topk > 1)' if topk != 1 else ''}")
    env = given.get("sglang_env")
    if isinstance(env, dict):
        for key, value in env.items():
            size = len(f"{key}={value}".encode("utf-8", "surrogatepass"))
            if size >= MAX_ARG_STRLEN:
                errors.append(f"sglang_env[{key!r}]: is {size} bytes as KEY=VALUE, and Linux refuses to start a "
                              f"program with an environment string of {MAX_ARG_STRLEN} bytes or more (execve: E2BIG, "
                              "MAX_ARG_STRLEN); allowed: a shorter value")
    advertise = given.get("sglang_advertise_host")
    if isinstance(advertise, str) and advertise and not re.fullmatch(r"[A-Za-z0-9._:\[\]-]+", advertise):
        errors.append(f"sglang_advertise_host: {advertise!r} is not a host name or an address (the router would "
                      "register an URL that does not resolve); allowed: a host name, an IPv4 address or an IPv6 "
                      "address, without blanks")
    return errors


def safety(given: dict[str, Any], known: dict[str, Any], errors: list[str] | None = None) -> list[str]:
    """The refusals of issue 49, for variables not already refused by the checks before them."""
    found = (owned_path_problems(given, known) + account_problems(given, known) + presharded_problems(given, known)
             + url_and_lease_problems(given, known) + switch_problems(given) + cross_field_problems(given, known)
             + low_problems(given, known))
    return [e for e in found if not errors_about(errors or [], e.split(":", 1)[0].split("[", 1)[0])]


# Low-severity cases of issue 49, each with its reason.
# LimitNOFILE= below what a server with thousands of connections, NCCL's sockets and the safetensors files needs:
# the kernel's own default soft limit (1024) is the floor.
LIMIT_NOFILE_MIN = 1024


def low_problems(given: dict[str, Any], known: dict[str, Any]) -> list[str]:
    errors = []
    nofile = given.get("sglang_service_limit_nofile")
    if nofile is not None and not isinstance(nofile, bool):
        try:
            if to_int(nofile) < LIMIT_NOFILE_MIN:
                errors.append(f"sglang_service_limit_nofile: {nofile} open files cannot hold the server's sockets "
                              f"and the model's files; allowed: at least {LIMIT_NOFILE_MIN}")
        except (TypeError, ValueError):
            pass  # refused by its type
    numa = given.get("sglang_host_numa_memory")
    if isinstance(numa, dict) and isinstance(numa.get("nodes_gb"), dict):
        seen: dict[str, str] = {}
        for node in numa["nodes_gb"]:
            text = str(node)
            number = str(int(text)) if text.isdigit() else None
            if number is not None and number in seen:
                errors.append(f"sglang_host_numa_memory: nodes_gb gives node {number} twice ({seen[number]!r} and "
                              f"{text!r}), and the plan would keep one silently; allowed: each node once")
            elif number is not None:
                seen[number] = text
    # A live threshold without speculative decoding is not refused: the plan notes it (sglang_config, the real
    # engine's live-change drill sets one on a server without a draft).
    extra = given.get("sglang_extra_args")
    if isinstance(extra, dict):
        for key in extra:
            if str(key).lstrip("-").replace("_", "-") == "numa-node":
                errors.append(f"sglang_extra_args[{key!r}]: binds the ranks to NUMA nodes without the plan's check of "
                              "each node's memory; allowed: sglang_numa_bind: auto (planned with "
                              "sglang_host_numa_memory or the host's reading)")
    return errors
