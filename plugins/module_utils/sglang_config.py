# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Resolve: one host's variables -> its SGLang configuration, typed, with each value's provenance.

This is the only place that turns variables into SGLang flags. ``resolve()`` walks the settings
table (sglang_settings.SETTINGS) in ExecStart order: it applies the short command-line names
(``-e hicache_ratio=2.0``), types and checks each value, derives the multi-node and secrets flags,
adds ``sglang_extra_args``, validates every flag and value against the flag catalog of
``sglang_version``, and builds the environment. It never raises for bad input: every problem becomes
one message that names the variable and what is allowed, so a play can refuse the host before any
file on it changes.

The result (published by role sglang_config as the fact ``sglang_config``) holds ``settings``:
``{dest: {"flag", "value", "source"}}``, the typed value of every flag set and the name of what set
it ("hicache_ratio (overrides sglang_hicache_ratio)", "sglang_extra_args['page-size']"). The argv,
the unit, the environment file, the capacity plan and the rules all read that one result.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
from dataclasses import dataclass, field
from typing import Any

from . import _live
from . import sglang_catalog as catalogs
from . import sglang_presharded as presharded
from . import sglang_settings as table
from .sglang_quote import ENV_NAME_RE
from .sglang_settings import NEEDS_DRAFT, SWITCH, Kind, Setting
from .sglang_types import Problems, all_or_none, is_unset, to_bool, to_bytes, to_float, to_human_int, to_int

Groups = list[list[str]]  # [[flag, *values], ...]: [flag] = bare flag, [flag, v] = one value

# Environment every unit gets unless sglang_env overrides it: unbuffered stdout so log lines
# reach the journal as they are written, and one progress line per tqdm update (see
# roles/sglang_stack/files/sglang_deploy_line_progress.py).
BASE_ENV = {"PYTHONUNBUFFERED": "1", "SGLANG_DEPLOY_LINE_PROGRESS": "1"}
# What systemd gives a service as PATH; the unit's own PATH puts the virtualenv's bin (ninja, which
# SGLang's and FlashInfer's JIT builds run from PATH) and the CUDA toolkit's bin in front of it.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_CUDA_VERSION_RE = re.compile(r"^[0-9]{1,2}\.[0-9]{1,2}$")
_INSTANCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FLAG_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# Options the deploy passes another way: secrets through the --config file it writes itself.
_KEPT_OUT_OF_ARGV = {"api_key": "sglang_api_key", "admin_api_key": "sglang_admin_api_key",
                     "config": "the variables above (the deploy writes SGLang's --config file itself)"}
# TLS: the deploy writes the PEM variables to files beside the secrets file and passes their paths (a path on argv
# is no secret). --ssl-keyfile-password is never used: /server_info returns it (it is refused as a secret below),
# so the key must be unencrypted, in a file only root and the service group read.
_TLS_FLAGS = {"ssl_certfile": ("--ssl-certfile", "sglang_tls_cert", "certfile"),
              "ssl_keyfile": ("--ssl-keyfile", "sglang_tls_key", "keyfile"),
              "ssl_ca_certs": ("--ssl-ca-certs", "sglang_tls_ca", "cafile")}
_TLS_ALLOWED = "sglang_tls_cert, sglang_tls_key and sglang_tls_ca (the deploy writes the files and passes their paths)"
# Any other option that carries a secret (ssl_keyfile_password, ...): argv is readable by every local user
# (/proc/<pid>/cmdline), and the deploy has no variable that routes it through the secrets file yet.
_SECRET_DEST_RE = re.compile(r"password|passwd|secret|credential|api_key$|auth_token$|private_key$")
# Flags that let a client of the API run code on the host (SGLang 0.5.23, read from the wheel): refused unless
# sglang_allow_unsafe_flags. dest -> why.
UNSAFE_FLAGS = {
    # srt/arg_groups/fields/exec_.py:70; srt/sampling/custom_logit_processor.py:21 dill.loads() of the request's
    # custom_logit_processor field: any caller of /generate or /v1/* runs Python in the server.
    "enable_custom_logit_processor": "lets every client run Python in the server (dill.loads of a request field)",
    # srt/arg_groups/fields/serving.py:228; srt/entrypoints/http_server.py:381-388: "demo" starts a Python tool that
    # runs the code the model writes for a /v1/responses request (entrypoints/openai/tool_server.py:144-158); URLs
    # connect the server to MCP tool servers that requests then call.
    "tool_server": "runs tools, Python included, for the requests of any client (/v1/responses)",
}
# argparse (Lib/argparse.py, _parse_optional) reads a word that starts with '-' as an option unless it
# is a lone '-' or a negative number; SGLang's parser has no option that looks like a negative number.
_NEGATIVE_NUMBER_RE = re.compile(r"^-\d+$|^-\d*\.\d+$")
# Linux: one argv string is at most MAX_ARG_STRLEN = 32 pages = 131072 bytes with its NUL
# (include/uapi/linux/binfmts.h); execve fails with E2BIG beyond it.
MAX_ARG_STRLEN = 32 * 4096


