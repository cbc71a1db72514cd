# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang flag catalog: every command-line option one SGLang version accepts.

A catalog is JSON written by ``tools/sglang_catalog.py`` from the real ``sglang`` wheel
(``roles/sglang_config/files/catalogs/sglang-<version>.json``). The same catalog is read by the
controller-side validation (render, plan, deploy) and by the SGLang simulator, which builds its
argument parser from it, so a flag that validation refuses is also refused by the server double.

Format (``"format": 1``)::

    {"format": 1, "package": "sglang", "version": "0.5.23",
     "wheel": "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl", "wheel_sha256": "...",
     "normalized": {},
     "options": [
       {"dest": "model_path", "flags": ["--model-path", "--model"], "action": "store",
        "type": "str", "nargs": null, "choices": null, "default": null, "const": null,
        "required": false, "help": "..."}, ...]}

``action`` is one of store, store_true, store_false, store_const, append, append_const, count,
extend, help, version, boolean_optional, or the class name of a custom argparse action.
``type`` is str, int, float, or the name of the callable SGLang passes (validated as a string);
null when argparse has none. ``choices`` are typed JSON values (a set in SGLang is sorted);
``default``/``const`` are JSON values, or the ``repr`` of values JSON cannot hold;
``argparse.SUPPRESS`` is ``"==SUPPRESS=="``. ``help`` is the raw text (``%(default)s`` kept) or null.
Options are in parser order; flags are unique but a dest may repeat (a deprecated spelling shares
the dest of its replacement, e.g. ``--cuda-graph-max-bs`` -> ``cuda_graph_max_bs_decode``).

Custom actions carry ``"extra"``: the attributes the action adds, e.g. ``new_flag`` (the
replacement a deprecation warning names), ``const_value`` (what a DeprecatedStoreConstAction
stores) or ``error_message`` (a retired flag that makes SGLang exit with that message).

Top level, ``"normalized"`` maps a dest to why a field of it was rewritten by the generator
(a machine- or run-specific default, an unordered set of choices); ``{}`` when nothing was.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
from typing import Any

FORMAT = 1
# The catalogs live with the role that resolves the configuration (roles/sglang_config/files/catalogs), which
# passes their directory; a caller without one may name it in SGLANG_CATALOG_DIR.
CATALOG_DIR_ENV = "SGLANG_CATALOG_DIR"
_VERSION_RE = re.compile(r"^sglang-(?P<version>[0-9][0-9A-Za-z.+-]*)\.json$")

Catalog = dict[str, Any]


class CatalogError(Exception):
    """A catalog is missing or malformed."""


def catalog_dir(directory: str | None = None) -> str:
    found = directory or os.environ.get(CATALOG_DIR_ENV)
    if not found:
        raise CatalogError(f"no catalog directory given (roles/sglang_config/files/catalogs, or {CATALOG_DIR_ENV})")
    return os.path.normpath(found)


def available_versions(directory: str | None = None) -> list[str]:
    """Versions with a committed catalog, oldest first."""
    try:
        names = os.listdir(catalog_dir(directory))
    except (OSError, CatalogError):
        return []
    found = [m.group("version") for m in map(_VERSION_RE.match, names) if m]
    return sorted(found, key=version_key)


def version_key(version: str) -> tuple:
    """Sort key for versions like 0.5.23, 0.5.10.post1, 0.5.23+sim (local part ignored)."""
    base = str(version).split("+", 1)[0]
    parts: list[Any] = []
    for piece in re.split(r"[.]", base):
        match = re.match(r"^(\d+)(.*)$", piece)
        if match:
            parts.append((int(match.group(1)), match.group(2)))
        else:
            parts.append((-1, piece))
    return tuple(parts)


def load_catalog(version: str, directory: str | None = None) -> Catalog:
    """Load the catalog of one SGLang version; raise CatalogError naming the known versions."""
    base = str(version).split("+", 1)[0]
    path = os.path.join(catalog_dir(directory), f"sglang-{base}.json")
    if not os.path.exists(path):
        known = ", ".join(available_versions(directory)) or "none"
        raise CatalogError(
            f"no flag catalog for sglang {base} (catalogs exist for: {known}); generate one with "
            f"tools/sglang_catalog.py {base}"
        )
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if data.get("format") != FORMAT or not isinstance(data.get("options"), list):
        raise CatalogError(f"{path} is not a format-{FORMAT} flag catalog")
    return data


def flag_index(catalog: Catalog) -> dict[str, dict[str, Any]]:
    """Map every flag spelling (``--model-path``, ``--model``) to its option."""
    return {flag: option for option in catalog["options"] for flag in option["flags"]}


