# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight: the version/hardware rules and the capacity plan of one host, before anything changes.

``run(resolved, facts, avg_seq_len, need_plan)`` joins the output of the resolve step
(sglang_args.resolve) with what is known of the host: values pinned in the inventory, and, during a
deploy, what sglang_host_facts read on the host. The host's own readings win for the hardware; a
pinned inventory value that disagrees with the host is an error, because the plan would describe a
machine that does not exist. ``table()`` prints the plan for a person.
"""

from __future__ import annotations

from typing import Any

from . import sglang_capacity as capacity
from . import sglang_rules as rules

# Inventory variable behind each fact, for messages.
FACT_VARS = {
    "gpu_count": "sglang_gpu_count", "gpu_memory_mib": "sglang_gpu_memory_mib",
    "compute_capability": "sglang_gpu_compute_capability",
    "host_mem_available_bytes": "sglang_host_memory_available_gb",
    "weight_bytes_total": "sglang_model_weight_gb", "draft_weight_bytes_total": "sglang_draft_weight_gb",
    "model_config": "sglang_model_config_file", "draft_config": "sglang_draft_config_file",
}
HARDWARE = ("gpu_count", "gpu_memory_mib", "compute_capability")


def merge_facts(pinned: dict[str, Any], detected: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """Inventory values and host readings -> one set of facts, and the disagreements found."""
    facts = {key: value for key, value in pinned.items() if value not in (None, "", {})}
    errors = []
    for key, value in (detected or {}).items():
        if key in ("errors", "notes") or value in (None, "", {}, []):
            continue
        if key in HARDWARE and key in facts and str(facts[key]) != str(value):
            errors.append(f"{FACT_VARS[key]}: the inventory says {facts[key]} but the host has {value}; "
                          "allowed: the host's value, or unset it to use what the host reports")
        if key in HARDWARE or key not in facts:
            facts[key] = value
    return facts, errors


def _architecture(config: dict[str, Any] | None) -> tuple[str, str]:
    if not config:
        return "", ""
    architectures = config.get("architectures") or [""]
    return str(architectures[0]), str(config.get("model_type") or "")


def _plan(resolved: dict[str, Any], facts: dict[str, Any], avg_seq_len: int) -> dict[str, Any]:
    values: dict[str, Any] = {
        "version": resolved["version"], "model_config": facts["model_config"], "avg_seq_len": avg_seq_len,
        "names": resolved.get("names") or {}, "draft_config": facts.get("draft_config"),
        **capacity.args_settings(resolved["args"]),
    }
    if facts.get("gpu_memory_mib") is not None:
        values["gpu_memory_mib"] = facts["gpu_memory_mib"]
    for key in ("host_mem_available_bytes", "weight_bytes_total", "draft_weight_bytes_total"):
        if facts.get(key) is not None:
            values[key] = facts[key]
    try:
        return capacity.plan(capacity.plan_inputs(values))
    except capacity.CapacityError as exc:
        return {"ok": False, "errors": [str(exc)], "warnings": []}


def missing_for_plan(facts: dict[str, Any]) -> list[str]:
    needed = ("model_config", "gpu_memory_mib", "host_mem_available_bytes", "weight_bytes_total")
    return [FACT_VARS[key] for key in needed if facts.get(key) in (None, "", {})]


def run(resolved: dict[str, Any], pinned: dict[str, Any], detected: dict[str, Any] | None = None,
        avg_seq_len: int = 8192, need_plan: bool = False, advisory_plan: bool = False) -> dict[str, Any]:
    """Rules and plan for one host. need_plan: refuse when the plan cannot be made (plan.yml, deploy).
    advisory_plan: report a plan that does not fit as a warning (render.yml only renders for review)."""
    facts, errors = merge_facts(pinned, detected)
    errors += list((detected or {}).get("errors") or [])
    notes = list((detected or {}).get("notes") or [])
    architecture, model_type = _architecture(facts.get("model_config"))
    hardware = {"compute_capability": facts.get("compute_capability"), "gpu_count": facts.get("gpu_count"),
                "model_architecture": architecture, "model_type": model_type,
                "p2p_read": facts.get("p2p_read"), "iommu": facts.get("iommu")}
    checked = rules.check(resolved["version"], resolved["args"], resolved["env"], hardware,
                          sources=resolved.get("sources"))
    errors += checked["errors"]
    warnings = notes + list(checked["warnings"])
    plan: dict[str, Any] | None = None
    missing = missing_for_plan(facts)
    if not missing:
        plan = _plan(resolved, facts, avg_seq_len)
        if advisory_plan:
            warnings += [f"DEPLOY WOULD REFUSE THIS: {error}" for error in plan["errors"]]
        else:
            errors += plan["errors"]
        warnings += plan["warnings"]
    elif need_plan:
        errors.append("capacity plan: no value for " + ", ".join(missing)
                      + "; allowed: set them in the inventory, or deploy so they are read on the host")
    return {"ok": not errors, "errors": errors, "warnings": warnings, "drop_env": checked["drop_env"],
            "plan": plan, "facts": {k: v for k, v in facts.items() if k not in ("model_config", "draft_config")},
            "hardware": hardware}


def _gb(value: float) -> str:
    return f"{value / 1e9:,.1f} GB"


def table(host: str, result: dict[str, Any]) -> str:
    """A plan a person reads in ten seconds."""
    plan = result.get("plan") or {}
    lines = [f"{host}: {'OK' if result['ok'] else 'REFUSED'}"]
    if plan.get("kv_bytes_per_token"):
        what_if = plan.get("what_if") or {}
        hicache = what_if.get("hicache") or {}
        lines += [
            f"  KV cache per token, per rank   {plan['kv_bytes_per_token']:>14,} B",
            f"  GPU KV pool, per rank          {plan['device_kv_tokens']:>14,} tokens",
            f"  host KV pool, per rank         {plan['host_kv_tokens_per_rank']:>14,} tokens"
            f"  {_gb(plan['host_kv_bytes_per_rank'])}",
            f"  host KV pool, all ranks        {_gb(plan['host_kv_bytes_total']):>17}"
            f"  of {_gb(plan['host_mem_available_bytes'])} available",
            f"  requests decoding at once      {plan['max_concurrent_requests']:>14,}"
            f"  (at {(plan.get('concurrency') or {}).get('avg_seq_len', '?')} tokens each)",
        ]
        if hicache:
            host_tokens = hicache.get("prefix_cache_tokens_host", 0)
            lines.append(f"  HiCache adds                   {host_tokens:>14,} prefix tokens"
                         " in host RAM; it does not add concurrency")
        for name, variant in what_if.items():
            if name != "hicache" and variant.get("ok"):
                lines.append(f"  with {name:<26}{variant['device_kv_tokens']:>14,} tokens,"
                             f" {variant['max_concurrent_requests']} at once")
    lines += [f"  ERROR   {e}" for e in result["errors"]]
    lines += [f"  warning {w}" for w in result["warnings"]]
    return "\n".join(lines)


def plan_json(result: dict[str, Any]) -> dict[str, Any]:
    """The per-host JSON of plan.yml (-e plan_json=PATH)."""
    plan = result.get("plan") or {}
    keys = ("kv_bytes_per_token", "device_kv_tokens", "host_kv_tokens_per_rank", "host_kv_bytes_per_rank",
            "host_kv_bytes_total", "host_mem_available_bytes", "max_concurrent_requests")
    return {"ok": result["ok"], "errors": result["errors"], "warnings": result["warnings"],
            **{key: int(plan.get(key) or 0) for key in keys}}