@dataclass
class Value:
    """One resolved setting: its typed value, who set it, and the words it puts on the command line."""

    flag: str
    value: Any
    source: str
    groups: Groups = field(default_factory=list)


@dataclass
class _Run:
    """The state of one resolve: the inputs with short names applied, and what was found so far."""

    values: dict[str, Any]
    names: dict[str, str]           # variable -> the name the user typed, where it differs
    problems: Problems
    node: dict[str, Any]
    typed: dict[str, Any] = field(default_factory=dict)     # variable -> typed value (None: unset/invalid)
    resolved: dict[str, Value] = field(default_factory=dict)  # dest -> Value

    def name(self, var: str) -> str:
        return self.names.get(var, var)


def format_value(value: Any) -> str:
    """How a typed value is written on the command line: 2.0 stays 2.0, True is never written."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def checked(problems: Problems, name: str, value: Any, kind: Kind) -> Any:
    """Type a value; on failure record "<name>: <why>; allowed: <allowed>" and return None."""
    try:
        typed = kind.convert(value)
    except ValueError as exc:
        problems.error(name, f"{exc}; allowed: {kind.allowed}")
        return None
    if kind.valid is not None and not kind.valid(typed):
        problems.error(name, f"{format_value(typed)} is out of range; allowed: {kind.allowed}")
        return None
    return typed


# --- short names ---------------------------------------------------------------------------

def _apply_aliases(inputs: dict[str, Any], problems: Problems) -> tuple[dict[str, Any], dict[str, str]]:
    """Overlay `-e hicache_ratio=...` style short names; remember which name the user typed."""
    aliases = table.ALIASES
    values = dict(inputs)
    names: dict[str, str] = {}
    given = {alias: inputs[alias] for alias in aliases if not is_unset(inputs.get(alias))}
    for alias, value in sorted(given.items()):
        values[aliases[alias]] = value
        names[aliases[alias]] = f"{alias} (overrides {aliases[alias]})"
    _one_hicache_size(given, values, problems)
    if given and not is_unset(values.get("sglang_hicache_enabled")):
        try:
            enabled = to_bool(values["sglang_hicache_enabled"])
        except ValueError:
            enabled = True  # reported with the setting
        if not enabled:
            problems.error(sorted(given)[0], "is given but sglang_hicache_enabled is false; allowed: set "
                           "sglang_hicache_enabled=true, or drop the hicache_* override")
    return values, names


def _one_hicache_size(given: dict[str, Any], values: dict[str, Any], problems: Problems) -> None:
    """A short name for the ratio or the size replaces the other one set in the inventory."""
    if "hicache_ratio" in given and "hicache_size" in given:
        problems.error("hicache_ratio", "and hicache_size are both given; SGLang uses the size and ignores "
                       "the ratio; allowed: one of them")
        return
    for alias, other in (("hicache_ratio", "sglang_hicache_size"), ("hicache_size", "sglang_hicache_ratio")):
        if alias in given and not is_unset(values.get(other)):
            problems.warn(alias, f"replaces {other}={values[other]} for this run")
            values[other] = None


# --- the table -----------------------------------------------------------------------------

def _multinode(values: dict[str, Any], problems: Problems) -> dict[str, Any]:
    """Rank and size of this host in its multi-node group (a group of one when there is none)."""
    spec = values.get("multinode") or {}
    group, members, host = spec.get("group") or "", list(spec.get("members") or []), spec.get("host")
    alone = {"group": group, "nnodes": 1, "node_rank": 0, "dist_init_addr": ""}
    if not group:
        return alone
    if host not in members:
        problems.error("sglang_multinode_group", f"{host} is not a member of group {group!r}; "
                       "allowed: a group this host is in")
        return alone
    port = checked(problems, "sglang_dist_init_port", spec.get("port"),
                   Kind(to_int, "an integer from 1 to 65535", lambda x: 1 <= x <= 65535))
    tp = values.get("sglang_tp_size")
    try:
        if len(members) > 1 and to_int(tp) % len(members):
            problems.error("sglang_tp_size", f"{tp} does not split over the {len(members)} hosts of {group}; "
                           "allowed: a multiple of the group size")
    except ValueError:
        pass  # reported with the setting
    return {"group": group, "nnodes": len(members), "node_rank": members.index(host),
            "dist_init_addr": f"{str(spec.get('first_host') or '').strip()}:{port}"}


def _derived(setting: Setting, run: _Run) -> Any:
    """The value of a derived row: the group's size, rank and rendezvous, or the secrets file."""
    if setting.dest == "config":
        secrets = run.values.get("secrets") or {}
        wanted = any(secrets.get(key) and to_bool(secrets[key]) for key in ("api_key", "admin_api_key"))
        return str(secrets.get("file") or "") if wanted else None
    node = run.node
    if node["nnodes"] <= 1:
        return None
    return {"nnodes": node["nnodes"], "node_rank": node["node_rank"], "dist_init_addr": node["dist_init_addr"]}[
        setting.dest]


