"""Calibration: a start's own figures read from its log, and the plan that follows SGLang's formula from them."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_preflight as preflight
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_capacity import device_kv_tokens
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_plan import PlanInputs, calibrate, plan
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_startup import (
    GIB,
    StartupLogError,
    read,
    server_args,
)
from helpers import ROOT, load_script
from model_configs import EAGLE3, KIMI_K25

LOGS = ROOT / "tests/fixtures/sglang-logs"
# The pinned versions' startup logs (their real formats; the 8 x RTX PRO 6000 example at
# mem_fraction_static 0.90, Kimi-K2.5 + EAGLE-3): version -> (#tokens of the target's pool, the
# architectures loaded before it).
PINNED = {
    "0.5.9": (165908, ["KimiK25ForConditionalGeneration"]),
    "0.5.12": (165908, ["KimiK25ForConditionalGeneration"]),
    "0.5.14": (156467, ["KimiK25ForConditionalGeneration", "LlamaForCausalLMEagle3"]),
    "0.5.19": (154998, ["KimiK25ForConditionalGeneration", "LlamaForCausalLMEagle3"]),
    "0.5.23": (154998, ["KimiK25ForConditionalGeneration", "LlamaForCausalLMEagle3"]),
}


def log(version: str) -> str:
    return (LOGS / f"startup-{version}.log").read_text()


def inputs(version: str, mfs: float = 0.90, **changes: Any) -> PlanInputs:
    """The example host as the inventory describes it (weights as checkpoint size / TP)."""
    values: dict[str, Any] = {
        "version": version, "model_config": KIMI_K25, "draft_config": EAGLE3, "speculative_algorithm": "EAGLE3",
        "tp_size": 8, "mem_fraction_static": mfs, "gpu_memory_bytes": 97887 << 20,
        "weight_bytes_per_gpu": int(547e9) // 8, "host_mem_available_bytes": int(449e9), "what_if": False}
    return PlanInputs(**{**values, **changes})


@pytest.mark.parametrize("version", sorted(PINNED))
def test_every_pinned_format_gives_the_figures_of_the_start(version: str) -> None:
    start = read(log(version))
    tokens, architectures = PINNED[version]
    assert len(start.ranks) == 2  # the fixtures keep TP0 and TP7
    assert start.pre_load_free_bytes == round(93.82 * GIB)
    assert [w.architecture for w in start.loads] == architectures
    assert start.after_weights_free_bytes == round((19.79 if len(architectures) == 2 else 20.24) * GIB)
    assert start.kv_tokens == tokens == start.summary["max_total_num_tokens"]
    assert start.loads[0].elapsed_s in (244.10, 612.40)


@pytest.mark.parametrize("version", sorted(PINNED))
def test_the_calibrated_plan_reproduces_the_logged_pool_within_one_percent(version: str) -> None:
    measured = read(log(version)).as_dict()
    calibrated, differences = calibrate(inputs(version), measured, "startup.log")
    assert differences == []
    result = plan(calibrated)
    assert result["calibrated"] and result["calibration"]["source"] == "startup.log"
    assert abs(result["device_kv_tokens"] - PINNED[version][0]) <= 0.01 * PINNED[version][0], result
    estimate = plan(inputs(version))
    assert not estimate["calibrated"]
    print(f"MEASURED calibration {version}: logged {PINNED[version][0]}, calibrated {result['device_kv_tokens']}, "
          f"estimate {estimate['device_kv_tokens']} ({estimate['device_kv_tokens'] / PINNED[version][0]:.2f}x)")


def test_another_mem_fraction_follows_sglangs_formula_from_the_measured_figures() -> None:
    start = read(log("0.5.23"))
    calibrated, _differences = calibrate(inputs("0.5.23", mfs=0.88), start.as_dict(), "startup.log")
    cell = 70272 + 70272 * 1 // 61  # the target's MLA cell plus the one-layer draft's share (0.5.18+)
    reserve = 100 << 20  # 0.5.18+: the multimodal reserve of a vision model
    expected = int(start.after_weights_free_bytes - start.pre_load_free_bytes * (1 - 0.88) - reserve) // cell
    assert plan(calibrated)["device_kv_tokens"] == expected


def test_a_start_of_another_configuration_leaves_an_estimate_and_says_why() -> None:
    measured = read(log("0.5.23")).as_dict()
    other = dict(measured, loads=[dict(measured["loads"][0], architecture="DeepseekV3ForCausalLM")],
                 server_args={"tp_size": 4, "kv_cache_dtype": "fp8_e4m3"})
    kept, differences = calibrate(inputs("0.5.23"), other, "other.log")
    assert kept == inputs("0.5.23")
    assert differences == [
        "the model: the log loaded DeepseekV3ForCausalLM, the plan is for KimiK25ForConditionalGeneration",
        "the draft: the plan loads a draft before the KV pool, the log did not",
        "tp_size: the log ran 4, the plan has 8", "kv_cache_dtype: the log ran fp8_e4m3, the plan has auto"]
    _same, older = calibrate(inputs("0.5.12"), measured, "0.5.23.log")
    assert older == ["the draft: the log loaded LlamaForCausalLMEagle3 before the KV pool, the plan does not"]


def test_the_last_start_of_a_journal_counts() -> None:
    first = log("0.5.23").replace("avail mem=93.82 GB", "avail mem=90.00 GB")
    assert read(first + log("0.5.23")).pre_load_free_bytes == round(93.82 * GIB)
    assert read(log("0.5.23") + first).pre_load_free_bytes == round(90.00 * GIB)
    # A journal's own prefix before SGLang's, and a start that crashed after its weights, still count.
    journal = "\n".join(f"Dec 01 10:00:00 gpu-node-1 python[123]: {line}" for line in log("0.5.23").splitlines())
    assert read(journal).kv_tokens == 154998 and len(read(journal).ranks) == 2  # each rank its own
    crashed = "\n".join(line for line in log("0.5.23").splitlines() if "KV Cache" not in line
                        and "max_total_num_tokens" not in line)
    assert read(crashed).kv_tokens is None and read(crashed).after_weights_free_bytes == round(19.79 * GIB)


@pytest.mark.parametrize(("text", "missing"), [
    ("", "no 'Load weight begin"),
    ("[2026-03-02 10:00:10 TP0] Load weight begin. avail mem=93.82 GB\n", "no 'Load weight end"),
])
def test_a_log_without_the_weight_lines_is_refused_naming_them(text: str, missing: str) -> None:
    with pytest.raises(StartupLogError, match=missing):
        read(text)


def test_server_args_gives_the_settings_that_decide_memory() -> None:
    line = ("[2025-06-01 10:00:00] server_args=ServerArgs(model_path='/models/k', tokenizer_path='/models/k', "
            "tp_size=8, mem_fraction_static=0.85, kv_cache_dtype='auto', page_size=None, quantization=None, "
            "json_model_override_args='{}', speculative_algorithm='EAGLE3', disable_cuda_graph=False)")
    assert server_args(line) == {
        "model_path": "/models/k", "tp_size": 8, "quantization": None, "kv_cache_dtype": "auto", "page_size": None,
        "mem_fraction_static": 0.85, "speculative_algorithm": "EAGLE3", "disable_cuda_graph": False}


def test_preflight_refuses_an_unusable_log_and_a_log_of_another_configuration() -> None:
    facts = {"gpu_memory_mib": 97887, "model_config": KIMI_K25, "draft_config": EAGLE3,
             "host_mem_available_bytes": int(449e9)}
    good = preflight._calibrated(inputs("0.5.23"), {"text": log("0.5.23"), "source": "s.log"})
    assert good[0].calibration and good[1:] == ([], [])
    bad = preflight._calibrated(inputs("0.5.23"), {"text": "nothing", "source": "s.log"})
    assert bad[1] and bad[1][0].startswith("sglang_startup_log: s.log: the startup log has no 'Load weight begin")
    text = "[t] server_args=ServerArgs(tp_size=8)\n" + log("0.5.23")
    other = preflight._calibrated(replace(inputs("0.5.23"), tp_size=4), {"text": text, "source": "s.log"})
    assert not other[0].calibration and not other[2]
    assert other[1][0].startswith("sglang_startup_log: s.log is not a start of this configuration (tp_size: the log "
                                  "ran 8, the plan has 4); allowed: the startup log of a start with the same model")
    assert preflight.missing_for_plan(facts, calibrating=True) == []
    assert "sglang_model_weight_size" in preflight.missing_for_plan(facts)


# Real startup logs of other people's servers (tests/fixtures/sglang-logs/public/README.md names each
# source): file -> the pool SGLang logged. The KV bytes per token are the log's own (KV size / #tokens),
# so these check the premise of calibration on real data: SGLang's formula, fed the free memory SGLang
# measured before and after the weights (minimum across ranks), gives the pool SGLang allocated.
PUBLIC = LOGS / "public"
REAL = {
    "qwq-32b-0.4.3.post4-didier-durand-llms-in-clouds.log": 46611,  # 4 x L4, tp 4
    "kimi-k2.5-0.5.8.post1-ajith-sirra-amd-issues.log": 2454421,  # 8 x MI355X, tp 8
    "llama2-7b-eagle-unknown-sglang-docs-20250903.log": 20480,  # capped by max_total_tokens
}


def logged_cell(text: str, tokens: int) -> int:
    """Bytes per token of the target's pool, from its 'KV Cache is allocated' line."""
    line = next(line for line in text.splitlines() if "KV Cache is allocated" in line)
    sizes = [float(x) for x in re.findall(r"(?:KV|K|V) size: ([\d.]+) GB", line)]
    return round(sum(sizes) * GIB / tokens)


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_logs_the_formula_from_measured_memory_gives_the_logged_pool(name: str) -> None:
    text = (PUBLIC / name).read_text()
    start = read(text)
    args = start.server_args
    assert start.kv_tokens == REAL[name]
    tokens = device_kv_tokens(start.pre_load_free_bytes, start.weights_bytes, float(args["mem_fraction_static"]),
                              logged_cell(text, REAL[name]), gpu_reserved_bytes=0,
                              max_total_tokens=args.get("max_total_tokens"))
    print(f"MEASURED real log {name}: logged {REAL[name]}, from the measured memory {tokens} "
          f"({(tokens - REAL[name]) / REAL[name]:+.2%})")
    assert abs(tokens - REAL[name]) <= 0.01 * REAL[name]


