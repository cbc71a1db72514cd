# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The timings of a server's load, and the readiness budget and stall bounds the next load gets from them.

The readiness waiter (module sglang_ready) keeps the timings in the host's record of the start
(``/var/lib/sglang/<instance>.observed.json``); the next deploy reads the record back (filter
load_budget) and status.yml shows it. A load of the same model on the same host takes about as long
as the last one, so that is what the next wait allows for: the configured values stay the floor, and
a host slower than they assume (a cold page cache after a reboot, a slow disk) gets the time its own
last load needed instead of being rolled back after 10 minutes of good progress. Standard library only.
"""

from __future__ import annotations

import math
import os
from typing import Any

# What a load's duration depends on: the same files read by the same ranks with the same SGLang.
LEARN_KEYS = ("version", "model_path", "speculative_draft_model_path", "tp_size", "nnodes")
BUDGET_FACTOR = 2.0   # the readiness budget: twice the last load, at least sglang_ready_timeout
SILENCE_FACTOR = 3.0  # a phase's stall bound: three times its longest silence last time, at least the configured


def safetensors_bytes(*paths: str | None) -> int:
    """The size of the .safetensors files directly in each directory given (the model, the draft)."""
    total = 0
    for path in paths:
        if path and os.path.isdir(path):
            total += sum(entry.stat().st_size for entry in os.scandir(path)
                         if entry.is_file() and entry.name.endswith(".safetensors"))
    return total


def phase_seconds(phases: list[dict[str, Any]], total_s: float) -> dict[str, float]:
    """Seconds spent under each stall key: from the start to the first phase ("starting"), then from each
    phase to the next, the last one to ``total_s`` (the server answering)."""
    spent: dict[str, float] = {}
    marks = [("starting", 0.0)] + [(str(p.get("key") or p.get("phase")), float(p.get("at_s") or 0)) for p in phases]
    ends = [at for _key, at in marks[1:]] + [float(total_s)]
    for index, (key, at) in enumerate(marks):
        spent[key] = round(spent.get(key, 0.0) + max(ends[index] - at, 0.0), 1)
    return spent


def timings(phases: list[dict[str, Any]], total_s: float, loads: list[dict[str, Any]], weights_bytes: int,
            silence: dict[str, float]) -> dict[str, Any]:
    """The record's ``load``: the time per phase, SGLang's own weight-load time (the sum of its
    ``elapsed=`` over the model and the draft), the rate it read the weights at, and the longest
    silence of each phase (no progress line)."""
    elapsed = [float(load["elapsed_s"]) for load in loads or [] if load.get("elapsed_s") is not None]
    weights_s = round(sum(elapsed), 2) if elapsed else None
    rate = round(weights_bytes / 1e9 / weights_s, 3) if weights_s and weights_bytes else None
    return {"total_s": round(float(total_s), 1), "phases_s": phase_seconds(phases, total_s),
            "weights_load_s": weights_s, "weights_bytes": int(weights_bytes or 0), "read_gb_per_s": rate,
            "silence_s": {key: round(value, 1) for key, value in (silence or {}).items()}}


def learned(record: dict[str, Any] | None, identity: dict[str, Any], timeout: int,
            bounds: dict[str, int]) -> dict[str, Any]:
    """The readiness budget and stall bounds for the next load: the configured ones, raised to what the
    last recorded load of the same model on this host needed. ``note`` says where they come from."""
    result = {"timeout": int(timeout), "stall_timeouts": dict(bounds or {}), "note": "configured"}
    load = (record or {}).get("load")
    if not isinstance(load, dict) or not load.get("total_s"):
        return result
    recorded = dict((record or {}).get("identity") or {})
    differences = [key for key in LEARN_KEYS
                   if key in recorded and key in identity and str(recorded[key]) != str(identity[key])]
    when = f"the load of {(record or {}).get('recorded_at', '?')}"
    if differences:
        result["note"] = f"configured ({when} ran another {', '.join(differences)})"
        return result
    raised = []
    budget = math.ceil(BUDGET_FACTOR * float(load["total_s"]))
    if budget > result["timeout"]:
        result["timeout"] = budget
        raised.append(f"budget {budget} s")
    for key, silence in sorted((load.get("silence_s") or {}).items()):
        bound = math.ceil(SILENCE_FACTOR * float(silence))
        if key in result["stall_timeouts"] and bound > result["stall_timeouts"][key]:
            result["stall_timeouts"][key] = bound
            raised.append(f"{key} {bound} s")
    result["note"] = (f"learned from {when} ({load['total_s']} s): " + ", ".join(raised) if raised
                      else f"configured, which covers {when} ({load['total_s']} s)")
    return result


def expected_downtime(record: dict[str, Any] | None, identity: dict[str, Any]) -> dict[str, Any]:
    """What a restart is expected to keep the server out of service, before the change is made: the total of its last
    recorded load of the same model on this host (``expected_s``, None when there is none), and ``source``, where
    that comes from. The drain before it is not counted: it lasts as long as the requests the server holds."""
    load = (record or {}).get("load")
    if not isinstance(load, dict) or not load.get("total_s"):
        return {"expected_s": None, "source": "no load recorded on this host yet"}
    recorded = dict((record or {}).get("identity") or {})
    differences = [key for key in LEARN_KEYS
                   if key in recorded and key in identity and str(recorded[key]) != str(identity[key])]
    when = f"the load of {(record or {}).get('recorded_at', '?')}"
    if differences:
        return {"expected_s": None, "source": f"unknown: {when} ran another {', '.join(differences)}"}
    return {"expected_s": round(float(load["total_s"]), 1), "source": f"{when} on this host"}


def summary(load: dict[str, Any] | None) -> str:
    """One line for the deploy's report: the load's phases and the weights' read rate."""
    if not isinstance(load, dict) or not load.get("total_s"):
        return "no load timings"
    names = (("distributed_init", "init"), ("loading_weights", "weights"), ("kv_cache", "KV pools"),
             ("cuda_graphs", "CUDA graphs"), ("host_kv_pool", "host pool"), ("warmup", "warm-up"))
    phases = load.get("phases_s") or {}
    parts = [f"{label} {phases[key]:.0f} s" for key, label in names if phases.get(key)]
    weights = ""
    if load.get("weights_load_s"):
        weights = f"; SGLang read the weights in {load['weights_load_s']:.0f} s"
        if load.get("read_gb_per_s"):
            weights += f" ({load['weights_bytes'] / 1e9:,.1f} GB at {load['read_gb_per_s']:.2f} GB/s)"
    return f"load {load['total_s']:.0f} s: " + ", ".join(parts) + weights
