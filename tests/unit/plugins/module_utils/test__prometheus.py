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
