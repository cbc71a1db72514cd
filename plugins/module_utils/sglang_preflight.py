# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight: the version/hardware rules and the capacity plan of one host, before anything changes.

``run(config, pinned, detected, avg_seq_len, plan)`` joins a resolved configuration
(sglang_config.resolve) with what is known of the host: values pinned in the inventory, and, during
a deploy, what sglang_host_facts read on the host (sglang_settings.FACTS declares both). The host's
own readings win for the hardware; a pinned inventory value that disagrees with the host is an
error, because the plan would describe a machine that does not exist.
"""

from __future__ import annotations

from typing import Any

from . import sglang_config
from . import sglang_rules as rules
from . import sglang_settings as table
from .sglang_capacity import GIB, CapacityError
from .sglang_inputs import numa_memory
from .sglang_plan import PlanInputs, calibrate, plan
from .sglang_settings import FACTS
from .sglang_startup import StartupLogError, identity_differences, memory_identity, read
from .sglang_types import is_unset, to_bytes, to_float, to_int

PLAN_MODES = ("optional", "required", "advisory")


def merge_facts(pinned: dict[str, Any], detected: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """Inventory values and host readings -> one set of facts, and the disagreements found."""
    hardware = {fact.key: fact.var for fact in FACTS if fact.hardware}
    facts = {key: value for key, value in pinned.items() if value not in (None, "", {})}
    errors = []
    for key, value in (detected or {}).items():
        if key in ("errors", "notes") or value in (None, "", {}, []):
            continue
        if key in hardware and key in facts and str(facts[key]) != str(value):
            errors.append(f"{hardware[key]}: the inventory says {facts[key]} but the host has {value}; "
                          "allowed: the host's value, or unset it to use what the host reports")
        if key in hardware or key not in facts:
            facts[key] = value
    return facts, errors


def _fact_number(value: Any, scale: int) -> int:
    """A fact as the plan counts it: the inventory's sizes state their unit ('547 GiB'); a number is in its
    fact's unit (MiB for GPU memory, bytes otherwise) and scaled to bytes."""
    return to_bytes(value) if isinstance(value, str) else int(to_float(value) * scale)


def weight_notes(pinned: dict[str, Any], detected: dict[str, Any] | None) -> list[str]:
    """A weight size the inventory sets (it wins, for planning offline or to pin it) that is more than 3 %
    off the safetensors on the host: most often GB read as GiB, or a figure of another checkpoint."""
    notes = []
    for fact in FACTS:
        if not fact.key.endswith("weight_bytes_total"):
            continue
        typed, found = pinned.get(fact.key), (detected or {}).get(fact.key)
        if is_unset(typed) or not found:
            continue
        try:
            size = _fact_number(typed, fact.scale)
        except ValueError:
            continue
        if int(found) < 0.01 * size:
            notes.append(f"{fact.var}: the plan counts {typed} of weights; the safetensors on the host sum to "
                         f"{int(found) / 1e9:,.3f} GB, under 1 % of that: stand-in shards (the sandbox's are a few KB "
                         "each, its simulator plays the full size) or a copy still missing its files (role "
                         "sglang_weights verifies it against its manifest)")
        elif abs(size - int(found)) > 0.03 * int(found):
            notes.append(f"{fact.var}: {typed} is {size / int(found) - 1:+.0%} off the {int(found) / 1e9:,.1f} GB "
                         f"({int(found) / GIB:,.1f} GiB) of safetensors on the host, and the plan uses it; unset it "
                         "to plan with the host's files")
    return notes


def _numa_differences(typed: Any, found: Any) -> tuple[list[str], list[str]]:
    """sglang_host_numa_memory against the host's reading: another GPU-to-node map or other nodes is another
    machine (an error, as for the hardware facts); a node's GB more than 10 % off what it has available is a note."""
    if is_unset(typed) or not isinstance(found, dict) or not found.get("gpus"):
        return [], []
    try:
        mine = numa_memory(typed)
    except ValueError:
        return [], []  # refused as the variable's own problem
    var, allowed = "sglang_host_numa_memory", "allowed: the host's figures, or unset it to use what the host reports"
    theirs = {str(node): int(size) for node, size in dict(found.get("nodes") or {}).items()}
    gpus = [int(node) for node in found["gpus"]]
    if mine["gpus"] != gpus:
        return [f"{var}: gpus says {mine['gpus']} (the NUMA node of each GPU, GPU 0 first) but the host has {gpus}; "
                f"{allowed}"], []
    if sorted(map(int, mine["nodes"])) != sorted(map(int, theirs)):
        return [f"{var}: nodes_gb gives node(s) {sorted(map(int, mine['nodes']))} but the host has "
                f"{sorted(map(int, theirs))}; {allowed}"], []
    notes = [f"{var}: node {node}: the plan counts {size / 1e9:,.0f} GB, the host has {theirs[node] / 1e9:,.0f} GB "
             f"available now ({size / theirs[node] - 1:+.0%}); the pinned figure wins (unset it to plan with the "
             "host's reading)" for node, size in sorted(mine["nodes"].items(), key=lambda item: int(item[0]))
             if theirs[node] > 0 and abs(size - theirs[node]) > 0.10 * theirs[node]]
    return [], notes


