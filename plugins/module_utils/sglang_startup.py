# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a server measured at its start, read from its startup output, for calibrating the plan.

``read(text)`` takes a server's startup output: ``journalctl -u sglang-<instance> -o cat``, or
SGLang's own stdout with its ``[<time> TPn]`` prefixes (a journal with its own prefixes works too).
Of the last start in it, it returns per rank, then the minimum across ranks (SGLang sizes by its
minimum: ``get_available_gpu_memory`` all-reduces free memory with MIN), the figures the plan needs:

- ``pre_load_free_bytes``: free GPU memory at the first ``Load weight begin. avail mem=X GB``;
- ``after_weights_free_bytes``: free memory at the last ``Load weight end. ... avail mem=Y GB`` before
  the first ``KV Cache is allocated`` (after the draft too, where the draft loads first: 0.5.14+);
- ``kv_tokens``: ``#tokens`` of the first ``KV Cache is allocated`` line (the target's pool);
- ``max_total_num_tokens``, ``max_running_requests``, ``context_len`` when the final summary line is there;
- the weight loads (architecture ``type=``, ``elapsed=`` seconds, ``mem usage=``) and what
  ``server_args=ServerArgs(...)`` says of the settings that decide memory, when the log has that line.

SGLang's "GB" in these lines are GiB (``free_memory / (1 << 30)`` in ``get_available_gpu_memory``,
python/sglang/srt/utils.py, which all-reduces with MIN when asked for the distributed figure). The
formats are those of every pinned version (0.5.9 to 0.5.23, tests/fixtures/sglang-logs) and of
public logs of other versions (tests/fixtures/sglang-logs/public). A log without the lines the plan
needs raises StartupLogError naming them. Standard library only.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

GIB = 1 << 30

# SGLang's own prefix, "[<time> TP<n>]", anywhere: a journal's prefix may come before it.
_RANK = re.compile(r"\[[^\]]*?\bTP(\d+)\b[^\]]*\]")
_BEGIN = re.compile(r"Load weight begin\. avail mem=([\d.]+) GB")
# "mem usage" is a difference of two free-memory readings: a load that allocates nothing on the device (the CPU
# engine, tests/fixtures/sglang-engine) prints "mem usage=-0.00 GB".
_END = re.compile(r"Load weight end\. (?P<rest>.*?)avail mem=(?P<avail>[\d.]+) GB, mem usage=(?P<usage>-?[\d.]+) GB")
_FIELD = re.compile(r"\b(\w+)=([\w.]+)")  # "elapsed=244.10 s, type=Kimi..." and the summary's "context_len=262144"
_KV = re.compile(r"KV Cache is allocated\..*?#tokens: (\d+)")
_SUMMARY = re.compile(r"max_total_num_tokens=(\d+)")
_SUMMARY_KEYS = ("max_total_num_tokens", "max_running_requests", "context_len")
# 0.5.9-0.5.14 log "server_args=ServerArgs(key=value, ...)" (f"{server_args=}"); 0.5.19 and later log the resolved
# dict, "server_args={'key': value, ...}" (srt/entrypoints/engine.py: server_args.resolved_dict()).
_SERVER_ARGS = re.compile(r"server_args=(?:ServerArgs\((?P<repr>.*)\)|(?P<dict>\{.*\}))\s*$")
# Settings that decide the memory before the KV pool, or name the run, as ServerArgs prints them.
SERVER_ARGS_KEYS = ("model_path", "tp_size", "pp_size", "dp_size", "nnodes", "quantization", "dtype", "kv_cache_dtype",
                    "page_size", "mem_fraction_static", "max_total_tokens", "speculative_algorithm",
                    "speculative_draft_model_path", "enable_hierarchical_cache", "hicache_ratio", "hicache_size",
                    "disable_cuda_graph", "cuda_graph_max_bs")


