# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Resolve: inventory variables -> the SGLang argument list and environment of one host.

This is the only place that turns variables into SGLang flags. ``resolve()`` takes the role
variables (``sglang_*``) plus the short command-line aliases (``hicache_ratio`` ...), types and
checks every value, validates every flag and value against the flag catalog of
``sglang_version``, and returns argv, environment, errors and warnings. It never raises for bad
input: every problem becomes one message that names the variable and what is allowed, so a
play can refuse the whole host before any file on it changes.

``systemd_exec_line()`` and ``env_file_lines()`` quote the result for systemd; the templates call
them through the ``sglang`` filter plugin and build nothing themselves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from . import sglang_catalog as catalogs
from .sglang_types import is_unset as _is_unset
from .sglang_types import to_bool, to_float, to_int

Args = list[tuple[str, list[str]]]  # (flag, values): [] = bare flag, [v] = one value, [v, ...] = nargs

# Short names from the user's own command line (`-e hicache_ratio=2.0`) -> the role variable.
ALIASES = {
    "hicache_ratio": "sglang_hicache_ratio",
    "hicache_size": "sglang_hicache_size",
    "hicache_write_policy": "sglang_hicache_write_policy",
    "hicache_io_backend": "sglang_hicache_io_backend",
    "hicache_mem_layout": "sglang_hicache_mem_layout",
    "hicache_storage_backend": "sglang_hicache_storage_backend",
}

# Environment every unit gets unless sglang_env overrides it: unbuffered stdout so log lines
# reach the journal as they are written, and one progress line per tqdm update (see
# roles/sglang_stack/files/sglang_deploy_line_progress.py).
BASE_ENV = {"PYTHONUNBUFFERED": "1", "SGLANG_DEPLOY_LINE_PROGRESS": "1"}
# What systemd gives a service as PATH; the unit's own PATH puts the virtualenv's bin (ninja, which
# SGLang's and FlashInfer's JIT builds run from PATH) and the CUDA toolkit's bin in front of it.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_CUDA_VERSION_RE = re.compile(r"^[0-9]{1,2}\.[0-9]{1,2}$")

SPECULATIVE_NEEDS_DRAFT = ("EAGLE", "EAGLE3")
SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
_INSTANCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FLAG_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# Options the deploy passes another way: secrets through the --config file it writes itself.
_KEPT_OUT_OF_ARGV = {"api_key": "sglang_api_key", "admin_api_key": "sglang_admin_api_key",
                     "config": "the variables above (the deploy writes SGLang's --config file itself)"}


class _Problems:
    """Collects errors and warnings; every message starts with the variable it is about."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def error(self, var: str, message: str) -> None:
        self.errors.append(f"{var}: {message}")

    def warn(self, var: str, message: str) -> None:
        self.warnings.append(f"{var}: {message}")


# --- value typing -------------------------------------------------------------------------

def format_value(value: Any) -> str:
    """How a typed value is written on the command line: 2.0 stays 2.0, True is never written."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


# --- named settings ----------------------------------------------------------------------

def _checked(problems: _Problems, var: str, value: Any, convert: Callable[[Any], Any],
             allowed: str, test: Callable[[Any], bool] | None = None) -> Any:
    """Convert a value; on failure record "<var>: <why>; allowed: <allowed>" and return None."""
    try:
        typed = convert(value)
    except ValueError as exc:
        problems.error(var, f"{exc}; allowed: {allowed}")
        return None
    if test is not None and not test(typed):
        problems.error(var, f"{format_value(typed)} is out of range; allowed: {allowed}")
        return None
    return typed