def test_real_kimi_log_calibrates_the_planner_itself() -> None:
    """Kimi-K2.5 at TP8 on 8 x MI355X (SGLang 0.5.8.post1, no draft): the planner's own cell and formula."""
    start = read((PUBLIC / "kimi-k2.5-0.5.8.post1-ajith-sirra-amd-issues.log").read_text())
    assert len(start.ranks) == 8 and start.server_args["tp_size"] == 8
    base = inputs("0.5.9", mfs=float(start.server_args["mem_fraction_static"]), draft_config=None,
                  speculative_algorithm=None, gpu_memory_bytes=288 * 10**9, weight_bytes_per_gpu=int(595e9) // 8)
    calibrated, differences = calibrate(base, start.as_dict(), "kimi.log")
    assert differences == []
    result = plan(calibrated)
    assert result["kv_bytes_per_token"] == 70272
    assert abs(result["device_kv_tokens"] - 2454421) <= 0.01 * 2454421, result["device_kv_tokens"]


def test_a_sparse_attention_model_is_outside_the_formula_and_the_plan_says_so() -> None:
    """GLM-5 (DeepSeek sparse attention, ROCm, 0.5.9) allocated 11 % more than (free after the weights -
    free before * (1 - mem_fraction_static)) allows: its indexer path sizes its pool another way. The plan
    already warns that such models' token counts are bounds, not predictions."""
    text = (PUBLIC / "glm-5-fp8-0.5.9-ajith-sirra-amd-issues.log").read_text()
    start = read(text)
    tokens = device_kv_tokens(start.pre_load_free_bytes, start.weights_bytes, 0.908, logged_cell(text, 3199575),
                              gpu_reserved_bytes=0)
    assert start.loads[0].architecture == "GlmMoeDsaForCausalLM"
    assert 0.85 < tokens / 3199575 < 0.95


def test_the_host_s_recorded_start_calibrates_the_next_plan_of_the_same_configuration() -> None:
    config = {"version": "0.5.23", "settings": {"model_path": {"value": "/models/kimi-k2.5"}, "tp_size": {"value": 8},
                                                "mem_fraction_static": {"value": 0.9}}}
    observed = {"recorded_at": "2026-12-01T10:00:00Z", "identity": preflight.memory_identity(config),
                "startup": read(log("0.5.23")).as_dict()}
    assert observed["identity"] == {"version": "0.5.23", "model_path": "/models/kimi-k2.5", "tp_size": 8}
    calibrated, warnings = preflight._from_observed(inputs("0.5.23"), config, observed)
    assert warnings == [] and calibrated.calibration["source"] == "the start of 2026-12-01T10:00:00Z on this host"
    assert plan(calibrated)["device_kv_tokens"] == 154998
    # Another tp_size on the host: an estimate, and the plan says which setting differs.
    other = dict(observed, identity=dict(observed["identity"], tp_size=4))
    kept, warnings = preflight._from_observed(inputs("0.5.23"), config, other)
    assert not kept.calibration
    assert warnings == ["not calibrated: the start of 2026-12-01T10:00:00Z on this host ran another configuration "
                        "(tp_size: the recorded start ran 4, the plan has 8); " + preflight.ESTIMATE]
    assert preflight._from_observed(inputs("0.5.23"), config, None) == (inputs("0.5.23"), [])


# --- the real server (SGLang 0.5.23 on a CPU, tests/fixtures/sglang-engine) --------------------------------------
ENGINE = ROOT / "tests/fixtures/sglang-engine"
TINY_LLAMA = load_script(ROOT / "extensions/molecule/resources/models/make_tiny_llama.py").config(
    4096, "LlamaForCausalLM")


def engine_log() -> str:
    return (ENGINE / "startup-0.5.23-cpu.log").read_text()


def test_the_real_startup_log_gives_its_figures() -> None:
    """0.5.23's own lines: a time prefix without a rank (tp_size 1), "elapsed=", and the resolved-dict server_args."""
    start = read(engine_log())
    assert len(start.ranks) == 1 and start.kv_tokens == 4096 == start.summary["max_total_num_tokens"]
    assert [w.architecture for w in start.loads] == ["LlamaForCausalLM"] and start.loads[0].elapsed_s is not None
    assert start.weights_bytes >= 0 and start.summary["context_len"] == 4096
    assert start.server_args["max_total_tokens"] == 4096 and start.server_args["tp_size"] == 1
    assert start.server_args["model_path"] == start.server_args["model_path"].strip() != ""


def test_a_negative_zero_mem_usage_is_read() -> None:
    """A load that allocates nothing on the device prints 'mem usage=-0.00 GB' (seen on the real CPU engine)."""
    text = re.sub(r"mem usage=[\d.]+ GB\.", "mem usage=-0.00 GB.", engine_log())
    assert "mem usage=-0.00 GB." in text
    assert read(text).loads[0].usage_bytes == 0


def test_server_args_reads_the_resolved_dict_of_0_5_19_and_later() -> None:
    line = ("[2026-12-04 23:12:03] server_args={'model_path': '/models/tiny', 'tp_size': 1, 'mem_fraction_static': "
            "0.716, 'page_size': 1, 'kv_cache_dtype': 'auto', 'cuda_graph_config': {'decode': {'bs': [1, 2]}}, "
            "'watermark_key': '<redacted>', 'max_total_tokens': 4096, 'speculative_algorithm': None}")
    assert server_args(line) == {"model_path": "/models/tiny", "tp_size": 1, "mem_fraction_static": 0.716,
                                 "page_size": 1, "kv_cache_dtype": "auto", "max_total_tokens": 4096,
                                 "speculative_algorithm": None}
    # A value that is no Python literal still leaves the scalars around it readable.
    odd = line.replace("'cuda_graph_config': {'decode': {'bs': [1, 2]}}", "'loader': <object at 0x7f>")
    assert server_args(odd)["tp_size"] == 1 and server_args(odd)["max_total_tokens"] == 4096


def test_the_real_log_calibrates_the_plan_to_the_servers_own_pool() -> None:
    base = inputs("0.5.23", mfs=0.85, model_config=TINY_LLAMA, draft_config=None, speculative_algorithm=None,
                  tp_size=1, max_total_tokens=4096, weight_bytes_per_gpu=281328)
    calibrated, differences = calibrate(base, read(engine_log()).as_dict(), "engine.log")
    assert differences == []
    result = plan(calibrated)
    assert result["calibrated"] and result["device_kv_tokens"] == 4096
    assert result["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 2  # layers x K,V x KV heads x head dim x bf16


def test_the_real_log_of_another_model_is_refused_and_says_so() -> None:
    refused = preflight._calibrated(inputs("0.5.23"), {"text": engine_log(), "source": "engine.log"})
    assert not refused[0].calibration and not refused[2]
    assert refused[1] == [refused[1][0]] and "the model: the log loaded LlamaForCausalLM, the plan is for " \
        "KimiK25ForConditionalGeneration" in refused[1][0]