# A line of a start that read() uses; a waiter following the journal keeps only these.
_RELEVANT = ("avail mem=", "KV Cache is allocated", "max_total_num_tokens=", "server_args=")
# The settings that decide the memory before the KV pool: a recorded start stands in for the plan's
# estimates only when these are the same (mem_fraction_static, HiCache and the pool size may differ).
IDENTITY_KEYS = ("model_path", "tp_size", "nnodes", "kv_cache_dtype", "page_size", "speculative_algorithm",
                 "speculative_draft_model_path")


def relevant(line: str) -> bool:
    return any(marker in line for marker in _RELEVANT)


def memory_identity(config: dict[str, Any]) -> dict[str, Any]:
    """What a resolved configuration (sglang_config) says of the settings in IDENTITY_KEYS, and its version."""
    settings = config.get("settings") or {}
    found: dict[str, Any] = {"version": str(config.get("version") or "")}
    for key in IDENTITY_KEYS:
        if key in settings:
            value = settings[key].get("value")
            found[key] = value if isinstance(value, (int, float, bool)) or value is None else str(value)
    return found


def identity_differences(recorded: dict[str, Any], planned: dict[str, Any]) -> list[str]:
    """Each memory-deciding setting on which a recorded start and the plan differ."""
    keys = sorted(set(recorded) | set(planned))
    return [f"{key}: the recorded start ran {recorded.get(key)!r}, the plan has {planned.get(key)!r}"
            for key in keys if str(recorded.get(key)) != str(planned.get(key))]


class StartupLogError(ValueError):
    """The log lacks a line the calibration needs."""


@dataclass
class WeightLoad:
    architecture: str
    elapsed_s: float | None
    free_after_bytes: int
    usage_bytes: int


@dataclass
class Rank:
    pre_load_free_bytes: int | None = None
    after_weights_free_bytes: int | None = None
    loads: list[WeightLoad] = field(default_factory=list)
    kv_tokens: int | None = None


@dataclass
class Startup:
    ranks: dict[int, Rank]
    pre_load_free_bytes: int
    after_weights_free_bytes: int
    kv_tokens: int | None
    loads: list[WeightLoad]
    server_args: dict[str, Any]
    summary: dict[str, int]

    @property
    def weights_bytes(self) -> int:
        """What the weights loaded before the KV pool took, as measured: free before - free after."""
        return self.pre_load_free_bytes - self.after_weights_free_bytes

    def as_dict(self) -> dict[str, Any]:
        return {
            "ranks": len(self.ranks),
            "pre_load_free_bytes": self.pre_load_free_bytes,
            "after_weights_free_bytes": self.after_weights_free_bytes,
            "weights_bytes": self.weights_bytes,
            "kv_tokens": self.kv_tokens,
            "loads": [{"architecture": w.architecture, "elapsed_s": w.elapsed_s, "usage_bytes": w.usage_bytes}
                      for w in self.loads],
            "server_args": self.server_args,
            **self.summary,
        }


def _gib(text: str) -> int:
    return round(float(text) * GIB)


def _value(text: str) -> Any:
    text = text.strip()
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def server_args(line: str) -> dict[str, Any]:
    """The memory-deciding settings of a ``server_args=ServerArgs(...)`` or ``server_args={...}`` line (scalars)."""
    match = _SERVER_ARGS.search(line)
    if not match:
        return {}
    if match.group("dict") is not None:
        return _dict_args(match.group("dict"))
    body = match.group("repr")
    found = {}
    for key in SERVER_ARGS_KEYS:
        item = re.search(rf"(?:^|, ){key}=('[^']*'|\"[^\"]*\"|[^,()\[\]{{}}]*)", body)
        if item:
            found[key] = _value(item.group(1))
    return found


