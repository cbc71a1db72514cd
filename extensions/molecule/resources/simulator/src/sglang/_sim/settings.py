"""Simulator settings and fault injection, read from the environment (table in ``__init__``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "SGLANG_SIM_"


class SettingsError(Exception):
    """An SGLANG_SIM_* variable has a value the simulator cannot use."""


@dataclass(frozen=True)
class Faults:
    crash_at: float | None = None
    hang_at: float | None = None
    fail_warmup: bool = False
    crash_after_ready: float | None = None
    slow_drain: float = 0.0
    slow_exit: float = 0.0
    exit_code: int = 1
    hold_load: str = ""


@dataclass(frozen=True)
class Settings:
    load_seconds: float = 6.0
    warmup_seconds: float = 1.0
    token_seconds: float = 0.005
    drain_log_seconds: float = 5.0
    gpu_mem_gib: float = 95.6
    weight_gib_per_gpu: float = 68.0
    draft_weight_gib_per_gpu: float = 0.45
    mem_available_gb: float | None = None
    dist_timeout: float = 60.0
    health_timeout: float = 20.0
    force_shutdown: bool = False
    gpu_devices: bool = False
    faults: Faults = Faults()


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise SettingsError(f"{name}={text!r} is not a number") from None
    if value < 0:
        raise SettingsError(f"{name}={text!r} must not be negative")
    return value


def parse_faults(text: str) -> Faults:
    """Parse ``crash_at=50,slow_drain=3,fail_warmup`` into Faults."""
    values: dict[str, object] = {}
    numbers = {"crash_at", "hang_at", "crash_after_ready", "slow_drain", "slow_exit"}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, _sep, raw = item.partition("=")
        key = key.strip()
        if key == "fail_warmup" and not raw:
            values[key] = True
        elif key in numbers and raw:
            values[key] = _float({key: raw}, key, 0.0)
        elif key == "exit_code" and raw.strip().lstrip("-").isdigit():
            values[key] = int(raw)
        elif key == "hold_load" and raw.strip().startswith("/"):
            values[key] = raw.strip()
        else:
            raise SettingsError(f"SGLANG_SIM_FAULT: cannot use {item!r}")
    return Faults(**values)  # type: ignore[arg-type]


def from_env(env: Mapping[str, str]) -> Settings:
    available = env.get(PREFIX + "MEM_AVAILABLE_GB", "").strip()
    return Settings(
        load_seconds=_float(env, PREFIX + "LOAD_SECONDS", 6.0),
        warmup_seconds=_float(env, PREFIX + "WARMUP_SECONDS", 1.0),
        token_seconds=_float(env, PREFIX + "TOKEN_SECONDS", 0.005),
        drain_log_seconds=max(_float(env, PREFIX + "DRAIN_LOG_SECONDS", 5.0), 0.05),
        gpu_mem_gib=_float(env, PREFIX + "GPU_MEM_GIB", 95.6),
        weight_gib_per_gpu=_float(env, PREFIX + "WEIGHT_GIB_PER_GPU", 68.0),
        draft_weight_gib_per_gpu=_float(env, PREFIX + "DRAFT_WEIGHT_GIB_PER_GPU", 0.45),
        mem_available_gb=_float(env, PREFIX + "MEM_AVAILABLE_GB", 0.0) if available else None,
        dist_timeout=_float(env, PREFIX + "DIST_TIMEOUT", 60.0),
        health_timeout=_float(env, "SGLANG_HEALTH_CHECK_TIMEOUT", 20.0),
        force_shutdown=env.get("SGL_FORCE_SHUTDOWN", "").strip().lower() in ("1", "true", "yes"),
        gpu_devices=env.get(PREFIX + "GPU_DEVICES", "").strip().lower() in ("1", "true", "yes"),
        faults=parse_faults(env.get(PREFIX + "FAULT", "")),
    )
