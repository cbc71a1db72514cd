# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The settings table: every SGLang setting the deploy names, declared once.

One row of ``SETTINGS`` says everything the package knows about a setting: the SGLang flag, the role
variable that sets it (and the short name ``-e`` accepts), its type and range, the section it
belongs to, and the capacity-plan input it feeds. ``sglang_config.resolve`` walks the table in order
(the order of ExecStart), the plan reads the inputs the rows name, and every refusal names the row's
variable. ``FACTS`` does the same for what is read on the host (or pinned in the inventory).

Adding a plain setting: one row here, plus the variable's default and argument spec in role
``sglang`` (docs/adding-a-setting.md).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .sglang_capacity import SPECULATIVE_ALGORITHMS
from .sglang_types import to_bool, to_float, to_human_int, to_int

MIB = 1 << 20


@dataclass(frozen=True)
class Kind:
    """How a value is typed and range-checked, and what a refusal says is allowed."""

    convert: Callable[[Any], Any]
    allowed: str
    valid: Callable[[Any], bool] | None = None


def _text(value: Any) -> str:
    return str(value)


_HOST_NAME_RE = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                           r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


def bind_address(value: Any) -> str:
    """An IPv4 or IPv6 address, or a host name (RFC 1123 labels); what uvicorn can bind."""
    text = str(value)
    try:
        ipaddress.ip_address(text)
        return text
    except ValueError:
        pass
    if not _HOST_NAME_RE.match(text) or re.match(r"^[0-9.]+$", text):
        raise ValueError(f"{value!r} is not an address to bind")
    return text


