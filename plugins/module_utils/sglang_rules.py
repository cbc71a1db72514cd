# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Version and hardware rules: flag combinations the flag catalog accepts but SGLang refuses or ignores.

The catalog says which flags a version knows. These rules say what those flags do on this version
and this hardware: fatal at start (after the 10-minute load), silently switched, or dead. They are
one table, ``RULES``; ``check()`` applies it to the resolved arguments and environment of a host.
Every boundary was read in the real sglang wheels (paths inside the ``sglang`` package):

- flashinfer all-reduce fusion raises on anything but SM90/SM10x from 0.5.14
  (srt/layers/flashinfer_comm_fusion.py _resolve_backend); 0.5.13 only auto-enables it on SM90/SM10x.
- ``--cuda-graph-max-bs``: plain flag to 0.5.13, DeprecatedAliasStoreAction of
  ``--cuda-graph-max-bs-decode`` 0.5.14-0.5.19, gone from 0.5.20 (srt/server_args.py).
- ``SGLANG_ENABLE_SPEC_V2``: read up to 0.5.13 (srt/environ.py; 0.5.13 arg_groups/speculative_hook.py
  uses it to pick the non-overlap path); 0.5.14-0.5.20 only warn "has been removed"; gone in 0.5.21.
- ``trtllm_mla`` on SM12x: SGLang's own check admits SM12x ("only supported on Blackwell GPUs
  (SM100/SM12x)", srt/server_args.py / arg_groups/overrides.py); the FlashInfer trtllm-gen MLA
  kernel then fails on sm120 (reference notes; the kernel is not in the sglang wheel).
- hicache with ``--disable-radix-cache``: ValueError in every version (server_args.py,
  arg_groups/kv_cache_hook.py).
- ``--speculative-eagle-topk`` / ``--speculative-num-draft-tokens`` without ``--speculative-num-steps``:
  an assert in every version (server_args.py, arg_groups/speculative_hook.py _handle_eagle_family).
- EAGLE3 for Kimi-K2.5: srt/models/kimi_k25.py gains set_eagle3_layers_to_capture and
  get_embed_and_head in 0.5.10.
- ``--enable-hicache``: an alias of ``--enable-hierarchical-cache`` from 0.5.23
  (arg_groups/fields/memory.py); absent in 0.5.22 and before.
- ``page_first_direct`` layout with the ``kernel`` IO backend (the default): SGLang switches the
  backend to direct with a warning (server_args.py; arg_groups/hicache_hook.py).
- ``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE``: FlashInfer's PCIe-IPC all-reduce, CUDA IPC peer writes
  through the root complex between the GPUs (0.5.23 srt/distributed/device_communicators/
  pcie_ipc_ar.py, srt/environ.py; absent from 0.5.19): it needs working GPU peer-to-peer, which
  ``NCCL_P2P_DISABLE=1`` declares broken. Known RTX PRO 6000 P2P hangs come from a translating
  IOMMU or ACS (NVIDIA/nccl issues 1999, 2079); the host's own P2P matrix (nvidia-smi topo -p2p r)
  and IOMMU mode decide which of the two settings fits (sglang_gpu_topology).
- ``NCCL_IB_DISABLE`` on a multi-node server: NCCL then joins the nodes over TCP sockets.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import sglang_gpu_topology as topology
from .sglang_capacity import DRAFT_KV_ALGORITHMS
from .sglang_types import version_tuple

KIMI_K25 = ("KimiK25ForConditionalGeneration", "kimi_k25")
ATTENTION_BACKEND_FLAGS = ("--attention-backend", "--decode-attention-backend", "--prefill-attention-backend",
                           "--speculative-draft-attention-backend")


