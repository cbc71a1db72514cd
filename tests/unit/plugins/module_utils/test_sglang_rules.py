"""Version and hardware rules: each one fires on its side of every version boundary and not on the other."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_rules as rules
from helpers import CATALOGS

SM120: dict[str, Any] = {"compute_capability": "12.0", "gpu_count": 8,
                         "model_architecture": "KimiK25ForConditionalGeneration", "model_type": "kimi_k25"}
# The example inventory's resolved arguments (inventory/example/group_vars/all.yml).
EXAMPLE_ARGS: list[list[str]] = [
    ["--model-path", "/models/Kimi-K2.5"], ["--served-model-name", "kimi-k2.5"], ["--tp-size", "8"],
    ["--host", "0.0.0.0"], ["--port", "30000"], ["--mem-fraction-static", "0.85"], ["--kv-cache-dtype", "auto"],
    ["--enable-hierarchical-cache"], ["--hicache-ratio", "2.0"], ["--hicache-write-policy", "write_through"],
    ["--hicache-io-backend", "kernel"], ["--hicache-mem-layout", "page_first"],
    ["--speculative-algorithm", "EAGLE3"], ["--speculative-draft-model-path", "/models/Kimi-K2.5-EAGLE3"],
    ["--speculative-num-steps", "3"], ["--speculative-eagle-topk", "1"], ["--speculative-num-draft-tokens", "4"],
    ["--enable-metrics"], ["--attention-backend", "triton"], ["--context-length", "131072"],
    ["--cuda-graph-max-bs-decode", "48"], ["--trust-remote-code"],
]
EXAMPLE_ENV = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_P2P_DISABLE": "1", "NCCL_CUMEM_ENABLE": "0",
               "NCCL_DEBUG": "WARN"}


def check(version: str, *extra: list[str], env: dict[str, str] | None = None, base: bool = True,
          **hardware: Any) -> dict[str, list[str]]:
    args = ([*EXAMPLE_ARGS] if base else []) + [list(group) for group in extra]
    return rules.check(version, args, dict(env or {}), {**SM120, **hardware})


def about(messages: list[str], subject: str) -> list[str]:
    return [m for m in messages if m.startswith(subject + ":")]


@pytest.mark.parametrize("version", ["0.5.10", "0.5.12", "0.5.14", "0.5.19", "0.5.20", "0.5.23"])
def test_example_configuration_is_clean(version: str) -> None:
    assert rules.check(version, EXAMPLE_ARGS, EXAMPLE_ENV, SM120) == {"errors": [], "warnings": [], "drop_env": []}


@pytest.mark.parametrize("flag", [["--enable-flashinfer-allreduce-fusion"],
                                  ["--flashinfer-allreduce-fusion-backend", "auto"]])
def test_flashinfer_allreduce_fusion_raises_on_sm120_from_0_5_14(flag: list[str]) -> None:
    assert not about(check("0.5.13", flag)["errors"], flag[0])
    (error,) = about(check("0.5.14", flag)["errors"], flag[0])
    assert "requires SM90 or SM10X" in error
    assert "compute capability 12.0" in error
    assert "remove it" in error
    assert about(check("0.5.23", flag)["errors"], flag[0])
    assert not about(check("0.5.23", flag, compute_capability="9.0")["errors"], flag[0])   # H100
    assert not about(check("0.5.23", flag, compute_capability="10.0")["errors"], flag[0])  # B200
    assert not about(check("0.5.23", flag, compute_capability=None)["errors"], flag[0])    # unknown: no claim


def test_cuda_graph_max_bs_deprecated_then_removed() -> None:
    flag = ["--cuda-graph-max-bs", "48"]
    assert check("0.5.13", flag) == {"errors": [], "warnings": [], "drop_env": []}
    for version in ("0.5.14", "0.5.19"):
        result = check(version, flag)
        assert result["errors"] == []
        (warning,) = about(result["warnings"], "--cuda-graph-max-bs")
        assert "deprecated alias of --cuda-graph-max-bs-decode" in warning
    for version in ("0.5.20", "0.5.23"):
        (error,) = about(check(version, flag)["errors"], "--cuda-graph-max-bs")
        assert "removed in sglang 0.5.20" in error
        assert "use cuda-graph-max-bs-decode" in error


def test_spec_v2_env_is_dropped_outside_the_versions_that_read_it() -> None:
    env = {"SGLANG_ENABLE_SPEC_V2": "1"}
    for version in ("0.5.9", "0.5.12", "0.5.13"):   # read by environ.py / speculative_hook.py
        assert check(version, env=env)["drop_env"] == []
    for version in ("0.5.14", "0.5.20", "0.5.21", "0.5.23"):
        result = check(version, env=env)
        assert result["drop_env"] == ["SGLANG_ENABLE_SPEC_V2"]
        (warning,) = result["warnings"]
        assert warning.startswith("sglang_env['SGLANG_ENABLE_SPEC_V2']: does nothing")
        assert result["errors"] == []


@pytest.mark.parametrize("flag", list(rules.ATTENTION_BACKEND_FLAGS))
@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_trtllm_mla_is_refused_on_sm120(flag: str, version: str) -> None:
    (error,) = check(version, [flag, "trtllm_mla"], base=False)["errors"]
    assert error.startswith(f"{flag}: trtllm_mla: the trtllm_mla kernels fail on compute capability 12.0")
    assert "use triton" in error
    assert not check(version, [flag, "trtllm_mla"], base=False, compute_capability="10.0")["errors"]
    assert not check(version, [flag, "flashinfer"], base=False)["errors"]


def test_hicache_with_disabled_radix_cache() -> None:
    (error,) = check("0.5.23", ["--disable-radix-cache"])["errors"]
    assert error.startswith("--disable-radix-cache: and the hierarchical cache are mutually exclusive")
    without_hicache = [g for g in EXAMPLE_ARGS if g[0] != "--enable-hierarchical-cache"]
    assert not rules.check("0.5.23", [*without_hicache, ["--disable-radix-cache"]], {}, SM120)["errors"]
    assert about(check("0.5.9", ["--disable-radix-cache"])["errors"], "--disable-radix-cache")


@pytest.mark.parametrize("flag", [["--speculative-eagle-topk", "1"], ["--speculative-num-draft-tokens", "4"]])
def test_draft_tree_settings_need_the_step_count(flag: list[str]) -> None:
    base = [["--speculative-algorithm", "EAGLE3"], flag]
    llama = {"compute_capability": "12.0", "gpu_count": 8, "model_architecture": "LlamaForCausalLM"}
    for version in ("0.5.9", "0.5.23"):
        (error,) = rules.check(version, base, {}, llama)["errors"]
        assert error.startswith(f"{flag[0]}: is given without --speculative-num-steps")
        assert not rules.check(version, [*base, ["--speculative-num-steps", "3"]], {}, llama)["errors"]
    assert not rules.check("0.5.23", [*base, ["--speculative-adaptive"]], {}, llama)["errors"]
    assert not rules.check("0.5.23", [flag], {}, llama)["errors"]  # no EAGLE: SGLang never reads them


def test_eagle3_for_kimi_k25_needs_0_5_10() -> None:
    (error,) = check("0.5.9")["errors"]
    assert error.startswith("--speculative-algorithm: EAGLE3 for Kimi-K2.5 (KimiK25ForConditionalGeneration)")
    assert "0.5.10" in error
    assert not check("0.5.10")["errors"]
    assert check("0.5.9", model_architecture="", model_type="kimi_k25")["errors"]
    assert not check("0.5.9", model_architecture="DeepseekV3ForCausalLM", model_type="kimi_k2")["errors"]


def test_enable_hicache_alias_only_from_0_5_23() -> None:
    (error,) = check("0.5.22", ["--enable-hicache"], base=False)["errors"]
    assert "use --enable-hierarchical-cache" in error
    assert check("0.5.9", ["--enable-hicache"], base=False)["errors"]
    assert not check("0.5.23", ["--enable-hicache"], base=False)["errors"]


def test_page_first_direct_with_kernel_io_is_switched() -> None:
    args = [["--enable-hierarchical-cache"], ["--hicache-mem-layout", "page_first_direct"]]
    for io in ([["--hicache-io-backend", "kernel"]], []):   # kernel is also the default
        (warning,) = rules.check("0.5.23", args + io, {}, SM120)["warnings"]
        assert "switches the IO backend to direct" in warning
    assert not rules.check("0.5.23", [*args, ["--hicache-io-backend", "direct"]], {}, SM120)["warnings"]
    assert not rules.check("0.5.23", args[1:], {}, SM120)["warnings"]  # no hicache, no switch


def test_tp_size_against_the_gpus_of_the_host() -> None:
    (error,) = check("0.5.23", gpu_count=4)["errors"]
    assert error.startswith("--tp-size: 8 ranks need 8 GPUs, but the host reports 4")
    assert not check("0.5.23", ["--nnodes", "2"], gpu_count=4)["errors"]


def test_messages_name_the_source_variable_when_known() -> None:
    args = [*EXAMPLE_ARGS, ["--cuda-graph-max-bs", "48"]]
    sources = {"--cuda-graph-max-bs": "sglang_extra_args['cuda-graph-max-bs']"}
    (error,) = rules.check("0.5.23", args, {}, SM120, sources=sources)["errors"]
    assert error.startswith("sglang_extra_args['cuda-graph-max-bs'] (--cuda-graph-max-bs): ")


def test_every_rule_is_well_formed() -> None:
    known: set[str] = set()
    for path in CATALOGS.glob("sglang-*.json"):
        known |= {flag for option in json.loads(path.read_text())["options"] for flag in option["flags"]}
    for rule in rules.RULES:
        assert rule.severity in ("error", "warning")
        assert rule.subject in known or rule.subject.isupper(), rule.subject  # a real flag, or an env name
        assert ";" in rule.message, f"{rule.subject}: the message must say why and what to do"
        for bound in (rule.since, rule.until):
            assert bound is None or rules.version_tuple(bound) >= (0, 5, 9)


# ---- peer-to-peer and InfiniBand: settings against each other and against the host ---------------

ALL_OK = {f"{a}-{b}": "OK" for a in range(8) for b in range(8) if a != b}
CROSS_SOCKET_CNS = {**ALL_OK, **{f"{a}-{b}": "CNS" for a in range(8) for b in range(8) if (a < 4) != (b < 4)}}
IPC = {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}


def test_pcie_ipc_allreduce_with_p2p_disabled_is_refused_whatever_the_host() -> None:
    result = check("0.5.23", env={**EXAMPLE_ENV, **IPC})
    assert len(result["errors"]) == 1, result
    assert result["errors"][0].startswith("sglang_env['SGLANG_ENABLE_PCIE_IPC_ALLREDUCE']")
    assert "contradict" in result["errors"][0] and "drop NCCL_P2P_DISABLE" in result["errors"][0]


def test_pcie_ipc_allreduce_needs_the_hosts_p2p() -> None:
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", **IPC}
    assert check("0.5.23", env=env, p2p_read=ALL_OK, iommu="passthrough")["errors"] == []
    errors = check("0.5.23", env=env, p2p_read=CROSS_SOCKET_CNS, iommu="off")["errors"]
    assert len(errors) == 1 and "GPU0-GPU4 CNS (Chipset not supported)" in errors[0]


def test_pcie_ipc_allreduce_before_0_5_21_does_nothing_and_is_dropped() -> None:
    result = check("0.5.19", env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID", **IPC})
    assert result["drop_env"] == ["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] and "came with 0.5.21" in result["warnings"][0]


@pytest.mark.parametrize(("env", "iommu", "warned"), [
    ({}, "translated", "boot with iommu=pt"),             # P2P on, behind a translating IOMMU: the known hang
    ({}, "passthrough", None),                            # P2P on, no translation: fine
    ({"NCCL_P2P_DISABLE": "1"}, "passthrough", "drop it"),  # P2P works here, but NCCL is kept off it
    ({"NCCL_P2P_DISABLE": "1"}, "translated", None),      # the workaround, where it is one
])
def test_p2p_setting_against_the_hosts_iommu(env: dict[str, str], iommu: str, warned: str | None) -> None:
    warnings = check("0.5.23", env=env, p2p_read=ALL_OK, iommu=iommu)["warnings"]
    assert [w for w in warnings if warned and warned in w] if warned else not warnings, warnings


def test_an_unread_host_gets_no_p2p_verdict() -> None:
    assert check("0.5.23", env={}, iommu="translated")["warnings"] == []  # no P2P matrix read


def test_ib_disabled_on_a_multinode_server_is_a_warning() -> None:
    result = check("0.5.23", ["--nnodes", "2"], env={"NCCL_IB_DISABLE": "1"})
    assert any("over TCP sockets" in w for w in result["warnings"]), result
    assert check("0.5.23", env={"NCCL_IB_DISABLE": "1"})["warnings"] == []