def _section_off(setting: Setting, run: _Run) -> bool:
    """True when the row's section is off; warns about a value set in the inventory that is ignored."""
    if not setting.needs or run.typed.get(setting.needs):
        return False
    given_inventory = not is_unset(run.values.get(setting.var)) and setting.var not in run.names
    gate_invalid = not is_unset(run.values.get(setting.needs)) and run.typed.get(setting.needs) is None
    if given_inventory and not gate_invalid:
        state = "false" if _gate(setting.needs).kind is SWITCH else "not set"
        run.problems.warn(str(setting.var), f"is ignored because {setting.needs} is {state}")
    return True


# The live thresholds: SGLang takes them without speculative decoding (its own default is 1.0) and they do nothing.
_SPECULATIVE_ONLY = ("sglang_speculative_accept_threshold_single", "sglang_speculative_accept_threshold_acc")


def _live_without_speculative(run: _Run) -> None:
    """A live threshold set while speculative decoding is off is written and set live all the same (SGLang 0.5.23
    accepts both flags, and /set_internal_state the values, without a draft): the plan notes that it does nothing."""
    if not is_unset(run.values.get("sglang_speculative_algorithm")):
        return
    for var in _SPECULATIVE_ONLY:
        if not is_unset(run.values.get(var)):
            run.problems.warn(var, "has no effect without speculative decoding (sglang_speculative_algorithm is not "
                              "set): it is written to the unit and set live all the same, and does nothing until "
                              "speculative decoding is on")


def _gate(var: str) -> Setting:
    return next(s for s in table.SETTINGS if s.var == var)


def _typed_value(setting: Setting, run: _Run) -> Any:
    """The row's typed value from its variable (or default); None when unset or refused."""
    raw = run.values.get(setting.var)
    if is_unset(raw):
        if setting.required:
            run.problems.error(run.name(str(setting.var)), f"is required; allowed: {setting.required}")
        return setting.default
    return checked(run.problems, run.name(str(setting.var)), raw, setting.kind)


def _groups(setting: Setting, value: Any) -> Groups:
    if value is None or value is False or (setting.emit == "nonzero" and not value):
        return []
    if setting.emit == "switch":
        return [[setting.flag]]
    return [[setting.flag, format_value(value)]]


def _named(run: _Run) -> None:
    """Walk the table: every row with a variable, in order."""
    for setting in table.SETTINGS:
        if setting.var is None or _section_off(setting, run):
            continue
        derived = setting.emit == "derived"
        value = _derived(setting, run) if derived else _typed_value(setting, run)
        if not derived:
            run.typed[setting.var] = value
        if value is not None:
            run.resolved[setting.dest] = Value(setting.flag, value, run.name(setting.var),
                                               _groups(setting, value))
    _cross_checks(run)


def _cross_checks(run: _Run) -> None:
    """What no single row can say: the ratio and the size together, a draft model for EAGLE."""
    v, typed = run.values, run.typed
    if typed.get("sglang_hicache_enabled") and not is_unset(v.get("sglang_hicache_ratio")) \
            and not is_unset(v.get("sglang_hicache_size")):
        run.problems.error("sglang_hicache_size", "and sglang_hicache_ratio are both set; SGLang uses the size and "
                           "ignores the ratio; allowed: one of them")
    algorithm = typed.get("sglang_speculative_algorithm")
    if algorithm in NEEDS_DRAFT and is_unset(v.get("sglang_speculative_draft_model_path")):
        run.problems.error("sglang_speculative_draft_model_path",
                           f"is required with sglang_speculative_algorithm={algorithm}; "
                           "allowed: the draft model directory on the host")


# --- who can reach the server --------------------------------------------------------------

