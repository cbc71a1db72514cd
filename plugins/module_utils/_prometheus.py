# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private to this collection: reading the Prometheus text exposition format (what ``/metrics`` serves).

One sample per line: ``name{label="value",...} value [timestamp]``; ``#`` starts a HELP, TYPE or
comment line. Label values are quoted and may hold ``}``, ``,`` and escaped quotes. Values are floats,
including ``NaN``, ``+Inf`` and ``-Inf``.
"""

from __future__ import annotations

import math
import re
import typing as t

_LABEL_VALUE = r'"(?:[^"\\]|\\.)*"'
_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)"
    rf"(?:\{{(?P<labels>(?:[^}}\"]|{_LABEL_VALUE})*)\}})?"
    r"\s+(?P<value>\S+)(?:\s+-?\d+)?$")
_LABEL = re.compile(rf"([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*({_LABEL_VALUE})")
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class Sample(t.NamedTuple):
    """One sample line."""

    name: str
    labels: dict[str, str]
    value: float


def _label_value(quoted: str) -> str:
    return re.sub(r"\\.", lambda match: _UNESCAPE.get(match.group(0), match.group(0)), quoted[1:-1])


def samples(text: str) -> t.Iterator[Sample]:
    """Every sample of the text; comments, blank lines and lines that are not samples are skipped."""
    for raw in text.splitlines():
        match = _SAMPLE.match(raw.strip())
        if not match:
            continue
        try:
            value = float(match.group("value"))
        except ValueError:
            continue
        labels = {key: _label_value(quoted) for key, quoted in _LABEL.findall(match.group("labels") or "")}
        yield Sample(match.group("name"), labels, value)


def sums(text: str, prefix: str = "", names: t.Iterable[str] | None = None) -> dict[str, float]:
    """{name: sum over its label sets} of the samples whose name starts with ``prefix`` (the key is the
    name without it), only for ``names`` when given. NaN and infinite values are left out."""
    wanted = None if names is None else set(names)
    totals: dict[str, float] = {}
    for sample in samples(text):
        if not sample.name.startswith(prefix) or not math.isfinite(sample.value):
            continue
        name = sample.name[len(prefix):]
        if wanted is None or name in wanted:
            totals[name] = totals.get(name, 0.0) + sample.value
    return totals