def _choice(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        if str(value) not in choices:
            raise ValueError(f"{value!r} is unknown")
        return str(value)
    return convert


TEXT = Kind(_text, "a string")
SWITCH = Kind(to_bool, "true or false")
COUNT = Kind(to_int, "an integer >= 1", lambda x: x >= 1)
PORT = Kind(to_int, "an integer from 1 to 65535", lambda x: 1 <= x <= 65535)
THRESHOLD = Kind(to_float, "a number above 0 and at most 1 (1.0, SGLang's default, accepts a draft token only as the "
                 "target model would sample it)", lambda x: 0.0 < x <= 1.0)


@dataclass(frozen=True)
class Setting:
    """One SGLang setting.

    ``var`` is the role variable (None: only ``sglang_extra_args`` sets it, and the row exists because
    the plan reads it). ``needs`` is the variable that switches the setting's section on (a bool, or a
    value that must be set). ``emit``: ``value`` writes ``--flag value``; ``switch`` writes the bare
    flag when true; ``nonzero`` leaves a 0 out; ``derived`` values are computed by the resolver from
    other inputs (the multi-node group, the secrets file) and their variable is what messages name.
    """

    flag: str
    var: str | None = None
    kind: Kind = TEXT
    alias: str | None = None
    plan: str | None = None
    needs: str | None = None
    required: str | None = None     # what is allowed, when the setting must be given
    default: Any = None
    emit: str = "value"
    # Changeable on a running server (SGLang 0.5.23 POST /set_internal_state,
    # srt/managers/scheduler_components/internal_state.py): SGLang's own default, which a removed flag returns to.
    live_default: Any = None

    @property
    def dest(self) -> str:
        """SGLang's argparse dest, which keys the resolved value."""
        return self.flag[2:].replace("-", "_")


_HICACHE = "sglang_hicache_enabled"
_SPECULATIVE = "sglang_speculative_algorithm"

SETTINGS: tuple[Setting, ...] = (
    Setting("--model-path", "sglang_model_path", required="the model directory on the host"),
    Setting("--served-model-name", "sglang_served_model_name"),
    Setting("--tp-size", "sglang_tp_size", Kind(to_int, "an integer >= 1 (GPUs per server)", lambda x: x >= 1),
            plan="tp_size", default=1),
    Setting("--host", "sglang_host", Kind(bind_address, "an IPv4 or IPv6 address, or a host name, to bind"),
            required="an IP address or host name to bind"),
    Setting("--port", "sglang_port", PORT, required="an integer from 1 to 65535"),
    Setting("--mem-fraction-static", "sglang_mem_fraction_static",
            Kind(to_float, "a number between 0 and 1, exclusive", lambda x: 0.0 < x < 1.0), plan="mem_fraction_static"),
    Setting("--kv-cache-dtype", "sglang_kv_cache_dtype", plan="kv_cache_dtype"),
    Setting("--nnodes", "sglang_multinode_group", plan="nnodes", emit="derived"),
    Setting("--node-rank", "sglang_multinode_group", emit="derived"),
    Setting("--dist-init-addr", "sglang_dist_init_port", emit="derived"),
    Setting("--enable-hierarchical-cache", _HICACHE, SWITCH, plan="hicache_enabled", default=False, emit="switch"),
    Setting("--hicache-ratio", "sglang_hicache_ratio",
            Kind(to_float, "a number above 1.0 and at most 1000 (host pool = ratio x GPU KV pool; a pool no "
                 "bigger than the GPU pool only duplicates it)", lambda x: 1.0 < x <= 1000.0),
            alias="hicache_ratio", plan="hicache_ratio", needs=_HICACHE),
    Setting("--hicache-size", "sglang_hicache_size",
            Kind(to_int, "a whole number of GB per TP rank, 0 to 1048576 (0 = use the ratio)",
                 lambda x: 0 <= x <= 1 << 20),
            alias="hicache_size", plan="hicache_size_gb", needs=_HICACHE, emit="nonzero"),
    Setting("--hicache-write-policy", "sglang_hicache_write_policy", alias="hicache_write_policy", needs=_HICACHE),
    Setting("--hicache-io-backend", "sglang_hicache_io_backend", alias="hicache_io_backend", needs=_HICACHE),
    Setting("--hicache-mem-layout", "sglang_hicache_mem_layout", alias="hicache_mem_layout", needs=_HICACHE),
    Setting("--hicache-storage-backend", "sglang_hicache_storage_backend", alias="hicache_storage_backend",
            needs=_HICACHE),
    Setting("--speculative-algorithm", _SPECULATIVE,
            Kind(_choice(SPECULATIVE_ALGORITHMS), ", ".join(SPECULATIVE_ALGORITHMS)), plan="speculative_algorithm"),
    Setting("--speculative-draft-model-path", "sglang_speculative_draft_model_path", needs=_SPECULATIVE),
    Setting("--speculative-num-steps", "sglang_speculative_num_steps", COUNT, needs=_SPECULATIVE),
    Setting("--speculative-eagle-topk", "sglang_speculative_eagle_topk", COUNT, needs=_SPECULATIVE),
    Setting("--speculative-num-draft-tokens", "sglang_speculative_num_draft_tokens", COUNT, needs=_SPECULATIVE),
    # Live: a change of these alone is applied through the running server's API, without a restart.
    Setting("--speculative-accept-threshold-single", "sglang_speculative_accept_threshold_single", THRESHOLD,
            live_default=1.0),
    Setting("--speculative-accept-threshold-acc", "sglang_speculative_accept_threshold_acc", THRESHOLD,
            live_default=1.0),
    Setting("--config", "sglang_api_key", emit="derived"),
    Setting("--enable-metrics", "sglang_enable_metrics", SWITCH, default=True, emit="switch"),
    # Set only through sglang_extra_args; rows because the capacity plan reads them.
    Setting("--hicache-host-memory-mode", plan="hicache_host_memory_mode"),
    Setting("--hicache-host-memory-fraction", kind=Kind(to_float, "a number"), plan="hicache_host_memory_fraction"),
    Setting("--page-size", kind=Kind(to_int, "an integer"), plan="page_size"),
    Setting("--max-running-requests", kind=Kind(to_int, "an integer"), plan="max_running_requests"),
    Setting("--max-total-tokens", kind=Kind(to_human_int, "an integer"), plan="max_total_tokens"),
)

# The speculative algorithms that cannot run without a draft model path (NEXTN uses the model's own
# MTP layers; STANDALONE and NGRAM are refused by SGLang itself without what they need).
NEEDS_DRAFT = ("EAGLE", "EAGLE3")
# The short -e names of the table (-e hicache_ratio=2.0), and the variable each one stands for.
ALIASES = {s.alias: s.var for s in SETTINGS if s.alias and s.var}


# The flags a running server takes through POST /set_internal_state: flag -> (its key there, SGLang's default).
LIVE = {s.flag: (s.dest, s.live_default) for s in SETTINGS if s.live_default is not None}


def variables() -> list[str]:
    """Every role variable and short name the table reads, for the role to look up."""
    names = [name for s in SETTINGS if s.emit != "derived" for name in (s.var, s.alias) if name]
    return list(dict.fromkeys(names))


def by_dest() -> dict[str, Setting]:
    return {s.dest: s for s in SETTINGS}


@dataclass(frozen=True)
class Fact:
    """Something the plan or the rules need to know about the host: read there by sglang_host_facts
    (``key``), or pinned in the inventory (``var``). ``hardware`` facts must agree when both exist.
    ``about`` is the variable messages about the value name (default ``var``)."""

    key: str
    var: str
    plan: str | None = None
    scale: int = 1                  # inventory unit -> what the plan counts (bytes)
    hardware: bool = False
    needed: bool = False            # the plan cannot be made without it
    about: str | None = None
    offline: str | None = None      # what an offline plan counts when ``var`` is unset (a deploy reads the host)


FACTS: tuple[Fact, ...] = (
    Fact("gpu_count", "sglang_gpu_count", hardware=True),
    Fact("gpu_memory_mib", "sglang_gpu_memory_mib", plan="gpu_memory_bytes", scale=MIB, hardware=True, needed=True),
    Fact("compute_capability", "sglang_gpu_compute_capability", hardware=True),
    Fact("host_mem_available_bytes", "sglang_host_memory_available_gb", plan="host_mem_available_bytes",
         needed=True, offline="sglang_plan_host_memory_available_gb"),
    Fact("numa_memory", "sglang_host_numa_memory", plan="numa_memory"),
    Fact("weight_bytes_total", "sglang_model_weight_size", plan="weight_bytes_per_gpu", needed=True),
    Fact("draft_weight_bytes_total", "sglang_draft_weight_size", plan="draft_weight_bytes_per_gpu"),
    Fact("model_config", "sglang_model_config_file", plan="model_config", needed=True, about="sglang_model_path"),
    Fact("draft_config", "sglang_draft_config_file", plan="draft_config",
         about="sglang_speculative_draft_model_path"),
)
