"""``--config file.yaml``: SGLang merges a YAML mapping of options under the command line.

As SGLang 0.5.23's ``ConfigArgumentMerger`` does (srt/utils/server_args_config_parser.py): each key becomes
``--<key>`` verbatim, so only a flag's own spelling works (``api-key``); ``api_key`` becomes ``--api_key``, which
the parser does not know, and the server exits 2 (``unrecognized arguments``). A key of an option the merger cannot
pass (a ``BooleanOptionalAction``, a multi-value custom action) is a ValueError; a store_true key puts its bare
flag for true and nothing for false; any other boolean is ``--key true|false``; a list is ``--key a b``, an empty
one nothing; a mapping is ``--key <JSON>``; anything else ``--key str(value)``.

The real server uses PyYAML; the simulator has only the standard library, so it reads the subset a
deployment writes: top-level ``key: value`` lines with scalars (strings, numbers, booleans, null),
flow lists ``[a, b]`` and block lists (``- item``), comments, and JSON. Anything else (nested
mappings, anchors, multi-line strings) is refused with a clear error instead of being misread.
"""

from __future__ import annotations

import json
import re
from typing import Any

Catalog = dict[str, Any]
_BOOLS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*)$")
_FLOAT = re.compile(r"[-+]?([0-9][0-9_]*)?\.[0-9]+([eE][-+]?[0-9]+)?$|[-+]?[0-9]+[eE][-+]?[0-9]+$")


class ConfigFileError(ValueError):
    """The config file cannot be used (the real server raises ValueError too)."""


def _strip_comment(line: str) -> str:
    quote = ""
    for index, char in enumerate(line):
        if char in "'\"" and (not quote or quote == char):
            quote = "" if quote else char
        elif char == "#" and not quote and (index == 0 or line[index - 1] in " \t"):
            return line[:index].rstrip()
    return line.rstrip()


def scalar(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1].replace("''", "'") if text[0] == "'" else json.loads(text)
    lowered = text.lower()
    if lowered in ("", "~", "null"):
        return None
    if lowered in _BOOLS:
        return _BOOLS[lowered]
    if _INT.match(text):
        return int(text.replace("_", ""))
    if _FLOAT.match(text):
        return float(text.replace("_", ""))
    if text[0] in "{&*|>!%@`":
        raise ConfigFileError(f"unsupported YAML value (the simulator reads a simple subset): {text}")
    return text


def _flow_list(text: str) -> list[Any]:
    inner = text.strip()[1:-1].strip()
    return [scalar(item) for item in inner.split(",")] if inner else []


def parse_yaml(text: str) -> dict[str, Any]:
    """A top-level mapping of scalars and lists (or a JSON object)."""
    if text.lstrip().startswith("{"):
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ConfigFileError("Config file must contain a dictionary at root level")
        return data
    data: dict[str, Any] = {}
    current: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        if not line.strip() or line.strip() in ("---", "..."):
            continue
        if line.startswith((" ", "\t", "-")):
            item = line.strip()
            if current is None or (not item.startswith("- ") and item != "-"):
                raise ConfigFileError(f"line {number}: nested mappings are not supported: {raw.strip()}")
            data[current] = [*(data[current] or []), scalar(item[1:])]
            continue
        key, colon, value = line.partition(":")
        if not colon or not key.strip():
            raise ConfigFileError(f"line {number}: expected 'key: value', got: {raw.strip()}")
        current = key.strip().strip("'\"")
        value = value.strip()
        data[current] = _flow_list(value) if value.startswith("[") and value.endswith("]") else scalar(value)
    return data


# The catalog's action names that are not argparse's class names (the merger's message names the class).
_ACTION_CLASS = {"boolean_optional": "BooleanOptionalAction", "store_true": "_StoreTrueAction", "store": "_StoreAction"}


def _config_keys(option: Catalog) -> set[str]:
    """The YAML keys that name an option (server_args_config_parser.py:17-23): its dest and each long spelling."""
    return {option["dest"]} | {flag[2:].replace("-", "_") for flag in option["flags"] if flag.startswith("--")}


def _supported(option: Catalog) -> bool:
    """store_true, or a single-value action (server_args_config_parser.py:26-28, 49-53): argparse's _StoreAction,
    whatever its nargs, or an action whose nargs is None."""
    return option["action"] in ("store_true", "store") or option.get("nargs") is None


def _key_sets(catalog: Catalog) -> tuple[set[str], set[str]]:
    """(the store_true keys, the keys of options the merger refuses), as ConfigArgumentMerger.__init__ builds them."""
    options = [option for option in catalog["options"] if option["flags"]]
    store_true = {key for option in options if option["action"] == "store_true" for key in _config_keys(option)}
    supported = {key for option in options if _supported(option) for key in _config_keys(option)}
    unsupported = {key for option in options
                   if not _supported(option) and not {"--config", "--help", "-h"} & set(option["flags"])
                   for key in _config_keys(option) if key not in supported}
    return store_true, unsupported


def _args(key: str, value: Any, store_true: set[str]) -> list[str]:
    """server_args_config_parser.py:174-210: the words one key puts on the command line, its name verbatim."""
    if isinstance(value, bool):
        if key.replace("-", "_") in store_true:
            return [f"--{key}"] if value else []
        return [f"--{key}", str(value).lower()]
    if isinstance(value, list):
        return [f"--{key}", *(str(item) for item in value)] if value else []
    if isinstance(value, dict):
        return [f"--{key}", json.dumps(value)]
    return [f"--{key}", str(value)]


def config_path(argv: list[str]) -> str | None:
    found = [i for i, arg in enumerate(argv) if arg == "--config"]
    if len(found) > 1:
        raise ConfigFileError("Multiple config files specified! Only one allowed.")
    if not found:
        return None
    if found[0] == len(argv) - 1:
        raise ConfigFileError("No config file specified after --config flag!")
    return argv[found[0] + 1]


def merge(argv: list[str], catalog: Catalog) -> list[str]:
    """argv with the config file's options in front (so the command line wins)."""
    path = config_path(argv)
    if path is None:
        return argv
    if not path.lower().endswith((".yaml", ".yml")):
        raise ConfigFileError(f"Config file must be YAML format, got: {path[path.rfind('.'):]}")
    try:
        with open(path, encoding="utf-8") as handle:
            data = parse_yaml(handle.read())
    except FileNotFoundError:
        raise ConfigFileError(f"Config file not found: {path}") from None
    store_true, unsupported = _key_sets(catalog)
    merged: list[str] = []
    for key, value in data.items():
        name = str(key)
        if name.replace("-", "_") in unsupported:
            action = next(o["action"] for o in catalog["options"] if name.replace("-", "_") in _config_keys(o))
            action = _ACTION_CLASS.get(action, action)
            raise ConfigFileError(f"Unsupported config option '{name.replace('-', '_')}' with action '{action}'")
        merged += _args(name, value, store_true)
    at = argv.index("--config")
    return merged + argv[:at] + argv[at + 2:]  # server_args_config_parser.py:99-106: --config and its path dropped