def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: a bind no other machine reaches."""
    text = host.strip().strip("[]").lower()
    if text == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def _keys(run: _Run) -> None:
    """SGLang 0.5.23 (srt/utils/auth.py:133-151): without --api-key every endpoint, the admin ones included, is open
    to whoever reaches the port; with only --admin-api-key, /server_info is open and returns that key."""
    secrets = run.values.get("secrets") or {}
    client, admin = (_allowed(secrets, key) for key in ("api_key", "admin_api_key"))
    host = run.typed.get("sglang_host")
    opted_in = _allowed(run.values, "sglang_allow_unauthenticated")
    if admin and not client:
        run.problems.error("sglang_admin_api_key", "is set without sglang_api_key: SGLang then answers /server_info "
                           "to anyone, and it returns the admin key; allowed: set sglang_api_key too, or neither")
    elif host and not client and not is_loopback(str(host)) and not opted_in:
        run.problems.error("sglang_api_key", f"is empty while sglang_host binds {host}, reachable from other "
                           "machines: anyone who reaches the port could call every endpoint, the admin ones included "
                           "(swap the weights, log every prompt, abort requests); allowed: a key (in Ansible Vault), "
                           "sglang_host 127.0.0.1, ::1 or localhost, or sglang_allow_unauthenticated: true")


# --- extra args and the catalog ----------------------------------------------------------

def _flag_name(key: Any) -> str | None:
    text = str(key).strip().lstrip("-").replace("_", "-")
    return "--" + text if _FLAG_KEY_RE.match(text) else None


def _extra_args(run: _Run, catalog: catalogs.Catalog | None) -> Groups:
    """`sglang_extra_args`: {flag: value}; true = bare flag, false/null = omitted, list = repeated."""
    extra = run.values.get("sglang_extra_args")
    p = run.problems
    if is_unset(extra):
        return []
    if not isinstance(extra, dict):
        p.error("sglang_extra_args", f"must be a mapping of flag -> value, got {type(extra).__name__}")
        return []
    taken = _taken(run, catalog)
    groups: Groups = []
    for key in sorted(extra, key=lambda k: _flag_name(k) or str(k)):
        var = f"sglang_extra_args[{key!r}]"
        flag = _flag_name(key)
        if flag is None:
            p.error(var, "is not a flag name; allowed: lower-case words joined by '-' or '_'")
            continue
        option = catalogs.find_option(catalog, flag) if catalog else None
        if not _extra_allowed(var, flag, option, catalog, taken, p):
            continue
        if option is not None and not _safe(run, var, option, extra[key]):
            continue
        if option is not None:
            flag = option["flags"][0]
            taken[option["dest"]] = var
        emitted = _extra_values(var, flag, option, extra[key], p)
        if option is not None and catalog is not None:
            for group in emitted:
                for word in group[1:]:
                    _check_value(var, flag, option, word, catalog["version"], p)
        _record_extra(run, var, flag, option, emitted)
        groups.extend(emitted)
    return groups


def _taken(run: _Run, catalog: catalogs.Catalog | None) -> dict[str, str]:
    """SGLang dest -> the variable whose row already puts it on the command line."""
    if not catalog:
        return {}
    index = catalogs.flag_index(catalog)
    return {index[v.flag]["dest"]: v.source for v in run.resolved.values() if v.groups and v.flag in index}


def _extra_allowed(var: str, flag: str, option: dict[str, Any] | None, catalog: catalogs.Catalog | None,
                   taken: dict[str, str], p: Problems) -> bool:
    if catalog and option is None:
        _unknown_flag(var, flag, catalog, p)
        return False
    if option is None:
        return True
    if option["dest"] in _KEPT_OUT_OF_ARGV:
        p.error(var, f"would put {flag} on the command line, visible to every local user; "
                f"allowed: {_KEPT_OUT_OF_ARGV[option['dest']]}")
        return False
    if option["dest"] in _TLS_FLAGS:
        p.error(var, f"would set {flag}, which the deploy sets from {_TLS_FLAGS[option['dest']][1]}; "
                f"allowed: {_TLS_ALLOWED}")
        return False
    if _SECRET_DEST_RE.search(option["dest"]):
        p.error(var, f"would put {flag}, a secret, on the command line, visible to every local user; allowed: "
                "leave it out (only sglang_api_key and sglang_admin_api_key are passed through the secrets file)")
        return False
    if option["dest"] in taken:
        p.error(var, f"sets {option['flags'][0]}, which {taken[option['dest']]} already sets; "
                "allowed: set it in one place")
        return False
    row = table.by_dest().get(option["dest"])
    if row is not None and row.var:
        p.error(var, f"sets {option['flags'][0]}, which has its own variable {row.var} (checked there, and "
                "planned); allowed: set it in one place, through that variable")
        return False
    return True


def _safe(run: _Run, var: str, option: dict[str, Any], value: Any) -> bool:
    """A flag that lets clients run code (UNSAFE_FLAGS) only with sglang_allow_unsafe_flags; an omitted one (false,
    null) is fine."""
    why = UNSAFE_FLAGS.get(option["dest"])
    if why is None or value is None or value is False or _allowed(run.values, "sglang_allow_unsafe_flags"):
        return True
    run.problems.error(var, f"{option['flags'][0]} {why}; allowed: leave it out, or set sglang_allow_unsafe_flags: "
                       f"true (flags it allows: {', '.join('--' + d.replace('_', '-') for d in UNSAFE_FLAGS)})")
    return False


def _allowed(values: dict[str, Any], name: str) -> bool:
    """An opt-in switch (false when unset or not a boolean; the variable check refuses a bad one)."""
    try:
        return not is_unset(values.get(name)) and to_bool(values[name])
    except ValueError:
        return False


def _record_extra(run: _Run, var: str, flag: str, option: dict[str, Any] | None, emitted: Groups) -> None:
    """Keep an extra flag's typed value and source; a table row types it when the plan reads it."""
    if not emitted:
        return
    dest = option["dest"] if option else flag[2:].replace("-", "_")
    words = [word for group in emitted for word in group[1:]]
    value: Any = words[0] if len(words) == 1 else words
    if not words:  # a bare flag: on, unless it is the --no- form of a boolean option
        value = emitted[0][0] == flag
    row = table.by_dest().get(dest)
    if row is not None and row.kind is not SWITCH and len(words) == 1:
        with contextlib.suppress(ValueError):  # refused by the catalog check, or by the plan
            value = row.kind.convert(words[0])
    run.resolved[dest] = Value(flag, value, var, emitted)