@dataclass(frozen=True)
class Context:
    """One host's facts, as the rules see them."""

    version: str
    flags: dict[str, list[str]]     # flag -> values of its last occurrence ([] for a bare flag)
    env: dict[str, str]
    compute_capability: str         # "12.0"; "" when unknown
    gpu_count: int | None
    architecture: str
    model_type: str
    p2p_read: dict[str, str] | None = None  # nvidia-smi topo -p2p r of the host: {"0-1": "OK", ...}
    iommu: str = ""                         # off | passthrough | translated | mixed | unknown | ""

    def env_on(self, name: str) -> bool:
        return str(self.env.get(name, "")).strip().lower() in ("1", "true", "yes", "on")

    @property
    def p2p_problems(self) -> list[str]:
        """Pairs of the server's local GPUs that the host reports without P2P; [] when all are OK or
        the host was not read."""
        try:
            local = int(self.value("--tp-size") or 1) // max(int(self.value("--nnodes") or 1), 1)
        except ValueError:
            local = None
        return topology.p2p_problems(self.p2p_read or {}, local)

    @property
    def p2p_ok(self) -> bool:
        return bool(self.p2p_read) and not self.p2p_problems

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def value(self, flag: str) -> str | None:
        values = self.flags.get(flag)
        return values[0] if values else None

    @property
    def cc_major(self) -> int | None:
        match = re.match(r"^\s*(\d+)", self.compute_capability)
        return int(match.group(1)) if match else None

    @property
    def algorithm(self) -> str:
        return (self.value("--speculative-algorithm") or "").upper()

    @property
    def hicache(self) -> bool:
        return self.has("--enable-hierarchical-cache") or self.has("--enable-hicache")


def _sm12x(ctx: Context) -> bool:
    return ctx.cc_major == 12


def _not_sm90_or_sm10x(ctx: Context) -> bool:
    return ctx.cc_major is not None and ctx.cc_major not in (9, 10)


def _tp_and_nodes(ctx: Context) -> tuple[int, int] | None:
    try:
        return int(ctx.value("--tp-size") or 1), int(ctx.value("--nnodes") or 1)
    except ValueError:
        return None


def _tp_exceeds_gpus(ctx: Context) -> bool:
    sizes = _tp_and_nodes(ctx)
    return sizes is not None and ctx.gpu_count is not None and sizes[0] > ctx.gpu_count * sizes[1]


def _tp_leaves_gpus_unusable(ctx: Context) -> bool:
    sizes = _tp_and_nodes(ctx)
    if sizes is None:
        return False
    per_host = sizes[0] // max(sizes[1], 1)
    return (ctx.gpu_count is not None and not _tp_exceeds_gpus(ctx) and per_host > 0
            and ctx.gpu_count % per_host != 0)


def _trtllm_mla_on_sm12x(flag: str) -> Callable[[Context], bool]:
    return lambda ctx: ctx.value(flag) == "trtllm_mla" and _sm12x(ctx)


def _without_steps(flag: str) -> Callable[[Context], bool]:
    return lambda ctx: (ctx.has(flag) and not ctx.has("--speculative-num-steps")
                        and ctx.algorithm in DRAFT_KV_ALGORITHMS and not ctx.has("--speculative-adaptive"))


@dataclass(frozen=True)
class Rule:
    """One rule: applies to [since, until] (inclusive, None = open) when ``when`` holds.

    ``subject`` is the flag or environment variable the message is about; ``message`` is formatted
    with version, cc (compute capability), value (the subject flag's value) and architecture.
    """

    subject: str
    severity: str                    # "error" | "warning"
    since: str | None
    until: str | None
    when: Callable[[Context], bool]
    message: str
    drop_env: bool = False           # leave the subject out of the environment file


_FUSION = ("sglang {version} raises 'FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.' on compute "
           "capability {cc} while it starts, after the model load (layers/flashinfer_comm_fusion.py); remove it")
_TRTLLM_MLA = ("{value}: the trtllm_mla kernels fail on compute capability {cc} (sm120: 'Unsupported "
               "architecture') although SGLang's own check lets SM12x through; use triton (the sm120 default for "
               "MLA) or flashinfer")
_NO_STEPS = ("is given without --speculative-num-steps; sglang asserts that the draft tree settings are unset when "
             "the step count is, and fails at start; set sglang_speculative_num_steps as well, or leave steps, "
             "topk and draft tokens all unset for SGLang's automatic choice")

_IPC = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"
_P2P_OFF = "NCCL_P2P_DISABLE"
_IPC_WITHOUT_P2P = ("is on together with NCCL_P2P_DISABLE=1, and the two contradict each other: the PCIe-IPC "
                    "all-reduce writes GPU to GPU through the root complex (peer-to-peer, "
                    "srt/distributed/device_communicators/pcie_ipc_ar.py), which NCCL_P2P_DISABLE=1 says this host "
                    "cannot do. If P2P works here (nvidia-smi topo -p2p r OK, IOMMU off or iommu=pt), drop "
                    "NCCL_P2P_DISABLE; if it hangs, drop {subject}. playbooks/probe.yml runs an all-reduce with the "
                    "unit's settings")
_IPC_HOST_NO_P2P = ("is on and needs GPU peer-to-peer, but this host reports none for {p2p} (nvidia-smi topo -p2p "
                    "r): the all-reduce would fail or hang after the load; unset it (NCCL then goes through host "
                    "memory)")
