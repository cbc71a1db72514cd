"""The canary judge (filter sglang.deploy.canary_verdict, module_utils/_canary.py): synthetic bucket vectors for each
verdict, the statistic against the rank test it stands for, and its error rates - identical distributions (1,000 A/A
pairs) fail at most at the rate alpha promises, and a latency twice the baseline's at 100 requests fails."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.filter.canary import canary_verdict
from ansible_collections.sglang.deploy.plugins.module_utils import _canary
from hypothesis import given, settings
from hypothesis import strategies as st

# Buckets as fine as the engine tests set them (SGLang's defaults start at 0.1 s): 5 ms to about 2.4 s, then +Inf.
BOUNDS = [round(0.005 * 1.25 ** i, 6) for i in range(28)]


def histogram(latencies: list[float], bounds: list[float] = BOUNDS) -> dict[str, float]:
    """What `sum by (le) (increase(..._bucket[w]))` gives for these requests: cumulative counts per `le`."""
    buckets = {f"{bound:g}": float(sum(1 for x in latencies if x <= bound)) for bound in bounds}
    buckets["+Inf"] = float(len(latencies))
    return buckets


def lognormal(rng: random.Random, n: int, median: float = 0.2, sigma: float = 0.6) -> list[float]:
    return [median * math.exp(rng.gauss(0, sigma)) for _draw in range(n)]


def test_identical_windows_pass() -> None:
    rng = random.Random(1)
    same = histogram(lognormal(rng, 200))
    result = canary_verdict(same, same)
    assert result["verdict"] == "pass", result
    assert result["effect"] == 0.5 and result["n_canary"] == result["n_baseline"] == 200


def test_twice_as_slow_at_100_requests_fails_in_one_window() -> None:
    rng = random.Random(2)
    base = lognormal(rng, 100)
    result = canary_verdict(histogram([2 * x for x in lognormal(rng, 100)]), histogram(base))
    assert result["verdict"] == "fail", result
    assert result["effect"] > 0.7 and result["p_value"] < 0.01 / 30, result
    assert result["reason"].startswith("slower: A=")


def test_a_moderate_regression_fails_only_in_a_second_window() -> None:
    """p under alpha/metrics but not ten times under it: a first window is inconclusive, the second fails."""
    rng = random.Random(3)
    canary, base = histogram(lognormal(rng, 120, median=0.26)), histogram(lognormal(rng, 120))
    first = canary_verdict(canary, base)
    assert 0.01 / 30 <= first["p_value"] < 0.01 / 3, first  # the fixed sample lands in the band this is about
    assert first["verdict"] == "inconclusive" and "two windows in a row" in first["reason"], first
    assert canary_verdict(canary, base, failing_windows=1)["verdict"] == "fail"


def test_faster_passes() -> None:
    rng = random.Random(4)
    result = canary_verdict(histogram(lognormal(rng, 100, median=0.1)), histogram(lognormal(rng, 100)))
    assert result["verdict"] == "pass" and result["effect"] < 0.5, result


def test_few_requests_are_no_data() -> None:
    rng = random.Random(5)
    result = canary_verdict(histogram(lognormal(rng, 12)), histogram(lognormal(rng, 400)))
    assert result["verdict"] == "no_data" and "canary n=12" in result["reason"] and "at least 50" in result["reason"]
    assert canary_verdict(histogram(lognormal(rng, 12)), histogram(lognormal(rng, 400)), min_requests=10)["verdict"] \
        != "no_data"


@pytest.mark.parametrize(("canary", "baseline", "why"), [
    ({"0.1": 5, "0.2": 9, "+Inf": 10}, {"0.1": 5, "0.25": 9, "+Inf": 10}, "different buckets"),
    ({"0.1": 5, "0.2": 9}, {"0.1": 5, "0.2": 9}, "no +Inf bucket"),
    ({"0.1": 5, "0.2": 4, "+Inf": 10}, {"0.1": 5, "0.2": 9, "+Inf": 10}, "not cumulative"),
    ({"0.1": -3, "0.2": 9, "+Inf": 10}, {"0.1": 5, "0.2": 9, "+Inf": 10}, "went down"),
    ({"fast": 5, "+Inf": 10}, {"fast": 5, "+Inf": 10}, "not a number"),
    ({"0.1": "many", "+Inf": 10}, {"0.1": 5, "+Inf": 10}, "not a number"),
    ({"0.1": 5, "0.10": 6, "+Inf": 10}, {"0.1": 5, "+Inf": 10}, "twice"),
    ([], {"0.1": 5, "+Inf": 10}, "not a mapping"),
])
def test_input_it_cannot_judge_is_invalid(canary: Any, baseline: Any, why: str) -> None:
    result = canary_verdict(canary, baseline)
    assert result["verdict"] == "invalid" and why in result["reason"], result
    assert result["effect"] is None and result["p_value"] is None


def test_prometheus_spellings_of_the_bounds_are_one_set() -> None:
    assert _canary.bucket_counts("canary", {"1e-1": 2, "0.2": 3, "+Inf": 3}) == {0.1: 2, 0.2: 1, math.inf: 0}
    assert canary_verdict({"0.1": 60, "+Inf": 60}, {"1e-1": 60, "inf": 60})["verdict"] == "pass"


@pytest.mark.parametrize(("guardrails", "tripped"), [
    ({"canary_errors": 3, "canary_requests": 100, "baseline_errors": 0, "baseline_requests": 900}, True),
    ({"canary_errors": 2, "canary_requests": 10, "baseline_errors": 0, "baseline_requests": 900}, False),  # < 3
    ({"canary_errors": 3, "canary_requests": 1000, "baseline_errors": 0, "baseline_requests": 900}, False),  # 0.3 %
    ({"canary_errors": 6, "canary_requests": 100, "baseline_errors": 40, "baseline_requests": 900}, False),  # < 2x
    ({"breaker_open": True}, True),
    ({}, False),
])
def test_guardrails_fail_outright(guardrails: dict[str, Any], tripped: bool) -> None:
    rng = random.Random(6)
    same = histogram(lognormal(rng, 100))
    result = canary_verdict(same, same, guardrails=guardrails)
    assert (result["verdict"] == "fail" and result["reason"].startswith("guardrail: ")) is tripped, result
    # A guardrail needs no latency data at all.
    assert (canary_verdict({}, {}, guardrails=guardrails)["verdict"] == "fail") is tripped


def test_every_request_in_one_bucket_shows_no_difference() -> None:
    result = canary_verdict({"0.1": 80, "+Inf": 80}, {"0.1": 90, "+Inf": 90})
    assert result["verdict"] == "pass" and result["effect"] == 0.5 and result["p_value"] == 1.0, result


def test_bad_options_raise() -> None:
    for options in ({"alpha": 0}, {"margin": 1.5}, {"metrics": 0}, {"min_requests": 1}, {"failing_windows": -1}):
        with pytest.raises(ValueError, match="alpha and margin"):
            canary_verdict({"+Inf": 1}, {"+Inf": 1}, **options)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=30), st.lists(st.integers(0, 5), min_size=1, max_size=30))
def test_the_statistic_is_the_rank_test_on_bucket_indices(canary: list[int], baseline: list[int]) -> None:
    """U from bucket counts equals the Mann-Whitney U of the samples themselves (each request at its bucket's index,
    ties half), and A stays in [0, 1]."""
    counts_c = {float(i): float(canary.count(i)) for i in range(6)}
    counts_b = {float(i): float(baseline.count(i)) for i in range(6)}
    effect, _se, p = _canary.mann_whitney(counts_c, counts_b)
    u = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in canary for y in baseline)
    assert effect == pytest.approx(u / (len(canary) * len(baseline)))
    assert 0 <= effect <= 1 and 0 <= p <= 1


def test_identical_distributions_fail_at_most_at_the_rate_alpha_promises() -> None:
    """1,000 A/A pairs of 100 requests each from one distribution, judged as a second failing window (the most a
    single window can fail), alpha 0.01 for one metric: at most 1 % fail (with room for the sampling of 1,000: the
    binomial's 99.9th percentile at 1 % is 21; the practical margin keeps it far below)."""
    rng = random.Random(7)
    fails = 0
    for _pair in range(1000):
        a, b = histogram(lognormal(rng, 100)), histogram(lognormal(rng, 100))
        fails += canary_verdict(a, b, alpha=0.01, metrics=1, failing_windows=1)["verdict"] == "fail"
    print(f"MEASURED canary judge A/A: {fails} of 1000 identical pairs failed (alpha 0.01, one metric)")
    assert fails <= 10


def test_a_twice_as_slow_canary_fails_in_nearly_every_window() -> None:
    rng = random.Random(8)
    fails = sum(canary_verdict(histogram([2 * x for x in lognormal(rng, 100)]), histogram(lognormal(rng, 100)))
                ["verdict"] == "fail" for _window in range(200))
    print(f"MEASURED canary judge: x2 latency at 100 requests failed {fails} of 200 single windows")
    assert fails >= 198
