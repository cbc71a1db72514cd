"""Log output in the formats of the real server (SGLang's logger, uvicorn, tqdm).

Every format lives in a constant here, so a correction from the real logs is a one-line change.
SGLang and uvicorn's server lines go to stderr, uvicorn's access lines to stdout (uvicorn's own
default handlers); every write is flushed at once so journald sees it live.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import TextIO

# SGLang: logging.basicConfig(format="[%(asctime)s%(prefix)s] %(message)s",
# datefmt="%Y-%m-%d %H:%M:%S"). A scheduler's prefix (0.5.23 managers/scheduler.py:6279-6291,
# configure_scheduler_process) names its TP rank only when tp_size > 1 and its MoE EP rank only when
# ep_size > 1: a one-GPU server's scheduler lines carry no rank at all ("[<time>] Load weight begin...").
LOG_FORMAT = "[{time}{prefix}] {message}"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
TP_PREFIX = " TP{rank}"
EP_PREFIX = " EP{rank}"
# uvicorn under SGLang: "[%(asctime)s] %(levelprefix)s %(message)s", levelprefix = "INFO:    "
UVICORN_LEVEL_WIDTH = 9
ACCESS_FORMAT = '{client} - "{request_line}" {status} {phrase}'
# tqdm with SGLang's description, written with "\r" and no newline until the bar closes. tqdm redraws on an
# update only when mininterval (0.1 s) has passed since the last draw, and always once more on close.
BAR_DESC = "Multi-thread loading shards"  # 0.5.12+ default; "Loading safetensors checkpoint shards" before
BAR_FORMAT = "{desc}: {pct:3.0f}% Completed | {n}/{total} [{elapsed}<{remaining}, {rate}]"
BAR_MININTERVAL = 0.1

Frame = tuple[str, int, str, str]

_lock = threading.RLock()
_parallel = {"tp_size": 1, "ep_size": 1}


def configure_ranks(tp_size: int, ep_size: int = 1) -> None:
    """The parallel layout that decides the scheduler prefixes (see TP_PREFIX)."""
    _parallel.update(tp_size=max(tp_size, 1), ep_size=max(ep_size, 1))


def rank_prefix(rank: int) -> str:
    """The scheduler prefix of TP rank `rank`: " TP3", " TP3 EP3", or "" on a one-rank server."""
    tp_size, ep_size = _parallel["tp_size"], _parallel["ep_size"]
    prefix = TP_PREFIX.format(rank=rank) if tp_size > 1 else ""
    if ep_size > 1:
        prefix += EP_PREFIX.format(rank=rank // max(tp_size // ep_size, 1))
    return prefix


def stamp() -> str:
    return time.strftime(TIME_FORMAT)


def line(message: str, rank: int | None = None) -> str:
    prefix = "" if rank is None else rank_prefix(rank)
    return LOG_FORMAT.format(time=stamp(), prefix=prefix, message=message)


def write(text: str, stream: TextIO | None = None) -> None:
    out = stream if stream is not None else sys.stderr
    with _lock:
        try:
            out.write(text)
            out.flush()
        except (OSError, ValueError):
            pass


def log(message: str, rank: int | None = None) -> None:
    """One SGLang log record (may span lines, like a logged traceback)."""
    write(line(message, rank) + "\n")


def uvicorn(message: str, level: str = "INFO") -> None:
    write(line("{} {}".format((level + ":").ljust(UVICORN_LEVEL_WIDTH), message)) + "\n")


def access(client: str, request_line: str, status: int, phrase: str) -> None:
    text = ACCESS_FORMAT.format(client=client, request_line=request_line, status=status,
                                phrase=phrase)
    write(line("{} {}".format("INFO:".ljust(UVICORN_LEVEL_WIDTH), text)) + "\n", sys.stdout)


def site_dir() -> str:
    """Directory of the installed ``sglang`` package, for realistic traceback paths."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def traceback_text(frames: Sequence[Frame], exception: str) -> str:
    """A Python traceback; frame files are relative to the sglang package unless absolute."""
    out = ["Traceback (most recent call last):"]
    for path, lineno, func, code in frames:
        full = path
        if not path.startswith(("/", "<")):
            full = os.path.normpath(os.path.join(site_dir(), path))
        out.append(f'  File "{full}", line {lineno}, in {func}')
        if code:
            out.append("    " + code)
    out.append(exception)
    return "\n".join(out)


def format_interval(seconds: float) -> str:
    """tqdm.format_interval."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours:d}:{minutes:02d}:{secs:02d}"
    return f"{minutes:02d}:{secs:02d}"


def format_bar(n: int, total: int, elapsed: float) -> str:
    rate = n / elapsed if n and elapsed > 0 else None
    if rate is None:
        rate_text, remaining = "?it/s", "?"
    else:
        rate_text = "%5.2fs/it" % (1 / rate) if rate < 1 else f"{rate:5.2f}it/s"
        remaining = format_interval((total - n) / rate)
    return BAR_FORMAT.format(desc=BAR_DESC, pct=100.0 * n / total if total else 100.0, n=n,
                             total=total, elapsed=format_interval(elapsed),
                             remaining=remaining, rate=rate_text)


class Bar:
    """A tqdm bar on a non-TTY stream: "\\r" + text (padded over the last), "\\n" on close."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.start = time.monotonic()
        self.last_len = 0
        self.last_shown = self.start
        self.n = 0
        self.show()

    def show(self) -> None:
        now = time.monotonic()
        text = format_bar(self.n, self.total, now - self.start)
        write("\r" + text + " " * max(self.last_len - len(text), 0))
        self.last_len = len(text)
        self.last_shown = now

    def update(self) -> None:
        self.n += 1
        if time.monotonic() - self.last_shown >= BAR_MININTERVAL:
            self.show()

    @property
    def percent(self) -> float:
        return 100.0 * self.n / self.total if self.total else 100.0

    def close(self) -> None:
        self.show()
        write("\n")