def find_option(catalog: Catalog, flag: str) -> dict[str, Any] | None:
    """The option for an exact flag spelling, or None (no abbreviations: we always emit full names)."""
    return flag_index(catalog).get(flag)


def suggest(catalog: Catalog, flag: str, limit: int = 3) -> list[str]:
    """Close spellings of an unknown flag, for a "did you mean" hint."""
    return difflib.get_close_matches(flag, list(flag_index(catalog)), n=limit, cutoff=0.6)


def _bool_from_text(text: str) -> bool:
    lowered = str(text).strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value: {text!r}")


_TYPES = {"int": int, "float": float, "str": str, "bool": _bool_from_text}
_SIMPLE_ACTIONS = {
    "store", "store_true", "store_false", "store_const", "append",
    "append_const", "count", "extend", "help", "version",
}
_VALUED_ACTIONS = {"store", "append", "extend"}


class _CatalogCustomAction(argparse.Action):
    """Stands in for a custom SGLang action (deprecation shims, ``LoRAPathAction``).

    It keeps the arity, type and choices the catalog recorded and mimics the shims: a retired flag
    with an ``error_message`` stops parsing (exit 2, like ``parser.error``), a flag taking no value
    stores ``const_value`` (DeprecatedStoreConstAction) or ``const`` (DeprecatedStoreTrueAction),
    a plain DeprecatedAction only warns (stores nothing), anything else stores its value(s).
    """

    def __init__(self, option_strings: list[str], dest: str, kind: str = "",
                 extra: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.kind = kind
        self.extra = dict(extra or {})
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if self.extra.get("error_message"):
            parser.error(self.extra["error_message"])
        if "const_value" in self.extra:
            setattr(namespace, self.dest, self.extra["const_value"])
        elif self.nargs == 0:
            if self.kind != "DeprecatedAction":
                setattr(namespace, self.dest, True if self.const is None else self.const)
        else:
            setattr(namespace, self.dest, values)


def _option_type(option: dict[str, Any]) -> Any:
    return _TYPES.get(option.get("type") or "str", str)


def _valued_kwargs(option: dict[str, Any]) -> dict[str, Any]:
    """type, nargs and choices of an option that takes values. Choices are typed JSON values
    already (``[1, 2]`` for an int option), so they are kept as they are."""
    kwargs: dict[str, Any] = {"type": _option_type(option)}
    if option.get("nargs") is not None:
        kwargs["nargs"] = option["nargs"]
    if option.get("choices") is not None:
        kwargs["choices"] = list(option["choices"])
    return kwargs


def _custom_kwargs(option: dict[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"action": _CatalogCustomAction, "kind": option["action"],
                              "extra": option.get("extra") or {}}
    nargs = option.get("nargs")
    if nargs == 0:
        kwargs["nargs"] = 0
        kwargs["const"] = option.get("const")
    else:
        kwargs.update(_valued_kwargs(option))
    return kwargs


def _boolean_optional_flags(flags: list[str]) -> list[str]:
    """BooleanOptionalAction adds the ``--no-`` spelling itself: pass only the positive ones."""
    return [f for f in flags if not (f.startswith("--no-") and "--" + f[len("--no-"):] in flags)]


def build_parser(catalog: Catalog, prog: str = "launch_server.py") -> argparse.ArgumentParser:
    """An argparse parser that accepts exactly the catalog's options, like SGLang's own.

    Abbreviations stay allowed (argparse's default, as in SGLang), so a removed flag that is the
    prefix of two newer ones fails as "ambiguous option", as the real server does. Defaults are not
    set (parsed values are None unless given).
    """
    parser = argparse.ArgumentParser(prog=prog, add_help=False)
    for option in catalog["options"]:
        action = option["action"]
        flags = list(option["flags"])
        kwargs: dict[str, Any] = {"dest": option["dest"]}
        if action == "help":
            parser.add_argument(*flags, action="help", help=argparse.SUPPRESS)
            continue
        if action == "version":
            parser.add_argument(*flags, action="version", version=catalog["version"])
            continue
        if action == "boolean_optional":
            kwargs["action"] = argparse.BooleanOptionalAction
            flags = _boolean_optional_flags(flags)
        elif action in _SIMPLE_ACTIONS:
            kwargs["action"] = action
            if action in ("store_const", "append_const"):
                kwargs["const"] = option.get("const")
            if action in _VALUED_ACTIONS:
                kwargs.update(_valued_kwargs(option))
        else:
            kwargs.update(_custom_kwargs(option))
        if option.get("required"):
            kwargs["required"] = True
        parser.add_argument(*flags, **kwargs)
    return parser