def _dict_args(text: str) -> dict[str, Any]:
    """The scalars of SERVER_ARGS_KEYS in a logged dict; a value that is not a Python literal is read as text."""
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        return {key: parsed[key] for key in SERVER_ARGS_KEYS
                if key in parsed and (parsed[key] is None or isinstance(parsed[key], (str, int, float, bool)))}
    found = {}
    for key in SERVER_ARGS_KEYS:
        item = re.search(rf"(?:^\{{|, )'{key}': ('[^']*'|\"[^\"]*\"|[^,()\[\]{{}}]*)", text)
        if item:
            found[key] = _value(item.group(1))
    return found


def _last_start(lines: list[str]) -> list[str]:
    """The lines of the last start that loaded weights. A start begins at its server_args line, or, in a log
    without them, after the previous start's closing ``max_total_num_tokens=`` line (a draft that loads
    after the target's KV pool, before 0.5.14, belongs to the same start)."""
    bounds = [i for i, line in enumerate(lines) if _SERVER_ARGS.search(line)]
    if not bounds:
        bounds = [0] + [i + 1 for i, line in enumerate(lines) if _SUMMARY.search(line)]
    segments = [lines[start:end] for start, end in zip(bounds, [*bounds[1:], len(lines)], strict=True)]
    loaded = [segment for segment in segments if any(_BEGIN.search(line) for line in segment)]
    return loaded[-1] if loaded else lines


def _ranks(lines: list[str]) -> dict[int, Rank]:
    ranks: dict[int, Rank] = {}
    for line in lines:
        prefix = _RANK.search(line)
        rank = ranks.setdefault(int(prefix.group(1)) if prefix else 0, Rank())
        if rank.kv_tokens is not None:
            continue  # after the target's pool: draft pools, CUDA graphs
        if (begin := _BEGIN.search(line)) and rank.pre_load_free_bytes is None:
            rank.pre_load_free_bytes = _gib(begin.group(1))
        elif end := _END.search(line):
            fields = dict(_FIELD.findall(end.group("rest")))
            elapsed = fields.get("elapsed")
            rank.loads.append(WeightLoad(fields.get("type", ""), float(elapsed) if elapsed is not None else None,
                                         _gib(end.group("avail")), _gib(end.group("usage"))))
            rank.after_weights_free_bytes = _gib(end.group("avail"))
        elif kv := _KV.search(line):
            rank.kv_tokens = int(kv.group(1))
    return {number: rank for number, rank in ranks.items() if rank.pre_load_free_bytes is not None}


def read(text: str) -> Startup:
    """The last start's figures (see the module docstring)."""
    lines = _last_start(text.splitlines())
    ranks = _ranks(lines)
    missing = []
    if not ranks:
        missing.append("'Load weight begin. avail mem=... GB'")
    if not any(rank.after_weights_free_bytes is not None for rank in ranks.values()):
        missing.append("'Load weight end. ... avail mem=... GB, mem usage=... GB'")
    if missing:
        raise StartupLogError("the startup log has no " + " and no ".join(missing) + " line; allowed: the output of "
                              "one server start (journalctl -u sglang-<instance> -o cat, or SGLang's stdout), from "
                              "its first lines to 'KV Cache is allocated'")
    complete = [rank for rank in ranks.values() if rank.after_weights_free_bytes is not None]
    tokens = [rank.kv_tokens for rank in complete if rank.kv_tokens is not None]
    first = min(ranks)
    summary = {}
    for line in lines:
        if _SUMMARY.search(line):
            fields = dict(_FIELD.findall(line))
            summary = {key: int(fields[key]) for key in _SUMMARY_KEYS if key in fields}
    args = next((server_args(line) for line in lines if _SERVER_ARGS.search(line)), {})
    return Startup(ranks=ranks, pre_load_free_bytes=min(r.pre_load_free_bytes or 0 for r in complete),
                   after_weights_free_bytes=min(r.after_weights_free_bytes or 0 for r in complete),
                   kv_tokens=min(tokens) if tokens else None, loads=ranks[first].loads, server_args=args,
                   summary=summary)