def _extra_values(var: str, flag: str, option: dict[str, Any] | None, value: Any, p: Problems) -> Groups:
    action = option["action"] if option else "store"
    takes_no_value = option is not None and option.get("nargs") == 0  # e.g. a deprecated store_true shim
    if takes_no_value or action in ("store_true", "store_false", "store_const", "count", "boolean_optional"):
        try:
            on = to_bool(value) if value is not None else False
        except ValueError as exc:
            p.error(var, f"{exc}; allowed: true or false ({flag} takes no value)")
            return []
        if action == "boolean_optional":
            return [[flag if on else "--no-" + flag[2:]]]
        return [[flag]] if on else []
    if value is None or value is False:
        return []
    if value is True:
        if option is None:  # no catalog says what the flag takes (the router's flags, a version without one)
            return [[flag]]
        p.error(var, f"{flag} takes a value, not true; allowed: the value to pass")
        return []
    if not isinstance(value, list):
        return [[flag, format_value(value)]]
    nargs = option.get("nargs") if option else None
    if option is None or (action in ("append", "extend") and nargs in (None, "?")):  # no catalog: repeated
        return [[flag, format_value(item)] for item in value]
    if (nargs == "+" and not value) or (isinstance(nargs, int) and len(value) != nargs):
        p.error(var, f"{flag} takes {'at least one value' if nargs == '+' else f'{nargs} values'}, got "
                f"{len(value)}; allowed: a list of {'one or more' if nargs == '+' else nargs} values")
        return []
    if nargs in ("+", "*") or isinstance(nargs, int):
        return [[flag, *(format_value(item) for item in value)]]
    p.error(var, f"{flag} takes one value, got a list; allowed: a single value")
    return []


def _check_named(run: _Run, catalog: catalogs.Catalog) -> None:
    """Every flag a row emits exists in the pinned version, and every value has its type and choices."""
    index = catalogs.flag_index(catalog)
    for value in run.resolved.values():
        for group in value.groups:
            option = index.get(group[0])
            if option is None:
                _unknown_flag(value.source, group[0], catalog, run.problems)
                continue
            for word in group[1:]:
                _check_value(value.source, group[0], option, word, catalog["version"], run.problems)


def _unknown_flag(var: str, flag: str, catalog: catalogs.Catalog, p: Problems) -> None:
    hint = catalogs.suggest(catalog, flag)
    version = catalog["version"]
    suggestion = f"; did you mean {' or '.join(hint)}?" if hint else ""
    p.error(var, f"{flag} is not a flag of sglang {version}; allowed: an option of that version "
            f"(roles/sglang_config/files/catalogs/sglang-{version}.json){suggestion}")


def _check_value(var: str, flag: str, option: dict[str, Any], value: str, version: str, p: Problems) -> None:
    if value.startswith("-") and value != "-" and not _NEGATIVE_NUMBER_RE.match(value):
        p.error(var, f"{value!r} starts with '-', so SGLang's argument parser would read it as an option and "
                f"stop with '{flag}: expected one argument'; allowed: a value that does not start with '-'")
        return
    if len(value.encode("utf-8", "surrogatepass")) >= MAX_ARG_STRLEN:
        p.error(var, f"its value for {flag} is {len(value.encode('utf-8', 'surrogatepass'))} bytes, and Linux refuses "
                f"to start a program with an argument of {MAX_ARG_STRLEN} bytes or more (MAX_ARG_STRLEN); "
                "allowed: a shorter value")
        return
    kind = option.get("type") or "str"
    converter = {"int": to_int, "float": to_float, "human_readable_int": to_human_int}.get(kind)
    if converter is not None:
        try:
            converter(value)
        except ValueError as exc:
            allowed = {"int": "an integer", "float": "a number",
                       "human_readable_int": "an integer, or one with a suffix k, M, G, T, Ki, Mi, Gi, Ti"}[kind]
            p.error(var, f"{exc} for {flag}; allowed: {allowed}")
            return
    choices = option.get("choices")
    if choices and value not in [str(c) for c in choices]:
        p.error(var, "{!r} is not a choice of {} in sglang {}; allowed: {}".format(
            value, flag, version, ", ".join(str(c) for c in choices)))


def flag_groups(mapping: dict[str, Any], var: str) -> Groups:
    """Flags of another program (sglang-router) from a {flag: value} mapping, without a catalog:
    true = bare flag, false/null = omitted, list = repeated. Raises ValueError naming `var`."""
    problems = Problems()
    groups: Groups = []
    for key in sorted(mapping or {}, key=lambda k: _flag_name(k) or str(k)):
        flag = _flag_name(key)
        if flag is None:
            problems.error(f"{var}[{key!r}]", "is not a flag name; allowed: lower-case words joined by '-' or '_'")
            continue
        groups.extend(_extra_values(f"{var}[{key!r}]", flag, None, mapping[key], problems))
    if problems.errors:
        raise ValueError("; ".join(problems.errors))
    return groups


# --- TLS -----------------------------------------------------------------------------------------

_TLS_OFF = {"enabled": False, "https": False, "certfile": "", "keyfile": "", "ca_file": ""}