def _apply_aliases(inputs: dict[str, Any], problems: _Problems) -> tuple[dict[str, Any], dict[str, str]]:
    """Overlay `-e hicache_ratio=...` style short names; remember which name the user typed."""
    values = dict(inputs)
    names = {key: key for key in inputs}
    given = {alias: value for alias, value in (inputs.get("aliases") or {}).items() if not _is_unset(value)}
    for alias, value in sorted(given.items()):
        if alias not in ALIASES:
            problems.error(alias, "is not a known short name; allowed: {}".format(", ".join(sorted(ALIASES))))
            continue
        values[ALIASES[alias]] = value
        names[ALIASES[alias]] = f"{alias} (overrides {ALIASES[alias]})"
    if "hicache_ratio" in given and "hicache_size" in given:
        problems.error("hicache_ratio", "and hicache_size are both given; SGLang uses the size and ignores "
                       "the ratio; allowed: one of them")
    elif "hicache_ratio" in given and not _is_unset(values.get("sglang_hicache_size")):
        problems.warn("hicache_ratio", f"replaces sglang_hicache_size={values['sglang_hicache_size']} for this run")
        values["sglang_hicache_size"] = None
    elif "hicache_size" in given and not _is_unset(values.get("sglang_hicache_ratio")):
        problems.warn("hicache_size", f"replaces sglang_hicache_ratio={values['sglang_hicache_ratio']} for this run")
        values["sglang_hicache_ratio"] = None
    if given and not _is_unset(values.get("sglang_hicache_enabled")):
        try:
            enabled = to_bool(values["sglang_hicache_enabled"])
        except ValueError:
            enabled = True  # reported by the hicache section
        if not enabled:
            problems.error(sorted(given)[0], "is given but sglang_hicache_enabled is false; allowed: set "
                           "sglang_hicache_enabled=true, or drop the hicache_* override")
    return values, names


def _core_args(v: dict[str, Any], n: dict[str, str], p: _Problems) -> Args:
    args: Args = []
    if _is_unset(v.get("sglang_model_path")):
        p.error("sglang_model_path", "is required; allowed: the model directory on the host")
    else:
        args.append(("--model-path", [str(v["sglang_model_path"])]))
    if not _is_unset(v.get("sglang_served_model_name")):
        args.append(("--served-model-name", [str(v["sglang_served_model_name"])]))
    tp = _checked(p, n.get("sglang_tp_size", "sglang_tp_size"), v.get("sglang_tp_size", 1), to_int,
                  "an integer >= 1 (GPUs per server)", lambda x: x >= 1)
    if tp is not None:
        args.append(("--tp-size", [str(tp)]))
    host = v.get("sglang_host")
    if _is_unset(host) or re.search(r"\s", str(host)):
        p.error("sglang_host", f"{host!r} is not an address; allowed: an IP address or host name to bind")
    else:
        args.append(("--host", [str(host)]))
    port = _checked(p, "sglang_port", v.get("sglang_port"), to_int, "an integer from 1 to 65535",
                    lambda x: 1 <= x <= 65535)
    if port is not None:
        args.append(("--port", [str(port)]))
    if not _is_unset(v.get("sglang_mem_fraction_static")):
        mfs = _checked(p, "sglang_mem_fraction_static", v["sglang_mem_fraction_static"], to_float,
                       "a number between 0 and 1, exclusive", lambda x: 0.0 < x < 1.0)
        if mfs is not None:
            args.append(("--mem-fraction-static", [format_value(mfs)]))
    if not _is_unset(v.get("sglang_kv_cache_dtype")):
        args.append(("--kv-cache-dtype", [str(v["sglang_kv_cache_dtype"])]))
    return args


def _hicache_args(v: dict[str, Any], n: dict[str, str], p: _Problems) -> Args:
    enabled = _checked(p, "sglang_hicache_enabled", v.get("sglang_hicache_enabled", False), to_bool,
                       "true or false")
    settings = ("ratio", "size", "write_policy", "io_backend", "mem_layout", "storage_backend")
    if not enabled:
        for key in settings:
            var = "sglang_hicache_" + key
            if not _is_unset(v.get(var)) and n.get(var, var) == var:  # an -e alias is refused earlier
                p.warn(var, "is ignored because sglang_hicache_enabled is false")
        return []
    args: Args = [("--enable-hierarchical-cache", [])]
    if not _is_unset(v.get("sglang_hicache_ratio")):
        ratio = _checked(p, n["sglang_hicache_ratio"], v["sglang_hicache_ratio"], to_float,
                         "a number above 1.0 (host pool = ratio x GPU KV pool; a pool no bigger than the "
                         "GPU pool only duplicates it)", lambda x: x > 1.0)
        if ratio is not None:
            args.append(("--hicache-ratio", [format_value(ratio)]))
    if not _is_unset(v.get("sglang_hicache_size")):
        size = _checked(p, n["sglang_hicache_size"], v["sglang_hicache_size"], to_int,
                        "a whole number of GB per TP rank, >= 0 (0 = use the ratio)", lambda x: x >= 0)
        if size:
            args.append(("--hicache-size", [str(size)]))
    if not _is_unset(v.get("sglang_hicache_ratio")) and not _is_unset(v.get("sglang_hicache_size")):
        p.error("sglang_hicache_size", "and sglang_hicache_ratio are both set; SGLang uses the size and ignores "
                "the ratio; allowed: one of them")
    for key in settings[2:]:
        var = "sglang_hicache_" + key
        if not _is_unset(v.get(var)):
            args.append(("--hicache-" + key.replace("_", "-"), [str(v[var])]))
    return args