_IOMMU_HANG = ("is not set, so NCCL uses PCIe peer-to-peer, and the IOMMU translates the GPUs' DMA here (iommu "
               "{iommu}): PCIe P2P between RTX PRO 6000 cards hangs behind a translating IOMMU or ACS (NVIDIA/nccl "
               "issues 1999, 2079); boot with iommu=pt, or set NCCL_P2P_DISABLE=1 (the deploy's probe runs an "
               "all-reduce before any restart)")
_P2P_WORKS = ("is on and sends NCCL through host memory, but this host reports P2P for every GPU pair (nvidia-smi topo "
              "-p2p r) with the IOMMU {iommu}; drop it for faster all-reduces (the probe's all-reduce checks that "
              "it does not hang)")

RULES: tuple[Rule, ...] = (
    Rule("--enable-flashinfer-allreduce-fusion", "error", "0.5.14", None,
         lambda c: c.has("--enable-flashinfer-allreduce-fusion") and _not_sm90_or_sm10x(c), _FUSION),
    Rule("--flashinfer-allreduce-fusion-backend", "error", "0.5.14", None,
         lambda c: c.has("--flashinfer-allreduce-fusion-backend") and _not_sm90_or_sm10x(c), _FUSION),
    Rule("--cuda-graph-max-bs", "warning", "0.5.14", "0.5.19", lambda c: c.has("--cuda-graph-max-bs"),
         "is a deprecated alias of --cuda-graph-max-bs-decode in sglang {version} and is gone from 0.5.20; "
         "use cuda-graph-max-bs-decode"),
    Rule("--cuda-graph-max-bs", "error", "0.5.20", None, lambda c: c.has("--cuda-graph-max-bs"),
         "was removed in sglang 0.5.20; {version} exits at once with 'ambiguous option' (it is a prefix of "
         "--cuda-graph-max-bs-decode and --cuda-graph-max-bs-prefill); use cuda-graph-max-bs-decode"),
    Rule("SGLANG_ENABLE_SPEC_V2", "warning", "0.5.14", None, lambda c: "SGLANG_ENABLE_SPEC_V2" in c.env,
         "does nothing in sglang {version}: it was removed in 0.5.14 (0.5.14-0.5.20 only log that it 'has been "
         "removed', 0.5.21+ ignore it), so it is left out of the environment file; use --disable-overlap-schedule "
         "for the non-overlap path", drop_env=True),
    *(Rule(flag, "error", None, None, _trtllm_mla_on_sm12x(flag), _TRTLLM_MLA) for flag in ATTENTION_BACKEND_FLAGS),
    Rule("--disable-radix-cache", "error", None, None, lambda c: c.has("--disable-radix-cache") and c.hicache,
         "and the hierarchical cache are mutually exclusive (HiCache is a tier of the radix prefix cache); "
         "sglang {version} raises ValueError at start; drop one of them"),
    Rule("--speculative-eagle-topk", "error", None, None, _without_steps("--speculative-eagle-topk"), _NO_STEPS),
    Rule("--speculative-num-draft-tokens", "error", None, None, _without_steps("--speculative-num-draft-tokens"),
         _NO_STEPS),
    Rule("--speculative-algorithm", "error", None, "0.5.9",
         lambda c: c.algorithm == "EAGLE3" and (c.architecture in KIMI_K25 or c.model_type in KIMI_K25),
         "EAGLE3 for Kimi-K2.5 ({architecture}) needs sglang >= 0.5.10: before it the model has no EAGLE-3 "
         "hooks (models/kimi_k25.py set_eagle3_layers_to_capture); set sglang_version to 0.5.10 or later"),
    Rule("--enable-hicache", "error", None, "0.5.22", lambda c: c.has("--enable-hicache"),
         "is an alias only sglang 0.5.23 and later know; {version} exits with 'unrecognized arguments'; use "
         "--enable-hierarchical-cache (sglang_hicache_enabled: true)"),
    Rule("--hicache-mem-layout", "warning", None, None,
         lambda c: c.hicache and c.value("--hicache-mem-layout") == "page_first_direct"
         and c.value("--hicache-io-backend") in (None, "kernel"),
         "page_first_direct with the kernel IO backend (kernel is the default): sglang switches the IO backend to "
         "direct at start ('Kernel io backend does not support page first direct layout'); set "
         "hicache_io_backend: direct so the unit says what runs"),
    Rule(_IPC, "error", "0.5.21", None, lambda c: c.env_on(_IPC) and c.env_on(_P2P_OFF), _IPC_WITHOUT_P2P),
    Rule(_IPC, "error", "0.5.21", None, lambda c: c.env_on(_IPC) and not c.env_on(_P2P_OFF) and bool(c.p2p_problems),
         _IPC_HOST_NO_P2P),
    Rule(_IPC, "warning", None, "0.5.20", lambda c: c.env_on(_IPC),
         "does nothing in sglang {version}, which has no PCIe-IPC all-reduce (it came with 0.5.21); it is left out "
         "of the environment file", drop_env=True),
    Rule(_P2P_OFF, "warning", None, None,
         lambda c: not c.env_on(_P2P_OFF) and c.p2p_ok and c.iommu in ("translated", "mixed"), _IOMMU_HANG),
    Rule(_P2P_OFF, "warning", None, None,
         lambda c: c.env_on(_P2P_OFF) and not c.env_on(_IPC) and c.p2p_ok and c.iommu in ("off", "passthrough"),
         _P2P_WORKS),
    Rule("NCCL_IB_DISABLE", "warning", None, None,
         lambda c: c.env_on("NCCL_IB_DISABLE") and int(c.value("--nnodes") or 1) > 1,
         "is on for a multi-node server: NCCL joins the nodes over TCP sockets instead of InfiniBand/RoCE; unset it "
         "where the nodes have an RDMA network (the unit allows /dev/infiniband/uverbs* for multi-node servers)"),
    Rule("--tp-size", "error", None, None, _tp_exceeds_gpus,
         "{value} ranks need {value} GPUs, but the host reports {gpus} (x --nnodes); lower sglang_tp_size or use "
         "a host with more GPUs"),
    Rule("--tp-size", "error", None, None, _tp_leaves_gpus_unusable,
         "{value} ranks per server do not divide the host's {gpus} GPUs, so some GPUs can never be used; "
         "allowed: a divisor of {gpus} (per host, with --nnodes)"),
)