_TLS_WHAT = {"sglang_tls_cert": "the server's PEM certificate (chain)",
             "sglang_tls_key": "its unencrypted PEM private key, in Ansible Vault",
             "sglang_tls_ca": "the PEM certificate of the CA that signed it, which the deploy's clients, the router "
                              "and Prometheus verify the server against (for a self-signed certificate, the "
                              "certificate)"}


def _tls(run: _Run) -> dict[str, Any]:
    """``sglang_tls_cert``/``_key``/``_ca``: all three or none. On: --ssl-certfile, --ssl-keyfile and --ssl-ca-certs
    (SGLang's own warm-up request then verifies against the CA, as every client of the deploy does)."""
    spec = run.values.get("tls") or {}
    given = {f"sglang_tls_{part}": bool(spec.get(part)) and to_bool(spec[part]) for part in ("cert", "key", "ca")}
    for name, message in all_or_none(given, _TLS_WHAT, "no TLS on the server"):
        run.problems.error(name, message)
    if not all(given.values()):
        return dict(_TLS_OFF)
    for dest, (flag, var, key) in _TLS_FLAGS.items():
        path = str(spec.get(key) or "")
        run.resolved[dest] = Value(flag, path, var, [[flag, path]])
    # Only rank 0 serves https: a multi-node server's other ranks answer health on a plain-HTTP dummy server
    # (0.5.23 utils/common.py launch_dummy_health_check_server, no ssl), though each needs the files.
    return {"enabled": True, "https": run.node["node_rank"] == 0, "certfile": str(spec.get("certfile")),
            "keyfile": str(spec.get("keyfile")), "ca_file": str(spec.get("cafile"))}


# --- presharded weights ---------------------------------------------------------------------

_PRESHARDED = "sglang_presharded"
_PRESHARDED_DIR = "sglang_presharded_dir"


def _presharded(run: _Run) -> dict[str, Any]:
    """``sglang_presharded``: checked here, with what the controller knows; the flags need the dump's key, read
    on the host (``with_presharded``)."""
    v, p = run.values, run.problems
    enabled = checked(p, _PRESHARDED, v.get(_PRESHARDED) if not is_unset(v.get(_PRESHARDED)) else False, SWITCH)
    directory = str(v.get(_PRESHARDED_DIR) or "").strip()
    draft = "speculative_draft_model_path" in run.resolved
    off = {"enabled": False, "dir": directory, "draft": draft, "key": None}
    if not enabled:
        return off
    for dest in ("load_format", "model_loader_extra_config"):
        if dest in run.resolved:
            p.error(run.resolved[dest].source, f"sets {run.resolved[dest].flag}, which {_PRESHARDED} sets itself; "
                    f"allowed: one of them (drop it from sglang_extra_args, or {_PRESHARDED}: false)")
    problem = presharded.dir_problem(directory, [str(path) for path in v.get("presharded_writable") or []])
    if problem:
        p.error(_PRESHARDED_DIR, problem)
    if run.node["nnodes"] > 1:
        p.error(_PRESHARDED, f"is not supported with a multi-node server ({run.node['group']}): SGLang needs the dump "
                "directory on a filesystem every node shares, which the deploy cannot check; allowed: "
                f"{_PRESHARDED}: false")
    return {**off, "enabled": True}


def with_presharded(config: dict[str, Any], pinned: dict[str, Any] | None,
                    detected: dict[str, Any] | None) -> tuple[dict[str, Any], list[str], list[str]]:
    """The configuration with the presharded flags, once the host's read gave the dump's key, and (errors,
    warnings): a filesystem too small for the first load's dump, or, offline, what the dump will need."""
    dump = dict(config.get("presharded") or {})
    if not dump.get("enabled"):
        return config, [], []
    args = [group for group in config["args"] if group[0] not in presharded.FLAGS]
    settings = {dest: row for dest, row in (config.get("settings") or {}).items()
                if row.get("flag") not in presharded.FLAGS}
    facts = detected or {}
    model_bytes = facts.get("weight_bytes_total")
    draft_bytes = facts.get("draft_weight_bytes_total") or 0
    if facts.get("weights_fingerprint") is None:
        sizes = [(pinned or {}).get(key) for key in ("weight_bytes_total", "draft_weight_bytes_total")]
        try:
            need = presharded.needed_bytes(*(to_bytes(size) if not is_unset(size) else 0 for size in sizes))
            needs = f"about {need / 1e9:,.1f} GB free (the weights + 10 % + 1 GiB)"
        except ValueError:
            needs = "the weights' size + 10 % + 1 GiB free"
        note = (f"{_PRESHARDED}: the first start after a change of the SGLang version, the weights, tp_size or "
                f"nnodes dumps them under {dump['dir']}/<key> and needs {needs} there; the key is the weights' "
                "files on the host, read by a deploy (this configuration has no --load-format until then)")
        return {**config, "args": args, "argv": [w for g in args for w in g], "settings": settings,
                "presharded": dump}, [], [note]
    tp = int((settings.get("tp_size") or {}).get("value") or 1)
    nnodes = int((config.get("multinode") or {}).get("nnodes") or 1)
    key = presharded.dump_key(config["version"], facts.get("weights_fingerprint"),
                              facts.get("draft_weights_fingerprint") if dump["draft"] else None, tp, nnodes)
    groups = presharded.loader_args(dump["dir"], key, dump["draft"])
    for group in groups:
        settings[group[0][2:].replace("-", "_")] = {"flag": group[0], "value": group[1], "source": _PRESHARDED}
    args = args + groups
    state = facts.get("presharded") or {}
    is_ready = presharded.ready(state, key, dump["draft"])
    need = presharded.needed_bytes(int(model_bytes or 0), int(draft_bytes))
    free = state.get("free_bytes")
    errors = [] if is_ready else [e for e in [presharded.disk_problem(dump["dir"], need, free)] if e]
    errors += [e for e in [presharded.foreign_problem(dump["dir"], state)] if e]
    dump.update({"key": key, **presharded.paths(dump["dir"], key, dump["draft"]), "ready": is_ready,
                 "bytes": presharded.dump_bytes(state, key), "need_bytes": 0 if is_ready else need,
                 "free_bytes": free, "prune": presharded.to_prune(state, key)})
    return ({**config, "args": args, "argv": [w for g in args for w in g], "settings": settings,
             "presharded": dump}, errors, [])