def _speculative_args(v: dict[str, Any], p: _Problems) -> Args:
    algorithm = v.get("sglang_speculative_algorithm")
    numbers = ("num_steps", "eagle_topk", "num_draft_tokens")
    if _is_unset(algorithm):
        for key in ("draft_model_path", *numbers):
            if not _is_unset(v.get("sglang_speculative_" + key)):
                p.warn("sglang_speculative_" + key, "is ignored because sglang_speculative_algorithm is not set")
        return []
    algorithm = str(algorithm)
    if algorithm not in SPECULATIVE_ALGORITHMS:
        allowed = ", ".join(SPECULATIVE_ALGORITHMS)
        p.error("sglang_speculative_algorithm", f"{algorithm!r} is unknown; allowed: {allowed}")
        return []
    args: Args = [("--speculative-algorithm", [algorithm])]
    draft = v.get("sglang_speculative_draft_model_path")
    if _is_unset(draft):
        if algorithm in SPECULATIVE_NEEDS_DRAFT:
            p.error("sglang_speculative_draft_model_path",
                    f"is required with sglang_speculative_algorithm={algorithm}; "
                    "allowed: the draft model directory on the host")
    else:
        args.append(("--speculative-draft-model-path", [str(draft)]))
    for key in numbers:
        var = "sglang_speculative_" + key
        if not _is_unset(v.get(var)):
            number = _checked(p, var, v[var], to_int, "an integer >= 1", lambda x: x >= 1)
            if number is not None:
                args.append(("--speculative-" + key.replace("_", "-"), [str(number)]))
    return args


def multinode(v: dict[str, Any], p: _Problems) -> dict[str, Any]:
    """Rank and size of this host in its multi-node group (a group of one when there is none)."""
    spec = v.get("multinode") or {}
    group, members, host = spec.get("group") or "", list(spec.get("members") or []), spec.get("host")
    if not group:
        return {"group": "", "nnodes": 1, "node_rank": 0, "dist_init_addr": ""}
    if host not in members:
        p.error("sglang_multinode_group", f"{host} is not a member of group {group!r}; "
                "allowed: a group this host is in")
        return {"group": group, "nnodes": 1, "node_rank": 0, "dist_init_addr": ""}
    port = _checked(p, "sglang_dist_init_port", spec.get("port"), to_int, "an integer from 1 to 65535",
                    lambda x: 1 <= x <= 65535)
    tp = v.get("sglang_tp_size")
    try:
        if len(members) > 1 and to_int(tp) % len(members):
            p.error("sglang_tp_size", f"{tp} does not split over the {len(members)} hosts of {group}; "
                    "allowed: a multiple of the group size")
    except ValueError:
        pass  # reported with the core arguments
    return {"group": group, "nnodes": len(members), "node_rank": members.index(host),
            "dist_init_addr": f"{str(spec.get('first_host') or '').strip()}:{port}"}


def _multinode_args(node: dict[str, Any]) -> Args:
    if node["nnodes"] <= 1:
        return []
    return [("--nnodes", [str(node["nnodes"])]), ("--node-rank", [str(node["node_rank"])]),
            ("--dist-init-addr", [node["dist_init_addr"]])]


def _secret_args(v: dict[str, Any]) -> Args:
    """API keys go to SGLang through a --config YAML file, never on the command line."""
    secrets = v.get("secrets") or {}
    wanted = [key for key in ("api_key", "admin_api_key") if secrets.get(key) and to_bool(secrets[key])]
    return [("--config", [str(secrets.get("file") or "")])] if wanted else []


