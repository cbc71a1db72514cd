"""``--config file.yaml``: SGLang merges a YAML mapping of snake_case options under the command line.

The real server uses PyYAML; the simulator has only the standard library, so it reads the subset a
deployment writes: top-level ``key: value`` lines with scalars (strings, numbers, booleans, null),
flow lists ``[a, b]`` and block lists (``- item``), comments, and JSON. Anything else (nested
mappings, anchors, multi-line strings) is refused with a clear error instead of being misread.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sglang._sim import logs

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


def _flags(option: Catalog, value: Any) -> list[str]:
    flag = option["flags"][0]
    if option["action"] in ("store_true", "store_false", "boolean_optional"):
        if not isinstance(value, bool):
            raise ConfigFileError(
                f"Invalid value for '{option['dest']}': {value}. Expected boolean (true/false), "
                f"got {type(value).__name__}")
        if option["action"] == "boolean_optional":
            return [flag if value else "--no-" + flag[2:]]
        return [flag] if value == (option["action"] == "store_true") else []
    if value is None:
        return []
    if isinstance(value, list):
        return [flag, *(str(v) for v in value)]
    if isinstance(value, dict):
        return [flag, json.dumps(value)]
    return [flag, json.dumps(value) if isinstance(value, bool) else str(value)]


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
    by_dest = {option["dest"]: option for option in catalog["options"]}
    merged: list[str] = []
    for key, value in data.items():
        option = by_dest.get(str(key).replace("-", "_"))
        if option is None or option["action"] in ("help", "version") or option["dest"] == "config":
            logs.log(f"Unknown config option '{key}' will be ignored. Check if the option name is correct.")
            continue
        merged += _flags(option, value)
    return merged + argv
