# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Typing of values as Ansible users write them (`-e x=false` arrives as the string "false").

Shared by the resolve step (sglang_args) and the capacity planner (sglang_capacity, which the
simulator wheel also carries). Each function raises ValueError with a short reason.
"""

from __future__ import annotations

import math
import re
from typing import Any

_BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def is_unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))


def to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    word = str(value).strip().lower()
    if word in _BOOL_WORDS:
        return _BOOL_WORDS[word]
    raise ValueError(f"{value!r} is not a boolean")


def to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = str(value).strip()
    if re.match(r"^[+-]?\d+$", text):
        return int(text)
    raise ValueError(f"{value!r} is not an integer")


def to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a number") from None
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number
