# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the capacity plan says to a person: the host-memory verdict explained, the plan table, and
the per-host JSON of plan.yml."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .sglang_capacity import GB, HOST_RESERVE_BYTES, HostCheck
from .sglang_types import Problems, at_least


def gb(value: float, digits: int = 2) -> str:
    return f"{value / 1e9:,.{digits}f} GB"


@dataclass(frozen=True)
class Pools:
    """The host pool the explanation is about."""

    key: str            # the input the user sized the pool with
    mode: str           # size | ratio | auto
    ratio: float
    device_tokens: int
    cell: int
    target_bytes: int   # per rank
    draft_bytes: int    # per rank
    ranks: int
    mla: bool


def explain_host(version: str, size_gb: int, available_bytes: int, problems: Problems, pools: Pools,
                 check: HostCheck) -> None:
    """Turn a host-memory verdict into a message a person understands."""
    if check.verdict == "ok":
        return
    ranks = pools.ranks
    per_rank = pools.target_bytes + pools.draft_bytes
    if pools.mode == "size":
        what = f"{size_gb} is GB per TP rank, not a total"
    else:
        ratio = round(pools.ratio, 3)
        what = (f"ratio {ratio} makes a host pool of {gb(pools.target_bytes)} per TP rank "
                f"({ratio} x the GPU KV pool of {pools.device_tokens:,} tokens)")
    split = (f"MLA's latent KV ({pools.cell:,} bytes per token) is not split across TP ranks" if pools.mla else
             f"each rank keeps its own KV pool ({pools.cell:,} bytes per token on each rank)")
    draft = f" + {gb(pools.draft_bytes)} EAGLE draft side pool" if pools.draft_bytes else ""
    available = check.effective_available_bytes
    host = (f"the host has {gb(available_bytes)} of RAM available"
            + (f" ({gb(available)} within the cgroup limit)" if available != available_bytes else "")
            + f", {gb(available - HOST_RESERVE_BYTES)} after SGLang's 10 GiB reserve")
    pinned = (f"{split}, so each of the {ranks} ranks on this host pins its own pool: {ranks} ranks x "
              f"{gb(per_rank)} ({gb(pools.target_bytes)} KV{draft}) = {gb(per_rank * ranks)} of pinned host RAM")

    def allowed(limit: int) -> str:
        if pools.mode == "size":
            return f"at most {int(limit // GB)} GB per rank"
        return f"a ratio of at most {math.floor(limit / max(pools.device_tokens * pools.cell, 1) * 10) / 10}"

    safe = allowed(check.safe_per_rank_bytes)
    if check.verdict == "overcommit":
        problems.error(pools.key, f"{what}. {pinned}, but {host}. sglang {version} checks each rank alone against "
                       "the whole host: ranks that check before the others have pinned pass, so either the host "
                       f"runs out of memory as the pools fill or the later ranks fail, after the model load; "
                       f"allowed: {safe}")
    elif check.verdict == "refused":
        fit = allowed(check.fit_per_rank_bytes)
        rule = (f"gives each rank (available - 10 GiB) // {ranks} = {gb(check.per_rank_budget_bytes)}"
                if at_least(version, "0.5.19") else "checks each rank against the whole host")
        upto = fit.replace("at most ", "", 1)
        extra = (f", which passes in any start order (up to {upto} passes only if every rank reads free memory "
                 "before any has pinned its pool, sglang issue #38156)") if safe != fit else ""
        problems.error(pools.key, f"{what}. {pinned}, but {host}. sglang {version} {rule} and raises 'Not enough host "
                       f"memory available' on every rank, after the model load; allowed: {safe}{extra}")
    else:
        problems.warn(pools.key, f"{what}: {ranks} ranks x {gb(per_rank)} = {gb(per_rank * ranks)} fits the "
                      f"{gb(check.per_rank_budget_bytes)} per rank that sglang {version} allows, but each rank reads "
                      "MemAvailable when it reaches its pool, and a rank that comes after peers have pinned theirs is "
                      "charged for them again (sglang issue #38156): the start can fail intermittently after the "
                      f"model load; {safe} passes in any order")


def _checks(config: dict[str, Any]) -> dict[str, Any]:
    """The rules-and-plan result of a configuration; a configuration refused before it has one."""
    if "checks" in config:
        return config["checks"]
    return {"ok": False, "errors": list(config.get("errors") or []), "warnings": list(config.get("warnings") or [])}


def table(host: str, config: dict[str, Any]) -> str:
    """A plan a person reads in ten seconds."""
    result = _checks(config)
    plan = result.get("plan") or {}
    lines = [f"{host}: {'OK' if result['ok'] else 'REFUSED'}"]
    if plan.get("kv_bytes_per_token"):
        calibration = plan.get("calibration") or {}
        lines.append(f"  calibrated from {calibration.get('source')}: {gb(calibration.get('pre_load_free_bytes', 0))} "
                     f"free before the weights, {gb(calibration.get('weights_bytes', 0))} of weights per GPU"
                     if plan.get("calibrated") else
                     "  estimate from the inventory (no startup log of this configuration; sglang_startup_log)")
        what_if = plan.get("what_if") or {}
        hicache = what_if.get("hicache") or {}
        lines += [
            f"  KV cache per token, per rank   {plan['kv_bytes_per_token']:>14,} B",
            f"  GPU KV pool, per rank          {plan['device_kv_tokens']:>14,} tokens",
            f"  host KV pool, per rank         {plan['host_kv_tokens_per_rank']:>14,} tokens"
            f"  {gb(plan['host_kv_bytes_per_rank'], 1)}",
            f"  host KV pool, all ranks        {gb(plan['host_kv_bytes_total'], 1):>17}"
            f"  of {gb(plan['host_mem_available_bytes'], 1)} available",
            f"  requests decoding at once      {plan['max_concurrent_requests']:>14,}"
            f"  (at {(plan.get('concurrency') or {}).get('avg_seq_len', '?')} tokens each)",
        ]
        numa = [f"    {'NUMA node {} (GPUs {})'.format(node['node'], ','.join(map(str, node['gpus']))):<29}"
                f"{gb(node['need_bytes'], 1):>17}  of {gb(node['available_bytes'], 1)} on the node"
                f"{'' if node['fits'] else ' - DOES NOT FIT'}" for node in (plan.get("host") or {}).get("numa") or []]
        lines[-1:-1] = numa  # under the host pools, before the requests
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


def plan_json(config: dict[str, Any]) -> dict[str, Any]:
    """The per-host JSON of plan.yml (-e plan_json=PATH)."""
    result = _checks(config)
    plan = result.get("plan") or {}
    keys = ("kv_bytes_per_token", "device_kv_tokens", "host_kv_tokens_per_rank", "host_kv_bytes_per_rank",
            "host_kv_bytes_total", "host_mem_available_bytes", "max_concurrent_requests")
    calibration = plan.get("calibration") or {}
    return {"ok": result["ok"], "errors": result["errors"], "warnings": result["warnings"],
            **{key: int(plan.get(key) or 0) for key in keys},
            "calibrated": bool(plan.get("calibrated")), "calibration_source": calibration.get("source"),
            "measured": {key: calibration[key] for key in ("pre_load_free_bytes", "weights_bytes", "kv_tokens",
                                                           "mem_fraction_static", "ranks") if key in calibration}}
