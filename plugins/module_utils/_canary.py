# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Canary analysis of one per-request latency histogram: did the canary get slower than its baseline?

The input is what Prometheus gives for a window: for each histogram bucket's upper bound (``le``, as Prometheus
writes it, ``+Inf`` included) the increase of that cumulative bucket over the window, for the canary and for the
baseline (SGLang 0.5.23's ``sglang:time_to_first_token_seconds``, ``sglang:request_time_per_output_token_seconds``,
``sglang:e2e_request_latency_seconds``: one observation per request). Lower is better.

The test is the Mann-Whitney U of the two samples as the buckets resolve them: every pair of a canary and a baseline
request in different buckets is ordered by its buckets, a pair in one bucket is a tie. ``A = U / (n_c * n_b)`` is the
probability that a canary request is slower than a baseline one, ties counted half (0.5: no difference). Its null
variance has the tie correction, and the one-sided p-value the continuity correction (Mann & Whitney 1947; the
normal approximation with ties as in Lehmann, Nonparametrics, 1975). The decision (docs/monitoring.md, "Judging a
canary"):

- ``invalid``: the two bucket sets differ, a bucket is not a number, an increase is negative or the buckets are not
  cumulative (a counter went down: the server restarted in the window), or ``+Inf`` is missing;
- ``fail`` at once, whatever the latencies, when a guardrail trips: the canary's error rate (5xx and aborts) above
  twice the baseline's and above 1 %, with at least 3 errors, or the router's circuit breaker open for it;
- ``no_data``: fewer than ``min_requests`` requests on either side;
- ``fail``: statistically and practically slower - p < alpha / metrics and A >= 0.5 + margin / 2 - in a second
  window in a row (``failing_windows`` >= 1), or in one window with p < alpha / (10 * metrics); a first such window is
  ``inconclusive`` and says so;
- ``pass``: the one-sided 95 % upper bound of A is below 0.5 + margin: not slower by the margin;
- ``inconclusive``: neither.

Standard library only: it runs on the controller."""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

Z95 = NormalDist().inv_cdf(0.95)
# Guardrails: an error rate the canary may not exceed (and twice the baseline's), counted from this many errors.
MAX_ERROR_RATE = 0.01
MAX_ERROR_RATIO = 2.0
MIN_ERRORS = 3


class Invalid(ValueError):
    """The input cannot be judged; the message says why."""


def _bound(le: Any) -> float:
    text = str(le).strip()
    if text.lower() in ("+inf", "inf"):
        return math.inf
    try:
        value = float(text)
    except ValueError:
        raise Invalid(f"bucket {le!r} is not a number or +Inf") from None
    if math.isnan(value):
        raise Invalid(f"bucket {le!r} is not a number or +Inf")
    return value


def _increase(side: str, le: Any, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise Invalid(f"the {side}'s increase of bucket {le} is {value!r}, not a number") from None
    if math.isnan(number) or math.isinf(number):
        raise Invalid(f"the {side}'s increase of bucket {le} is {value!r}, not a number")
    if number < 0:
        raise Invalid(f"the {side}'s bucket {le} went down ({number:g}): a counter reset, the server restarted in the "
                      "window")
    return number


def bucket_counts(side: str, buckets: Any) -> dict[float, float]:
    """Cumulative bucket increases -> the requests that fell in each bucket, by upper bound."""
    if not isinstance(buckets, Mapping) or not buckets:
        raise Invalid(f"the {side}'s buckets are not a mapping of le to increase")
    cumulative = sorted((_bound(le), _increase(side, le, value)) for le, value in buckets.items())
    bounds = [bound for bound, _value in cumulative]
    if len(set(bounds)) != len(bounds):
        raise Invalid(f"the {side} gives a bucket twice")
    if bounds[-1] != math.inf:
        raise Invalid(f"the {side} has no +Inf bucket")
    counts, below = {}, 0.0
    for bound, value in cumulative:
        if value < below:
            raise Invalid(f"the {side}'s buckets are not cumulative: le={bound:g} holds {value:g}, fewer than the "
                          f"{below:g} below it (a counter went down in the window)")
        counts[bound] = value - below
        below = value
    return counts


def mann_whitney(canary: Mapping[float, float], baseline: Mapping[float, float]) -> tuple[float, float, float]:
    """(A, its standard error, the one-sided p-value that the canary is slower), from counts on the same buckets."""
    n_c, n_b = sum(canary.values()), sum(baseline.values())
    total = n_c + n_b
    u, below, ties = 0.0, 0.0, 0.0
    for bound in sorted(canary):
        u += canary[bound] * (below + baseline[bound] / 2)
        below += baseline[bound]
        tied = canary[bound] + baseline[bound]
        ties += tied ** 3 - tied
    mean = n_c * n_b / 2
    variance = n_c * n_b / 12 * ((total + 1) - ties / (total * (total - 1)))
    effect = u / (n_c * n_b)
    if variance <= 0:  # every request in one bucket: no order this resolution can show
        return effect, 0.0, 1.0
    sd = math.sqrt(variance)
    p = 1 - NormalDist().cdf((u - mean - 0.5) / sd)
    return effect, sd / (n_c * n_b), min(1.0, max(0.0, p))


def _guardrail(guardrails: Mapping[str, Any] | None) -> str:
    if not guardrails:
        return ""
    if guardrails.get("breaker_open"):
        return "the router's circuit breaker is open for the canary"
    errors, requests = float(guardrails.get("canary_errors") or 0), float(guardrails.get("canary_requests") or 0)
    base_errors = float(guardrails.get("baseline_errors") or 0)
    base_requests = float(guardrails.get("baseline_requests") or 0)
    rate = errors / requests if requests else (1.0 if errors else 0.0)
    base_rate = base_errors / base_requests if base_requests else 0.0
    if errors >= MIN_ERRORS and rate > max(MAX_ERROR_RATIO * base_rate, MAX_ERROR_RATE):
        return (f"the canary's errors: {errors:g} of {requests:g} requests ({rate:.1%}), the baseline's "
                f"{base_rate:.1%} (more than {MAX_ERROR_RATIO:g} times it and {MAX_ERROR_RATE:.0%})")
    return ""


def _result(verdict: str, reason: str, n_c: float = 0, n_b: float = 0, effect: float | None = None,
            p: float | None = None, upper: float | None = None) -> dict[str, Any]:
    return {"verdict": verdict, "n_canary": int(n_c), "n_baseline": int(n_b),
            "effect": None if effect is None else round(effect, 4), "p_value": None if p is None else float(f"{p:.3g}"),
            "effect_upper": None if upper is None else round(upper, 4), "reason": reason}


def verdict(canary: Any, baseline: Any, *, min_requests: int = 50, alpha: float = 0.01, margin: float = 0.10,
            metrics: int = 3, failing_windows: int = 0, guardrails: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The verdict of one metric over one window (module docstring)."""
    if not 0 < alpha < 1 or not 0 < margin < 1 or metrics < 1 or min_requests < 2 or failing_windows < 0:
        raise ValueError("alpha and margin must be in (0, 1), metrics >= 1, min_requests >= 2, failing_windows >= 0")
    tripped = _guardrail(guardrails)
    if tripped:
        return _result("fail", f"guardrail: {tripped}")
    try:
        c, b = bucket_counts("canary", canary), bucket_counts("baseline", baseline)
    except Invalid as exc:
        return _result("invalid", str(exc))
    if set(c) != set(b):
        return _result("invalid", "the canary and the baseline have different buckets (le sets): bucket flags must be "
                                  "the same on every server")
    n_c, n_b = sum(c.values()), sum(b.values())
    if n_c < min_requests or n_b < min_requests:
        return _result("no_data", f"too few requests to judge: canary n={n_c:g}, baseline n={n_b:g} (at least "
                                  f"{min_requests} each)", n_c, n_b)
    effect, se, p = mann_whitney(c, b)
    upper = effect + Z95 * se
    level, practical = alpha / metrics, 0.5 + margin / 2
    shown = f"A={effect:.3f} (P(canary slower), 0.5 = no difference), one-sided p={p:.3g}"
    if p < level and effect >= practical:
        if failing_windows >= 1 or p < level / 10:
            return _result("fail", f"slower: {shown} < {level:.3g} and A >= {practical:.3f} (the margin "
                                   f"{margin:.0%})", n_c, n_b, effect, p, upper)
        return _result("inconclusive", f"slower in this window ({shown}), not yet in two windows in a row nor with "
                                       f"p < {level / 10:.3g}", n_c, n_b, effect, p, upper)
    if upper < 0.5 + margin:
        return _result("pass", f"not slower by the margin {margin:.0%}: {shown}, 95 % upper bound of A {upper:.3f} < "
                               f"{0.5 + margin:.2f}", n_c, n_b, effect, p, upper)
    return _result("inconclusive", f"neither slower nor shown not slower: {shown}, upper bound of A {upper:.3f}",
                   n_c, n_b, effect, p, upper)