# --- environment ---------------------------------------------------------------------------

def cuda_home(version: str) -> str:
    return f"/usr/local/cuda-{version}"


def _toolchain_env(values: dict[str, Any], p: Problems) -> dict[str, str]:
    """CUDA_HOME and PATH for the JIT builds of SGLang, FlashInfer and tvm-ffi: they find nvcc through
    CUDA_HOME (else `which nvcc`, else /usr/local/cuda, an alternatives link not to rely on) and run
    `ninja` from PATH (the ninja wheel installs it into the virtualenv's bin)."""
    version = str(values.get("sglang_cuda_version") or "").strip()
    if not _CUDA_VERSION_RE.match(version):
        p.error("sglang_cuda_version", f"{version!r} is not a CUDA release; allowed: major.minor such as 13.0")
        return {}
    venv = str(values.get("sglang_venv_dir") or "").strip()
    path = [venv + "/bin"] if venv.startswith("/") else []
    return {"CUDA_HOME": cuda_home(version), "PATH": ":".join([*path, cuda_home(version) + "/bin", SYSTEM_PATH])}


# NUMA binding (sglang_numa_bind): SGLang 0.5.23 binds each rank to its GPU's node by default wherever numactl is
# installed and the host has a node1 (srt/environ.py SGLANG_AUTO_NUMA_BIND, srt/utils/numa_utils.py); the deploy
# makes that a decision of the inventory and states it in the environment either way.
NUMA_BIND = {"off": "false", "auto": "true"}
NUMA_ENV = "SGLANG_AUTO_NUMA_BIND"


def _numa_env(values: dict[str, Any], p: Problems) -> tuple[str, dict[str, str]]:
    mode = str(values.get("sglang_numa_bind") or "off").strip().lower()
    if mode not in NUMA_BIND:
        p.error("sglang_numa_bind", f"{mode!r} is not a NUMA binding; allowed: off, auto")
        return "off", {}
    hardening = str(values.get("sglang_service_hardening") or "strict").strip().lower()
    if mode == "auto" and hardening == "none":
        p.error("sglang_numa_bind", "is auto with sglang_service_hardening: none: SGLang 0.5.23 then writes its "
                "NUMA helper script, mode 0777, to the shared /tmp and runs it for every rank "
                "(srt/utils/numa_utils.py:83-102), so any local user could replace it; allowed: sglang_numa_bind: "
                "off, or sglang_service_hardening: basic or strict (PrivateTmp)")
    env = values.get("sglang_env")
    if isinstance(env, dict) and NUMA_ENV in env:
        p.error(f"sglang_env[{NUMA_ENV!r}]", f"is set by sglang_numa_bind ({mode}); allowed: sglang_numa_bind: off "
                "or auto, and no SGLANG_AUTO_NUMA_BIND in sglang_env")
    return mode, {NUMA_ENV: NUMA_BIND[mode]}


# Pre-staged weights (role sglang_weights, mode prestaged): the server never needs the Hugging Face Hub, and with
# HF_HUB_OFFLINE=1 huggingface_hub makes no request at all. Without it, a path that is not a local directory (a
# model swapped through /update_weights_from_disk, say) is taken for a repository id and downloaded when the host
# has egress (SGLang 0.5.23 srt/model_loader/loader.py:494). sglang_env may still set it otherwise.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1"}


def _offline_env(values: dict[str, Any]) -> dict[str, str]:
    mode = str(values.get("sglang_weights_mode") or "prestaged").strip().lower()
    return {} if mode == "download" else dict(OFFLINE_ENV)


