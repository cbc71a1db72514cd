"""What the line-progress hook costs each write to the served interpreter's stderr (docs/installing.md).

    python tools/bench_line_progress.py [--writes 20000]

Writes SGLang-shaped text (a log line, and a tqdm redraw of the weight-loading bar) to a null stream, directly and
through roles/sglang_stack/files/sglang_deploy_line_progress.py's wrapper, and prints the time per write of each
and the difference: what every stderr write of the server pays while SGLANG_DEPLOY_LINE_PROGRESS=1.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.join(HERE, "..", "roles", "sglang_stack", "files", "sglang_deploy_line_progress.py")
SAMPLES = {
    "log line": "[2026-12-05 07:00:00 TP0] Decode batch. #running-req: 21, #token: 172976, token usage: 0.82, "
                "gen throughput (token/s): 412.37, #queue-req: 0\n",
    "tqdm redraw": "\rLoading safetensors checkpoint shards:  45% Completed | 29/64 [04:41<05:39,  9.71s/it]",
}


def hook_module() -> Any:
    os.environ.pop("SGLANG_DEPLOY_LINE_PROGRESS", None)  # importing it must not wrap this process's stderr
    spec = importlib.util.spec_from_file_location("sglang_deploy_line_progress", HOOK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_write(stream: Any, text: str, writes: int) -> float:
    start = time.perf_counter()
    for _write in range(writes):
        stream.write(text)
    return (time.perf_counter() - start) / writes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=20000)
    args = parser.parse_args(argv)
    wrapper = hook_module().LineProgressStream
    results = {}
    for name, text in SAMPLES.items():
        direct = min(per_write(io.StringIO(), text, args.writes) for _round in range(3))
        wrapped = min(per_write(wrapper(io.StringIO()), text, args.writes) for _round in range(3))
        results[name] = {"chars": len(text), "direct_us": round(direct * 1e6, 2), "wrapped_us": round(wrapped * 1e6, 2),
                         "added_us": round((wrapped - direct) * 1e6, 2)}
        print(f"{name:<12} {len(text):>4} chars: {direct * 1e6:6.2f} us direct, {wrapped * 1e6:6.2f} us through the "
              f"hook, +{(wrapped - direct) * 1e6:.2f} us per write")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
