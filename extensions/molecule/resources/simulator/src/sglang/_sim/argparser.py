"""The argparse parser of the SGLang simulator, built from a flag catalog (``sglang_catalog``'s format).

A test double: it stands in for SGLang's own parser, so it lives with the simulator and does not ship
with the collection (it was ``build_parser`` in ``plugins/module_utils/sglang_catalog.py``). Standard
library only, and it needs nothing but the catalog's data, so tests load it by its path.
"""

from __future__ import annotations

import argparse
from typing import Any

Catalog = dict[str, Any]


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