def _host_memory_note(typed: Any, found: Any) -> list[str]:
    """sglang_host_memory_available_gb more than 10 % above what the host has available now: the host KV cache
    (HiCache) and the presharded dump are sized from the pinned figure, which the host may not have at start."""
    fact = next(f for f in FACTS if f.key == "host_mem_available_bytes")
    if is_unset(typed) or not found:
        return []
    try:
        size = _fact_number(typed, fact.scale)
    except ValueError:
        return []
    if size <= 1.10 * int(found):
        return []
    return [f"{fact.var}: the plan counts {size / 1e9:,.0f} GB of host memory, the host has {int(found) / 1e9:,.0f} "
            f"GB available now ({size / int(found) - 1:+.0%}): what the plan sizes from it (the host KV cache) may "
            "not fit at start; the pinned figure wins (unset it to plan with the host's reading)"]


def pinned_differences(pinned: dict[str, Any], detected: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """(errors, notes): the host figures the inventory pins (they win over the host's own reading, so that a plan
    can be made offline), against that reading during a deploy."""
    detected = detected or {}
    errors, notes = _numa_differences(pinned.get("numa_memory"), detected.get("numa_memory"))
    notes += _host_memory_note(pinned.get("host_mem_available_bytes"), detected.get("host_mem_available_bytes"))
    return errors, notes + weight_notes(pinned, detected)


def _architecture(config: dict[str, Any] | None) -> tuple[str, str]:
    if not config:
        return "", ""
    architectures = config.get("architectures") or [""]
    return str(architectures[0]), str(config.get("model_type") or "")


def plan_inputs(config: dict[str, Any], facts: dict[str, Any], avg_seq_len: int) -> PlanInputs:
    """The plan's inputs: the typed settings the table marks as plan inputs, and the host's facts."""
    settings = config.get("settings") or {}
    values: dict[str, Any] = {"version": config["version"], "avg_seq_len": to_int(avg_seq_len)}
    sources: dict[str, str] = {}
    for setting in table.SETTINGS:
        if setting.plan and setting.dest in settings:
            values[setting.plan] = settings[setting.dest]["value"]
            sources[setting.plan] = settings[setting.dest]["source"]
    values["numa_bind"] = str((config.get("numa") or {}).get("bind") or "off")
    tp = max(int(values.get("tp_size") or 1), 1)
    for fact in FACTS:
        value = facts.get(fact.key)
        if not fact.plan or value is None:
            continue
        if fact.key == "numa_memory" and isinstance(value, dict) and "nodes_gb" in value:
            try:
                value = numa_memory(value)  # the inventory's GB per node, as the host's reading counts it
            except ValueError as exc:
                raise CapacityError(f"{fact.var}: {exc}") from None
        if isinstance(value, dict):
            values[fact.plan] = value
            continue
        try:
            number = _fact_number(value, fact.scale)
        except ValueError as exc:
            raise CapacityError(f"{fact.var}: {exc}") from None
        values[fact.plan] = number // tp if fact.key.endswith("_total") else number
    return PlanInputs(**values, sources=sources)


def missing_for_plan(facts: dict[str, Any], calibrating: bool = False) -> list[str]:
    """Variables the plan needs and has no value for; a start's own figures stand in for the weights'."""
    return [fact.var + (f" (offline: {fact.offline})" if fact.offline else "") for fact in FACTS
            if fact.needed and facts.get(fact.key) in (None, "", {})
            and not (calibrating and fact.key == "weight_bytes_total")]


ESTIMATE = ("the plan is an estimate from the inventory, which can be off by a factor of 2 (weights per GPU are "
            "not checkpoint size / tp_size)")


def _calibrated(inputs: PlanInputs, startup: dict[str, Any] | None) -> tuple[PlanInputs, list[str], list[str]]:
    """(inputs, errors, warnings) with a start's figures (``startup``: {"text", "source"}), if one is given."""
    if not startup:
        return inputs, [], []
    source = str(startup.get("source") or "the startup log")
    try:
        measured = read(str(startup.get("text") or "")).as_dict()
    except StartupLogError as exc:
        return inputs, [f"sglang_startup_log: {source}: {exc}"], []
    calibrated, differences = calibrate(inputs, measured, source)
    if differences:
        # Asked for by name, a log of another start is refused rather than quietly left out: the operator meant
        # this plan to stand on measured figures, and an estimate in its place would read as one.
        return inputs, [f"sglang_startup_log: {source} is not a start of this configuration ("
                        + "; ".join(differences) + "); allowed: the startup log of a start with the same model, "
                        "draft, tp_size, kv_cache_dtype and page_size (or no sglang_startup_log: " + ESTIMATE + ")"], []
    return calibrated, [], []


def _from_observed(inputs: PlanInputs, config: dict[str, Any],
                   observed: dict[str, Any] | None) -> tuple[PlanInputs, list[str]]:
    """(inputs, warnings) with the figures of this host's last start, as the readiness waiter recorded them,
    when that start ran the same memory-deciding settings."""
    measured = (observed or {}).get("startup")
    if not isinstance(measured, dict) or not measured.get("pre_load_free_bytes"):
        return inputs, []
    source = f"the start of {observed.get('recorded_at', '?')} on this host"
    differences = identity_differences(dict(observed.get("identity") or {}), memory_identity(config))
    if not differences:
        calibrated, differences = calibrate(inputs, measured, source)
        if not differences:
            return calibrated, []
    return inputs, [f"not calibrated: {source} ran another configuration (" + "; ".join(differences) + "); "
                    + ESTIMATE]


def run(config: dict[str, Any], pinned: dict[str, Any], detected: dict[str, Any] | None = None,
        avg_seq_len: int = 8192, plan_mode: str = "optional") -> dict[str, Any]:
    """Rules and plan for one host. plan_mode: ``optional`` plans when the facts allow; ``required``
    refuses when the plan cannot be made (plan.yml, deploy); ``advisory`` reports a plan that does not
    fit as a warning (render.yml only renders for review)."""
    if plan_mode not in PLAN_MODES:
        raise ValueError(f"plan mode {plan_mode!r}; allowed: {', '.join(PLAN_MODES)}")
    facts, errors = merge_facts(pinned, detected)
    errors += list((detected or {}).get("errors") or [])
    differences, notes = pinned_differences(pinned, detected)
    errors += differences
    warnings = list((detected or {}).get("notes") or []) + notes
    architecture, model_type = _architecture(facts.get("model_config"))
    hardware = {"compute_capability": facts.get("compute_capability"), "gpu_count": facts.get("gpu_count"),
                "model_architecture": architecture, "model_type": model_type,
                "p2p_read": facts.get("p2p_read"), "iommu": facts.get("iommu")}
    checked = rules.check(config["version"], config["args"], config["env"], hardware,
                          sources=sglang_config.sources(config))
    errors += checked["errors"]
    warnings += checked["warnings"]
    result: dict[str, Any] | None = None
    startup = facts.pop("startup_log", None)
    observed = facts.pop("startup_observed", None)
    disk = facts.pop("disk_rate", None)
    missing = missing_for_plan(facts, calibrating=bool(startup))
    if not missing:
        try:
            inputs, startup_errors, startup_warnings = _calibrated(plan_inputs(config, facts, avg_seq_len), startup)
            if not startup:
                inputs, startup_warnings = _from_observed(inputs, config, observed)
            result = plan(inputs)
            result["errors"] = startup_errors + result["errors"]
            result["warnings"] = startup_warnings + result["warnings"]
            result["ok"] = result["ok"] and not startup_errors
        except CapacityError as exc:
            result = {"ok": False, "errors": [str(exc)], "warnings": []}
        if plan_mode == "advisory":
            warnings += [f"DEPLOY WOULD REFUSE THIS: {error}" for error in result["errors"]]
        else:
            errors += result["errors"]
        warnings += result["warnings"]
    elif plan_mode == "required":
        # What the host could not tell (nvidia-smi without a running driver, say) is the reason to name.
        unread = list((detected or {}).get("notes") or [])
        errors.append("capacity plan: no value for " + ", ".join(missing)
                      + "; allowed: set them in the inventory, or deploy so they are read on the host"
                      + (f" (the host: {'; '.join(unread)})" if unread else ""))
    return {"ok": not errors, "errors": errors, "warnings": warnings, "drop_env": checked["drop_env"],
            "plan": result, "facts": {k: v for k, v in facts.items() if k not in ("model_config", "draft_config")},
            "hardware": hardware, "observed": observed if isinstance(observed, dict) else None,
            "disk": disk if isinstance(disk, dict) else None}


def apply(config: dict[str, Any], pinned: dict[str, Any], detected: dict[str, Any] | None = None,
          avg_seq_len: int = 8192, plan_mode: str = "optional") -> dict[str, Any]:
    """The configuration with its ``checks`` (rules and plan) and without the environment the rules drop; with
    ``sglang_presharded``, its flags for the dump's key the host's read gives, and the dump's disk check."""
    config, dump_errors, dump_warnings = sglang_config.with_presharded(config, pinned, detected)
    checks = run(config, pinned, detected, avg_seq_len, plan_mode)
    checks["errors"] = dump_errors + checks["errors"]
    checks["warnings"] = dump_warnings + checks["warnings"]
    checks["ok"] = not checks["errors"]
    env = {name: value for name, value in config["env"].items() if name not in checks["drop_env"]}
    return {**config, "env": env, "checks": checks}
