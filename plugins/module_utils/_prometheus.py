# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private to this collection: reading the Prometheus text exposition format (what ``/metrics`` serves).

One sample per line: ``name{label="value",...} value [timestamp]``; ``#`` starts a HELP, TYPE or
comment line. Label values are quoted and may hold ``}``, ``,`` and escaped quotes. Values are floats,
including ``NaN``, ``+Inf`` and ``-Inf``.

Reducing a family's series to one number depends on what the series are, which the text does not say
beyond the TYPE: ``sums`` adds them (counters, or one series per disjoint part), ``largest`` takes the
biggest (copies of one value, as every rank of a server writes its own), and ``sum_of_largest`` adds the
largest of each group of a label (copies within a group, disjoint parts across groups).
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
_TYPE = re.compile(r"^#\s*TYPE\s+(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\s+(?P<type>\w+)\s*$")
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
# What a sample name adds to its family's name (text format 0.0.4 and OpenMetrics).
_SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created", "_gsum", "_gcount")


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


def types(text: str) -> dict[str, str]:
    """{family name: type} from the ``# TYPE`` lines (counter, gauge, histogram, summary, untyped, ...)."""
    found = (_TYPE.match(raw.strip()) for raw in text.splitlines())
    return {match.group("name"): match.group("type") for match in found if match}


def type_of(name: str, families: t.Mapping[str, str]) -> str:
    """The type of the family a sample name belongs to: the TYPE line of the name itself (prometheus_client's
    multiprocess collector names a counter family with its ``_total``), else of the name without its suffix;
    "untyped" when no TYPE line names it."""
    if name in families:
        return families[name]
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and name[:-len(suffix)] in families:
            return families[name[:-len(suffix)]]
    return "untyped"


def series(text: str, prefix: str = "", names: t.Iterable[str] | None = None) -> dict[str, list[Sample]]:
    """{name: its samples} of the names that start with ``prefix`` (the key is the name without it), only for
    ``names`` when given, in the order of the text. NaN and infinite values are left out."""
    wanted = None if names is None else set(names)
    found: dict[str, list[Sample]] = {}
    for sample in samples(text):
        if not sample.name.startswith(prefix) or not math.isfinite(sample.value):
            continue
        name = sample.name[len(prefix):]
        if wanted is None or name in wanted:
            found.setdefault(name, []).append(sample)
    return found


def total(found: t.Iterable[Sample]) -> float:
    """The sum of the samples' values (0 for none)."""
    return math.fsum(sample.value for sample in found)


def largest(found: t.Iterable[Sample]) -> float:
    """The largest of the samples' values (0 for none)."""
    return max((sample.value for sample in found), default=0.0)


def sum_of_largest(found: t.Iterable[Sample], label: str) -> float:
    """The largest value within each value of ``label`` (a sample without it is in the group ""), added over
    the groups."""
    groups: dict[str, float] = {}
    for sample in found:
        key = sample.labels.get(label, "")
        groups[key] = max(groups.get(key, sample.value), sample.value)
    return math.fsum(groups.values())


def sums(text: str, prefix: str = "", names: t.Iterable[str] | None = None) -> dict[str, float]:
    """{name: sum over its label sets} of the samples whose name starts with ``prefix`` (the key is the
    name without it), only for ``names`` when given. NaN and infinite values are left out. Right for
    counters; a gauge that every rank of a server writes is counted once per rank."""
    return {name: total(found) for name, found in series(text, prefix, names).items()}