def _named_args(v: dict[str, Any], n: dict[str, str], p: _Problems, node: dict[str, Any]) -> Args:
    args = (_core_args(v, n, p) + _multinode_args(node) + _hicache_args(v, n, p) + _speculative_args(v, p)
            + _secret_args(v))
    metrics = _checked(p, "sglang_enable_metrics", v.get("sglang_enable_metrics", True), to_bool, "true or false")
    if metrics:
        args.append(("--enable-metrics", []))
    return args


# --- extra args and the catalog ----------------------------------------------------------

def _flag_name(key: Any) -> str | None:
    text = str(key).strip().lstrip("-").replace("_", "-")
    return "--" + text if _FLAG_KEY_RE.match(text) else None


def _extra_args(extra: Any, catalog: catalogs.Catalog | None, taken: dict[str, str], p: _Problems) -> Args:
    """`sglang_extra_args`: {flag: value}; true = bare flag, false/null = omitted, list = repeated."""
    if _is_unset(extra):
        return []
    if not isinstance(extra, dict):
        p.error("sglang_extra_args", f"must be a mapping of flag -> value, got {type(extra).__name__}")
        return []
    args: Args = []
    for key in sorted(extra, key=lambda k: _flag_name(k) or str(k)):
        var = f"sglang_extra_args[{key!r}]"
        flag = _flag_name(key)
        if flag is None:
            p.error(var, "is not a flag name; allowed: lower-case words joined by '-' or '_'")
            continue
        option = catalogs.find_option(catalog, flag) if catalog else None
        if catalog and option is None:
            _unknown_flag(var, flag, catalog, p)
            continue
        if option is not None and option["dest"] in _KEPT_OUT_OF_ARGV:
            p.error(var, f"would put {flag} on the command line, visible to every local user; "
                    f"allowed: {_KEPT_OUT_OF_ARGV[option['dest']]}")
            continue
        if option is not None:
            flag = option["flags"][0]
            if option["dest"] in taken:
                p.error(var, f"sets {flag}, which {taken[option['dest']]} already sets; allowed: set it in one place")
                continue
            taken[option["dest"]] = var
        emitted = _extra_values(var, flag, option, extra[key], p)
        if option is not None and catalog is not None:
            for _, words in emitted:
                for word in words:
                    _check_value(var, flag, option, word, catalog["version"], p)
        args.extend(emitted)
    return args


def _extra_values(var: str, flag: str, option: dict[str, Any] | None, value: Any, p: _Problems) -> Args:
    action = option["action"] if option else "store"
    takes_no_value = option is not None and option.get("nargs") == 0  # e.g. a deprecated store_true shim
    if takes_no_value or action in ("store_true", "store_false", "store_const", "count", "boolean_optional"):
        try:
            on = to_bool(value) if value is not None else False
        except ValueError as exc:
            p.error(var, f"{exc}; allowed: true or false ({flag} takes no value)")
            return []
        if action == "boolean_optional":
            return [(flag if on else "--no-" + flag[2:], [])]
        return [(flag, [])] if on else []
    if value is None or value is False:
        return []
    if value is True:
        p.error(var, f"{flag} takes a value, not true; allowed: the value to pass")
        return []
    if not isinstance(value, list):
        return [(flag, [format_value(value)])]
    nargs = option.get("nargs") if option else None
    if action in ("append", "extend") and nargs in (None, "?"):
        return [(flag, [format_value(item)]) for item in value]
    if nargs in ("+", "*") or isinstance(nargs, int):
        return [(flag, [format_value(item) for item in value])]
    p.error(var, f"{flag} takes one value, got a list; allowed: a single value")
    return []


def _check_against_catalog(args: Args, catalog: catalogs.Catalog, sources: dict[str, str], p: _Problems) -> None:
    """Every emitted flag exists in the pinned version and every value has its type and choices."""
    index = catalogs.flag_index(catalog)
    for flag, values in args:
        var = sources.get(flag, flag)
        option = index.get(flag)
        if option is None:
            _unknown_flag(var, flag, catalog, p)
            continue
        for value in values:
            _check_value(var, flag, option, value, catalog["version"], p)