def _in_range(version: tuple[int, int, int], since: str | None, until: str | None) -> bool:
    return (since is None or version >= version_tuple(since)) and (until is None or version <= version_tuple(until))


def check(version: str, args: list[list[Any]], env: dict[str, Any], hardware: dict[str, Any],
          sources: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Apply RULES to one host.

    args: ``[[flag, *values], ...]`` as ``sglang_config.resolve()["args"]``; env: the environment;
    hardware: ``compute_capability`` ("12.0"), ``gpu_count``, ``model_architecture`` (and optionally
    ``model_type``). ``sources`` may name the variable that set each flag, for the messages.
    Returns errors, warnings, and drop_env (environment names to leave out of the unit).
    """
    flags: dict[str, list[str]] = {}
    for group in args or []:
        if group:
            flags[str(group[0])] = [str(word) for word in group[1:]]
    try:
        gpus: int | None = int(hardware["gpu_count"]) if hardware.get("gpu_count") is not None else None
    except (TypeError, ValueError):
        gpus = None
    ctx = Context(version=str(version), flags=flags, env={str(k): str(v) for k, v in (env or {}).items()},
                  compute_capability=str(hardware.get("compute_capability") or ""), gpu_count=gpus,
                  architecture=str(hardware.get("model_architecture") or ""),
                  model_type=str(hardware.get("model_type") or ""),
                  p2p_read=dict(hardware.get("p2p_read") or {}), iommu=str(hardware.get("iommu") or ""))
    current = version_tuple(ctx.version)
    result: dict[str, list[str]] = {"errors": [], "warnings": [], "drop_env": []}
    for rule in RULES:
        if not _in_range(current, rule.since, rule.until) or not rule.when(ctx):
            continue
        text = rule.message.format(version=ctx.version, cc=ctx.compute_capability or "?",
                                   value=ctx.value(rule.subject) or "", architecture=ctx.architecture or "?",
                                   gpus=gpus, subject=rule.subject, iommu=ctx.iommu or "?",
                                   p2p=", ".join(ctx.p2p_problems) or "-")
        where = (sources or {}).get(rule.subject)
        subject = (f"{where} ({rule.subject})" if where else rule.subject) if rule.subject.startswith("-") \
            else f"sglang_env[{rule.subject!r}]"
        result["errors" if rule.severity == "error" else "warnings"].append(f"{subject}: {text}")
        if rule.drop_env and rule.subject not in result["drop_env"]:
            result["drop_env"].append(rule.subject)
    return result
