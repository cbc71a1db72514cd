"""Simulated scheduling: running/queued requests, token timing, drain, and the metrics."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

WORDS = (" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".")
THROUGHPUT_WINDOW = 10.0


def token_text(index: int) -> str:
    return WORDS[index % len(WORDS)]


def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for the tokenizer: about four bytes per token."""
    return max(1, (len(text.encode("utf-8")) + 3) // 4)


@dataclass
class Generation:
    rid: str
    prompt_tokens: int
    max_new_tokens: int
    streaming: bool = False
    text: str = ""
    completion_tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    latency: float = 0.0


@dataclass
class Counts:
    """The tokenizer's per-request counters of one ``is_streaming`` value."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0


@dataclass
class Stats:
    running: int = 0
    queued: int = 0
    used_tokens: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    requests_total: int = 0
    recent: list[tuple[float, int]] = field(default_factory=list)
    # By is_streaming ("false"/"true"): a value has series once a request of its kind has finished, as in SGLang.
    by_stream: dict[str, Counts] = field(default_factory=dict)


class Engine:
    def __init__(self, max_running: int, max_total_tokens: int, token_seconds: float,
                 slow_drain: float) -> None:
        self.max_running = max(max_running, 1)
        self.max_total_tokens = max(max_total_tokens, 1)
        self.token_seconds = token_seconds
        self.slow_drain = slow_drain
        self.stats = Stats()
        self.draining = threading.Event()
        self.broken = threading.Event()
        self._cond = threading.Condition()
        self._in_flight: dict[str, float] = {}

    # ---- request accounting (what the drain waits for) --------------------------------
    @contextmanager
    def in_flight(self) -> Iterator[str]:
        rid = uuid.uuid4().hex
        with self._cond:
            self._in_flight[rid] = time.monotonic()
        try:
            yield rid
        finally:
            with self._cond:
                self._in_flight.pop(rid, None)
                self._cond.notify_all()

    def remaining(self) -> list[str]:
        with self._cond:
            return list(self._in_flight)

    # ---- generation -------------------------------------------------------------------
    def _admit(self, tokens: int) -> None:
        with self._cond:
            self.stats.queued += 1
            while self.stats.running >= self.max_running:
                self._cond.wait(0.05)
            self.stats.queued -= 1
            self.stats.running += 1
            self.stats.used_tokens += tokens

    def _release(self, tokens: int) -> None:
        with self._cond:
            self.stats.running -= 1
            self.stats.used_tokens -= tokens
            self._cond.notify_all()

    def _sleep_tokens(self, count: int, deadline_base: float, extended: list[bool]) -> float:
        """Sleep until count tokens are due; once draining, add slow_drain a single time."""
        due = deadline_base + count * self.token_seconds
        while True:
            if self.draining.is_set() and self.slow_drain and not extended[0]:
                extended[0] = True
            now = time.monotonic()
            target = due + (self.slow_drain if extended[0] else 0.0)
            if now >= target:
                return now
            time.sleep(min(target - now, 0.05))

    def generate(self, rid: str, prompt_tokens: int, max_new_tokens: int,
                 on_token: Callable[[Generation, str], None] | None = None, streaming: bool = False) -> Generation:
        gen = Generation(rid=rid, prompt_tokens=prompt_tokens, max_new_tokens=max_new_tokens, streaming=streaming)
        total = prompt_tokens + max_new_tokens
        self._admit(total)
        try:
            start = time.monotonic()
            extended = [False]
            for index in range(max_new_tokens):
                self._sleep_tokens(index + 1, start, extended)
                piece = token_text(index)
                gen.text += piece
                gen.completion_tokens += 1
                if on_token is not None:
                    on_token(gen, piece)
            if max_new_tokens == 0:
                self._sleep_tokens(0, start, extended)
        finally:
            self._release(total)
        gen.latency = time.monotonic() - gen.started
        self._account(gen)
        return gen

    def _account(self, gen: Generation) -> None:
        now = time.monotonic()
        with self._cond:
            stats = self.stats
            stats.prompt_tokens_total += gen.prompt_tokens
            stats.generation_tokens_total += gen.completion_tokens
            stats.requests_total += 1
            counts = stats.by_stream.setdefault("true" if gen.streaming else "false", Counts())
            counts.prompt_tokens += gen.prompt_tokens
            counts.generation_tokens += gen.completion_tokens
            counts.requests += 1
            stats.recent.append((now, gen.completion_tokens))
            stats.recent = [item for item in stats.recent if now - item[0] <= THROUGHPUT_WINDOW]

    def health_generate(self, timeout: float) -> bool:
        """The 1-token generation behind /health: waits for a free slot, is not counted."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.stats.running >= self.max_running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        time.sleep(self.token_seconds)
        return not self.broken.is_set()

    def throughput(self) -> float:
        now = time.monotonic()
        with self._cond:
            tokens = sum(count for when, count in self.stats.recent
                         if now - when <= THROUGHPUT_WINDOW)
        return tokens / THROUGHPUT_WINDOW