def _unknown_flag(var: str, flag: str, catalog: catalogs.Catalog, p: _Problems) -> None:
    hint = catalogs.suggest(catalog, flag)
    version = catalog["version"]
    suggestion = f"; did you mean {' or '.join(hint)}?" if hint else ""
    p.error(var, f"{flag} is not a flag of sglang {version}; allowed: an option of that version "
            f"(roles/sglang/files/catalogs/sglang-{version}.json){suggestion}")


def _check_value(var: str, flag: str, option: dict[str, Any], value: str, version: str, p: _Problems) -> None:
    kind = option.get("type") or "str"
    converter = {"int": to_int, "float": to_float}.get(kind)
    if converter is not None:
        try:
            converter(value)
        except ValueError as exc:
            p.error(var, "{} for {}; allowed: {}".format(exc, flag, "an integer" if kind == "int" else "a number"))
            return
    choices = option.get("choices")
    if choices and value not in [str(c) for c in choices]:
        p.error(var, "{!r} is not a choice of {} in sglang {}; allowed: {}".format(
            value, flag, version, ", ".join(str(c) for c in choices)))


def flag_groups(mapping: dict[str, Any], var: str) -> list[list[str]]:
    """Flags of another program (sglang-router) from a {flag: value} mapping, without a catalog:
    true = bare flag, false/null = omitted, list = repeated. Raises ValueError naming `var`."""
    problems = _Problems()
    groups: list[list[str]] = []
    for key in sorted(mapping or {}, key=lambda k: _flag_name(k) or str(k)):
        flag = _flag_name(key)
        if flag is None:
            problems.error(f"{var}[{key!r}]", "is not a flag name; allowed: lower-case words joined by '-' or '_'")
            continue
        value = mapping[key]
        if value is True:
            groups.append([flag])
        elif value is not None and value is not False:
            emitted = _extra_values(f"{var}[{key!r}]", flag, None, value, problems)
            groups.extend([name, *words] for name, words in emitted)
    if problems.errors:
        raise ValueError("; ".join(problems.errors))
    return groups


# --- environment ---------------------------------------------------------------------------

def cuda_home(version: str) -> str:
    return f"/usr/local/cuda-{version}"


def _toolchain_env(v: dict[str, Any], p: _Problems) -> dict[str, str]:
    """CUDA_HOME and PATH for the JIT builds of SGLang, FlashInfer and tvm-ffi: they find nvcc through
    CUDA_HOME (else `which nvcc`, else /usr/local/cuda, an alternatives link not to rely on) and run
    `ninja` from PATH (the ninja wheel installs it into the virtualenv's bin)."""
    version = str(v.get("sglang_cuda_version") or "").strip()
    if not _CUDA_VERSION_RE.match(version):
        p.error("sglang_cuda_version", f"{version!r} is not a CUDA release; allowed: major.minor such as 13.0")
        return {}
    venv = str(v.get("sglang_venv_dir") or "").strip()
    path = [venv + "/bin"] if venv.startswith("/") else []
    return {"CUDA_HOME": cuda_home(version), "PATH": ":".join([*path, cuda_home(version) + "/bin", SYSTEM_PATH])}


def _env(value: Any, p: _Problems, base: dict[str, str]) -> dict[str, str]:
    env = {**BASE_ENV, **base}
    if _is_unset(value):
        return env
    if not isinstance(value, dict):
        p.error("sglang_env", f"must be a mapping of NAME -> value, got {type(value).__name__}")
        return env
    for name in sorted(value, key=str):
        var = f"sglang_env[{name!r}]"
        raw = value[name]
        if not _ENV_NAME_RE.match(str(name)):
            p.error(var, "is not an environment variable name; "
                    "allowed: letters, digits and _, not starting with a digit")
            continue
        if isinstance(raw, (dict, list)) or raw is None:
            p.error(var, f"must be a string or number, got {type(raw).__name__}")
            continue
        text = ("1" if raw else "0") if isinstance(raw, bool) else str(raw)
        if "\n" in text or "\r" in text or "\x00" in text:
            p.error(var, "contains a newline or NUL; allowed: a single-line value")
            continue
        env[str(name)] = text
    return env


# --- the entry point ---------------------------------------------------------------------

