"""_prometheus: the text exposition format SGLang's /metrics serves."""

from __future__ import annotations

import math

from ansible_collections.sglang.deploy.plugins.module_utils import _prometheus

PAGE = r"""# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="kimi-k2.5",tp_rank="0"} 3.0
sglang:num_running_reqs{model_name="odd}, \"name\"\\",tp_rank="1"} 2
sglang:num_queue_reqs{model_name="kimi-k2.5"} 1e1 1764512345000
sglang:token_usage{model_name="kimi-k2.5"} NaN
sglang:gen_throughput{model_name="kimi-k2.5"} +Inf
sglang:cache_hit_rate -0.5
process_resident_memory_bytes 1.2e+09
not a sample line
"""


def test_samples_read_names_labels_values_and_skip_the_rest() -> None:
    samples = list(_prometheus.samples(PAGE))
    assert [sample.name for sample in samples] == [
        "sglang:num_running_reqs", "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
        "sglang:gen_throughput", "sglang:cache_hit_rate", "process_resident_memory_bytes"]
    assert samples[0].labels == {"model_name": "kimi-k2.5", "tp_rank": "0"}
    assert samples[1].labels == {"model_name": 'odd}, "name"\\', "tp_rank": "1"}  # quoted }, comma and escapes
    assert samples[2].value == 10.0  # a timestamp after the value is not the value
    assert math.isnan(samples[3].value) and samples[4].value == math.inf and samples[5].value == -0.5


def test_sums_add_label_sets_by_name_and_leave_out_what_is_not_finite() -> None:
    assert _prometheus.sums(PAGE, prefix="sglang:") == {"num_running_reqs": 5.0, "num_queue_reqs": 10.0,
                                                        "cache_hit_rate": -0.5}
    assert _prometheus.sums(PAGE, prefix="sglang:", names=["num_queue_reqs", "absent"]) == {"num_queue_reqs": 10.0}
    assert _prometheus.sums(PAGE)["process_resident_memory_bytes"] == 1.2e9
    assert _prometheus.sums("") == {}


TYPED = """# HELP sglang:prompt_tokens_total Multiprocess metric
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{is_streaming="false"} 42.0
# TYPE sglang:generation_tokens counter
sglang:generation_tokens_total 7.0
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{le="+Inf"} 5.0
sglang:e2e_request_latency_seconds_count 5.0
#TYPE sglang:token_usage gauge
sglang:token_usage 0.5
"""


def test_types_name_each_family_and_a_sample_finds_its_family() -> None:
    families = _prometheus.types(TYPED)
    assert families == {"sglang:prompt_tokens_total": "counter", "sglang:generation_tokens": "counter",
                        "sglang:e2e_request_latency_seconds": "histogram", "sglang:token_usage": "gauge"}
    # prometheus_client's multiprocess collector names a counter family with its _total, the text format without.
    assert _prometheus.type_of("sglang:prompt_tokens_total", families) == "counter"
    assert _prometheus.type_of("sglang:generation_tokens_total", families) == "counter"
    assert _prometheus.type_of("sglang:e2e_request_latency_seconds_count", families) == "histogram"
    assert _prometheus.type_of("sglang:token_usage", families) == "gauge"
    assert _prometheus.type_of("sglang:absent_total", families) == "untyped"


def rank(value: float, **labels: str) -> _prometheus.Sample:
    return _prometheus.Sample("sglang:num_running_reqs", labels, value)


def test_series_group_by_name_and_the_reducers_take_what_the_series_are() -> None:
    found = _prometheus.series(PAGE, prefix="sglang:", names=["num_running_reqs", "token_usage"])
    assert list(found) == ["num_running_reqs"]  # NaN is left out
    assert [sample.value for sample in found["num_running_reqs"]] == [3.0, 2.0]
    assert _prometheus.total(found["num_running_reqs"]) == 5.0
    assert _prometheus.largest(found["num_running_reqs"]) == 3.0
    assert _prometheus.largest([]) == _prometheus.total([]) == _prometheus.sum_of_largest([], "dp_rank") == 0.0
    # Copies within a DP rank (its TP ranks), parts across DP ranks; no dp_rank label: one group.
    dp = [rank(3, tp_rank="0", dp_rank="0"), rank(3, tp_rank="1", dp_rank="0"), rank(4, tp_rank="2", dp_rank="1")]
    assert _prometheus.sum_of_largest(dp, "dp_rank") == 7.0
    assert _prometheus.sum_of_largest([rank(3, tp_rank="0"), rank(3, tp_rank="1")], "dp_rank") == 3.0
