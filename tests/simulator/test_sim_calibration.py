"""The simulator's start tells the truth the way SGLang's does: weight loads logged in the pinned format,
the draft before the KV pool, and a pool that the planner, calibrated from that log, reproduces."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.sglang.deploy.plugins.module_utils.sglang_plan import PlanInputs, calibrate, plan
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_startup import read
from model_configs import EAGLE3, KIMI_K25
from sim_helpers import VERSION, LaunchFn, free_port, server_args, write_model

# Weights per GPU that are not checkpoint size / TP (547 GB / 8 = 63.7 GiB): with 71.71 GiB the
# simulator allocates what the real host did at mem_fraction_static 0.85, 116,171 tokens (within 1 %).
TRUE_WEIGHT_GIB = "71.71"


def example(mfs: float) -> PlanInputs:
    return PlanInputs(version=VERSION, model_config=KIMI_K25, draft_config=EAGLE3, speculative_algorithm="EAGLE3",
                      tp_size=8, mem_fraction_static=mfs, gpu_memory_bytes=int(95.6 * (1 << 30)),
                      weight_bytes_per_gpu=int(547e9) // 8, what_if=False)


def test_a_simulated_start_calibrates_the_plan_of_another_mem_fraction(launch: LaunchFn, tmp_path: Path) -> None:
    target = write_model(tmp_path / "kimi-k2.5", KIMI_K25)
    draft = write_model(tmp_path / "kimi-k2.5-eagle3", EAGLE3, shards=1)
    starts = {}
    for mfs in ("0.85", "0.88"):
        server = launch(server_args(target, free_port(), "--mem-fraction-static", mfs, "--speculative-algorithm",
                                    "EAGLE3", "--speculative-draft-model-path", str(draft)),
                        SGLANG_SIM_WEIGHT_GIB_PER_GPU=TRUE_WEIGHT_GIB)
        server.wait_ready()
        starts[mfs] = read(server.wait_log("The server is fired up and ready to roll!"))
        server.kill()
    first = starts["0.85"]
    assert [load.architecture for load in first.loads] == ["KimiK25ForConditionalGeneration", "LlamaForCausalLMEagle3"]
    assert len(first.ranks) == 8 and abs(first.kv_tokens - 116171) <= 0.01 * 116171, first.as_dict()
    estimate = plan(example(0.88))["device_kv_tokens"]
    calibrated, differences = calibrate(example(0.88), first.as_dict(), "the 0.85 start")
    assert differences == []
    predicted = plan(calibrated)["device_kv_tokens"]
    logged = starts["0.88"].kv_tokens
    print(f"MEASURED simulator at 0.88: logged {logged}, calibrated from the 0.85 start {predicted}, "
          f"estimate {estimate} ({estimate / logged:.2f}x)")
    assert abs(predicted - logged) <= 0.01 * logged
    assert estimate > 1.2 * logged  # the estimate from checkpoint size / TP is far off
