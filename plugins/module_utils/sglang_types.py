# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Typing of values as Ansible users write them (`-e x=false` arrives as the string "false"),
SGLang version comparison, and the collector of messages that name the variable they are about.

Shared by the settings (sglang_config), the capacity formulas (sglang_capacity, which the simulator
wheel also carries) and the plan. Standard library only, Python 3.9+. Each converter raises
ValueError with a short reason.
"""

from __future__ import annotations

import math
import re
from typing import Any

_HUMAN_INT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(k|M|G|T|Ki|Mi|Gi|Ti)?\s*$")
_HUMAN_SCALE = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
                "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
# A size with its unit (sglang_model_weight_size): SI units as Hugging Face and `df -H` count, IEC units as
# `du -h` and `ls -lh` count (their "547G" is 547 GiB, 7 % more than 547 GB), or bytes.
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_SIZE_SCALE = {"b": 1, "byte": 1, "bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
SIZE_ALLOWED = ("a size with its unit: '547 GiB' (what du -h and ls -lh print as 547G), '587 GB' (what Hugging Face "
                "shows), or '587354357760 B'; units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB")
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
    if isinstance(value, str) and "_" in value:  # Python reads "1_5" as 15.0; nobody means that
        raise ValueError(f"{value!r} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{value!r} is not a number") from None
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


def positive_number(value: Any) -> float | None:
    """``value`` as a number above zero, or None (not a number, zero or less): for figures read back from a host's
    records, where anything else means "not known"."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def to_human_int(value: Any) -> int:
    """SGLang's human_readable_int (0.5.12+, e.g. --max-total-tokens): 128000, "128k", "25.6k", "1Mi"
    (suffixes are case-sensitive; decimals only with SI suffixes)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return to_int(value)
    match = _HUMAN_INT.match(str(value))
    suffix = match.group(2) or "" if match else ""
    if not match or ("." in match.group(1) and suffix.endswith("i")) or ("." in match.group(1) and not suffix):
        raise ValueError(f"{value!r} is not an integer (suffixes k, M, G, T, Ki, Mi, Gi, Ti allowed)")
    return int(float(match.group(1)) * _HUMAN_SCALE[suffix])


def to_bytes(value: Any) -> int:
    """'547 GiB', '587 GB', '587354357760 B' -> bytes. A bare number is refused: GB and GiB differ by 7 %, and
    which one a typed figure means cannot be told. du's one-letter suffixes ('547G') are refused for the same
    reason, with the unit they stand for."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not a size")
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a size")
    number, unit = match.group(1), match.group(2).lower()
    if not unit:
        raise ValueError(f"{value!r} has no unit (GB and GiB differ by 7 %)")
    if unit in ("k", "m", "g", "t"):
        raise ValueError(f"{value!r} has a one-letter unit; du -h and ls -lh mean {unit.upper()}iB by it, write "
                         f"'{number} {unit.upper()}iB'")
    if unit not in _SIZE_SCALE:
        raise ValueError(f"{value!r} has an unknown unit {match.group(2)!r}")
    if _SIZE_SCALE[unit] == 1 and "." in number:
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(float(number) * _SIZE_SCALE[unit])


def version_tuple(version: str) -> tuple[int, int, int]:
    """'0.5.23', '0.5.10.post1', '0.5.23+sim' -> (0, 5, 23); rules change only at patch releases."""
    parts = [int(m.group(0)) if m else 0
             for m in (re.match(r"\d+", p) for p in str(version).split("+", 1)[0].split(".")[:3])]
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def at_least(version: str, minimum: str) -> bool:
    return version_tuple(version) >= version_tuple(minimum)


class Problems:
    """Errors and warnings, each starting with the name of what it is about. ``names`` renames a
    key (a plan input, a variable) to what the user wrote, e.g. "hicache_ratio (overrides ...)"."""

    def __init__(self, names: dict[str, str] | None = None) -> None:
        self.names = dict(names or {})
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def name(self, key: str) -> str:
        return self.names.get(key, key)

    def error(self, key: str, message: str) -> None:
        self.errors.append(f"{self.name(key)}: {message}")

    def warn(self, key: str, message: str) -> None:
        self.warnings.append(f"{self.name(key)}: {message}")


def all_or_none(present: dict[str, bool], what: dict[str, str], off: str) -> list[tuple[str, str]]:
    """Variables that go together, all set or none (TLS: a certificate, its key and its CA). For each one missing
    while another is set: (its name, why it is refused and what is allowed). ``what``: each one in words; ``off``:
    what all of them empty means."""
    if not any(present.values()) or all(present.values()):
        return []
    given = [name for name in present if present[name]]
    return [(name, f"is empty while {' and '.join(given)} {'is' if len(given) == 1 else 'are'} set; allowed: "
                   f"{what[name]}, with the other {len(present) - 1}, or all {len(present)} empty ({off})")
            for name in present if not present[name]]