def resolve(inputs: dict[str, Any], catalog_directory: str | None = None) -> dict[str, Any]:
    """Resolve one host's variables. Returns argv, env, errors, warnings and the typed settings."""
    problems = _Problems()
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
    node = multinode(values, problems)
    named = _named_args(values, names, problems, node)
    sources = {flag: names.get(_source_var(flag), _source_var(flag)) for flag, _ in named}
    taken: dict[str, str] = {}
    if catalog:
        index = catalogs.flag_index(catalog)
        taken = {index[flag]["dest"]: sources[flag] for flag, _ in named if flag in index}
        _check_against_catalog(named, catalog, sources, problems)
    extra = _extra_args(values.get("sglang_extra_args"), catalog, taken, problems)
    args = named + extra
    for flag, _ in extra:
        sources.setdefault(flag, f"sglang_extra_args[{flag[2:]!r}]")
    env = _env(values.get("sglang_env"), problems, _toolchain_env(values, problems))
    argv = [word for flag, words in args for word in [flag, *words]]
    advertise = str(values.get("sglang_advertise_host") or "").strip()
    return {
        "ok": not problems.errors,
        "errors": problems.errors,
        "warnings": problems.warnings,
        "version": version,
        "instance": instance,
        "unit": f"sglang-{instance}.service",
        "args": [[flag, *words] for flag, words in args],
        "argv": argv,
        "env": env,
        # How the router reaches this server; only a group's rank 0 serves (other ranks run a dummy health).
        # Which variable each flag came from, and the names the user typed (-e short names), for messages.
        "sources": sources,
        "names": {var: name for var, name in names.items() if name != var},
        "url": f"http://{advertise}:{values.get('sglang_port')}" if advertise else "",
        "primary": node["node_rank"] == 0,
        "multinode": node,
        "cuda": {"version": str(values.get("sglang_cuda_version") or ""),
                 "home": cuda_home(str(values.get("sglang_cuda_version") or ""))},
    }


def _source_var(flag: str) -> str:
    """The role variable a named flag comes from, for messages about catalog mismatches."""
    special = {"--enable-hierarchical-cache": "sglang_hicache_enabled", "--enable-metrics": "sglang_enable_metrics",
               "--nnodes": "sglang_multinode_group", "--node-rank": "sglang_multinode_group",
               "--dist-init-addr": "sglang_dist_init_port", "--config": "sglang_api_key"}
    if flag in special:
        return special[flag]
    return "sglang_" + flag[2:].replace("-", "_")


# --- quoting for systemd -----------------------------------------------------------------

_SAFE_WORD = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def systemd_quote(word: str) -> str:
    """One ExecStart word: `%` -> `%%` (specifiers), `$` -> `$$` (variable expansion), C-style
    escapes for backslash, quotes and control characters, double quotes around anything that is
    not a plain word (spaces, empty, quotes, a lone `;`)."""
    text = str(word).replace("%", "%%").replace("$", "$$")
    if _SAFE_WORD.match(text) and text != ";":
        return text
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\t", "\\t").replace("\r", "\\r"))
    return f'"{escaped}"'


def systemd_exec_line(prefix: list[str], args: list[list[str]] | None = None) -> str:
    """An ExecStart value: the interpreter words, then one flag (with its values) per continued
    line, so a changed flag is a one-line diff. The first word must be an absolute path."""
    if not prefix or not str(prefix[0]).startswith("/"):
        raise ValueError(f"ExecStart must start with an absolute path, got {prefix[:1]!r}")
    lines = [" ".join(systemd_quote(word) for word in prefix)]
    lines += ["    " + " ".join(systemd_quote(word) for word in group) for group in args or [] if group]
    return " \\\n".join(lines)


def env_file_lines(env: dict[str, str]) -> str:
    """EnvironmentFile content: `NAME="value"` per line. Values are double-quoted with backslash
    escapes; systemd applies no specifier or variable expansion in EnvironmentFile=."""
    lines = []
    for name, value in env.items():
        if not _ENV_NAME_RE.match(str(name)):
            raise ValueError(f"bad environment variable name {name!r}")
        escaped = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
        lines.append(f'{name}="{escaped}"')
    return "\n".join(lines)
