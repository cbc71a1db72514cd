"""Helpers for the simulator tests: paths, ports, HTTP, /proc, and a managed server process."""

from __future__ import annotations

import ast
import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from helpers import PATIENCE, wait_for

REPO = Path(__file__).resolve().parents[2]
SIM_DIR = REPO / "extensions" / "molecule" / "resources" / "simulator"
BUILD_SCRIPT = SIM_DIR / "build_wheel.py"
NVIDIA_SMI = REPO / "extensions" / "molecule" / "resources" / "nvidia-smi" / "nvidia-smi"  # a /bin/sh wrapper of:
NVIDIA_SMI_PY = NVIDIA_SMI.with_name("nvidia_smi.py")
FIXTURE_CATALOG = Path(__file__).resolve().parent / "data" / "sglang-0.5.23.json"
REAL_CATALOG_DIR = REPO / "roles" / "sglang_config" / "files" / "catalogs"
VERSION = "0.5.23"

# Short timings so a whole start-to-ready cycle takes about 1.5 s.
FAST_ENV = {
    "SGLANG_SIM_LOAD_SECONDS": "1.0",
    "SGLANG_SIM_WARMUP_SECONDS": "0.3",
    "SGLANG_SIM_TOKEN_SECONDS": "0.005",
    "SGLANG_SIM_DRAIN_LOG_SECONDS": "0.3",
    "SGLANG_SIM_MEM_AVAILABLE_GB": "1000",
}


def build_wheel(out: Path, catalog: Path | None = FIXTURE_CATALOG, version: str = VERSION) -> Path:
    """Run build_wheel.py; None as catalog means its default (the repository's catalogs/)."""
    command = [sys.executable, str(BUILD_SCRIPT), "--version", version, "--out", str(out)]
    if catalog is not None:
        command += ["--catalog", str(catalog)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return Path(done.stdout.strip())


def kimi_config() -> dict[str, object]:
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "num_hidden_layers": 61,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "hidden_size": 7168,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "max_position_embeddings": 262144,
        "torch_dtype": "bfloat16",
    }


def write_model(path: Path, config: dict[str, object], shards: int = 64) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    weight_map = {f"model.layers.{i}.weight": f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)}
    weight_map["lm_head.weight"] = f"model-{shards:05d}-of-{shards:05d}.safetensors"
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return path


def sim_env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_"))}
    env.update(FAST_ENV)
    env.update(overrides)
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def request(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, bytes, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    try:
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        reply = conn.getresponse()
        return reply.status, reply.read(), {k.lower(): v for k, v in reply.getheaders()}
    finally:
        conn.close()


def get_status(port: int, path: str = "/health") -> int:
    try:
        return request(port, "GET", path, timeout=5)[0]
    except OSError:
        return 0


def get_json(port: int, path: str, headers: dict[str, str] | None = None) -> Any:
    status, body, _headers = request(port, "GET", path, headers=headers)
    assert status == 200, (path, status, body)
    return json.loads(body)


def post_json(port: int, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    status, data, _headers = request(port, "POST", path, body, headers=headers)
    return status, json.loads(data) if data else None


def proc_state(pid: int) -> str | None:
    """The state letter of a process, None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    return proc_state(pid) not in (None, "Z", "X")


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return sorted(found)


def comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def cmdline_title(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()


def shards_drawn(stderr: str) -> int:
    """The last shard count the weights' bar has drawn (-1 before the bar). tqdm redraws at most every 0.1 s, so
    a fast load skips counts: a test waits for "at least n", never for one exact count."""
    counts = [int(found) for found in re.findall(r"Multi-thread loading shards: +\d+% Completed \| (\d+)/", stderr)]
    return counts[-1] if counts else -1


def logged_server_args(log: str) -> dict[str, Any]:
    """The settings of the first ``server_args={...}`` line (0.5.19+: the resolved dict, a Python literal)."""
    found = re.search(r"^\[[^\]]*\] server_args=(\{.*\})$", log, re.M)
    assert found, "no server_args={...} line in the log"
    parsed = ast.literal_eval(found.group(1))
    assert isinstance(parsed, dict)
    return parsed


def server_args(model: Path, port: int, *extra: str, tp: int = 8) -> list[str]:
    return ["--model-path", str(model), "--tp-size", str(tp), "--host", "127.0.0.1", "--port", str(port), *extra]


LaunchFn = Callable[..., "Server"]


class Server:
    """One `python -m sglang.launch_server` run in its own session, output captured to files."""

    def __init__(self, python: Path, args: Sequence[str], env: dict[str, str], workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = workdir / "stdout.txt"
        self.stderr_path = workdir / "stderr.txt"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [str(python), "-m", "sglang.launch_server", *args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=workdir, start_new_session=True,
            )
        self.port = int(args[list(args).index("--port") + 1]) if "--port" in args else 30000

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_bytes().decode(errors="replace")  # keep "\r" as written

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_bytes().decode(errors="replace")

    def running(self) -> bool:
        return self.proc.poll() is None

    def send(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait_exit(self, timeout: float = PATIENCE) -> int:
        return self.proc.wait(timeout=max(timeout, PATIENCE))

    def wait_log(self, text: str, timeout: float = PATIENCE) -> str:
        wait_for(lambda: text in self.stderr, timeout, what=repr(text))
        return self.stderr

    def wait_ready(self, timeout: float = 2 * PATIENCE) -> None:
        def ready() -> bool:
            assert self.running(), f"server exited {self.proc.returncode}:\n{self.stderr[-3000:]}"
            return get_status(self.port) == 200

        wait_for(ready, timeout, interval=0.05, what="health 200")

    def kill(self) -> None:
        """SIGKILL our session (the server and the children it spawned)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
