"""Test double: the CPU build of sgl-kernel, which is not on PyPI (the `engine` scenario only).

With SGLANG_USE_CPU_ENGINE=1, six SGLang 0.5.23 modules import CPU ops from `sgl_kernel` when they are
imported (sglang/kernels/ops/kvcache/cache_move.py and the speculative-decoding helpers); none is called
on the path the scenario serves (no speculative decoding, no KV copy between layers). Every name resolves
to a function that raises if it is ever called, so a path that does need one fails loudly instead of
computing something wrong. docs/tests.md lists this among the scenario's test doubles.
"""

from __future__ import annotations

from typing import NoReturn

__version__ = "0.0.0+engine-scenario-stub"


def __getattr__(name: str) -> object:
    if name.startswith("__"):
        raise AttributeError(name)

    def unavailable(*_args: object, **_kwargs: object) -> NoReturn:
        raise NotImplementedError(f"sgl_kernel.{name}: the CPU build of sgl-kernel is a stub in this test host")

    unavailable.__name__ = name
    return unavailable