# Names of the environment that hold a secret: the environment file is readable by the service's group, --diff prints
# it, and so does the deploy plan. A word of the name (split at '_') that always means a secret, a pair that does
# (API_KEY, ACCESS_KEY, ...), or a last word TOKEN or KEY (HF_TOKEN, OPENAI_API_KEY), except in SGLang's and NCCL's
# own settings, none of which is a secret (0.5.23 srt/environ.py has SGLANG_LOG_DECODE_GRAPH_KEY, a debug switch,
# and SGLANG_*_TOKEN_* counts). TOKENS, KEYS as counts or limits are no secret.
_SECRET_WORDS = {"SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS",
                 "APIKEY", "PRIVATEKEY", "BEARER"}
_SECRET_PAIRS = {("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"), ("AUTH", "TOKEN"),
                 ("ACCESS", "TOKEN"), ("SESSION", "TOKEN")}
_SETTING_PREFIXES = ("SGLANG_", "NCCL_")


def secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret (see _SECRET_WORDS)."""
    words = [word for word in name.upper().split("_") if word]
    if not words:
        return False
    if _SECRET_WORDS & set(words) or _SECRET_PAIRS & {(words[i], words[i + 1]) for i in range(len(words) - 1)}:
        return True
    return words[-1] in ("TOKEN", "KEY") and not name.upper().startswith(_SETTING_PREFIXES)


def _env(value: Any, p: Problems, base: dict[str, str]) -> dict[str, str]:
    env = {**BASE_ENV, **base}
    if is_unset(value):
        return env
    if not isinstance(value, dict):
        p.error("sglang_env", f"must be a mapping of NAME -> value, got {type(value).__name__}")
        return env
    for name in sorted(value, key=str):
        var = f"sglang_env[{name!r}]"
        raw = value[name]
        if not ENV_NAME_RE.match(str(name)):
            p.error(var, "is not an environment variable name; "
                    "allowed: letters, digits and _, not starting with a digit")
            continue
        if isinstance(raw, (dict, list)) or raw is None:
            p.error(var, f"must be a string or number, got {type(raw).__name__}")
            continue
        if secret_name(str(name)):
            p.error(var, "looks like a secret, and the environment file is readable by the service's group and "
                    "printed by --diff; allowed: the secrets variables (sglang_api_key, sglang_admin_api_key for the "
                    "server's keys; sglang_weights_hf_token for Hugging Face), or a name that is no secret")
            continue
        text = ("1" if raw else "0") if isinstance(raw, bool) else str(raw)
        if "\n" in text or "\r" in text or "\x00" in text:
            p.error(var, "contains a newline or NUL; allowed: a single-line value")
            continue
        env[str(name)] = text
    return env


# --- the entry point ---------------------------------------------------------------------

def resolve(inputs: dict[str, Any], catalog_directory: str | None = None) -> dict[str, Any]:
    """Resolve one host's variables into its SGLang configuration (see the module docstring)."""
    problems = Problems()
    values, names = _apply_aliases(inputs, problems)
    instance = str(values.get("sglang_instance") or "")
    if not _INSTANCE_RE.match(instance):
        problems.error("sglang_instance", f"{instance!r} is not usable in a unit name; "
                       "allowed: letters, digits, '_', '.', '-' (the unit is sglang-<instance>.service)")
    version = str(values.get("sglang_version") or "")
    catalog: catalogs.Catalog | None = None
    try:
        catalog = catalogs.load_catalog(version, catalog_directory)
    except catalogs.CatalogError as exc:
        problems.error("sglang_version", str(exc))
    run = _Run(values, names, problems, _multinode(values, problems))
    _named(run)
    _live_without_speculative(run)
    _keys(run)
    tls = _tls(run)
    if catalog:
        _check_named(run, catalog)
    args = [group for value in run.resolved.values() for group in value.groups]
    args += _extra_args(run, catalog)
    dump = _presharded(run)
    numa, numa_env = _numa_env(values, problems)
    env = _env(values.get("sglang_env"), problems,
               {**_toolchain_env(values, problems), **numa_env, **_offline_env(values)})
    advertise = str(values.get("sglang_advertise_host") or "").strip()
    cuda = str(values.get("sglang_cuda_version") or "")
    return {
        "ok": not problems.errors,
        "errors": problems.errors,
        "warnings": problems.warnings,
        "version": version,
        "instance": instance,
        "unit": f"sglang-{instance}.service",
        "args": args,
        "argv": [word for group in args for word in group],
        "env": env,
        "settings": {dest: {"flag": v.flag, "value": v.value, "source": v.source}
                     for dest, v in run.resolved.items()},
        # How the router reaches this server; only a group's rank 0 serves (other ranks run a dummy health).
        "url": _live.base_url(advertise, run.typed.get("sglang_port"), tls["https"])
        if advertise and run.typed.get("sglang_port") else "",
        # TLS: on, and the files on the host (sglang_service writes them; every client verifies against ca_file).
        "tls": tls,
        "primary": run.node["node_rank"] == 0,
        "multinode": run.node,
        "cuda": {"version": cuda, "home": cuda_home(cuda)},
        "numa": {"bind": numa},
        "presharded": dump,
    }


def sources(config: dict[str, Any]) -> dict[str, str]:
    """Flag -> the name of what set it, for messages about flags (the rules)."""
    return {row["flag"]: row["source"] for row in (config.get("settings") or {}).values()}
