"""What several test files share: the repository root, loading a script that runs outside Ansible (on a
host, in a virtualenv, or a tool), rendering the example inventory, the example's resolve inputs,
waiting on observable state (``wait_for``), and the ansible-core controllers the tests run on (``CONTROLLERS``).

The collection's own code (plugins/) is imported by its FQCN, ``ansible_collections.sglang.deploy``;
pytest finds it through ``pythonpath`` in pyproject.toml (.cache/collections, where scripts/setup.sh
links this checkout). Scripts are not Python packages: ``load_script`` is the one place that loads one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CATALOGS = ROOT / "roles" / "sglang_config" / "files" / "catalogs"


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """Import a standalone script (a role's file, a tool, a test resource) as a module, for its functions."""
    module_name = name or f"script_{path.stem}_under_test"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


# The simulator's argparse double of SGLang's parser, built from a flag catalog: a test double, so it lives with
# the simulator and not in plugins/module_utils (standard library only; loaded by its path).
SIM_ARGPARSER = ROOT / "extensions/molecule/resources/simulator/src/sglang/_sim/argparser.py"


def catalog_parser() -> ModuleType:
    """The simulator's ``argparser`` module (``build_parser(catalog)``), loaded once."""
    return sys.modules.get("sim_argparser_under_test") or load_script(SIM_ARGPARSER, "sim_argparser_under_test")


# The ansible-core releases the tests run the collection on (meta/runtime.yml's range), by the bin directory of each
# controller: this pytest's own (requirements.txt), and the venvs scripts/setup.sh makes from
# requirements-core-2.20.txt and requirements-core-2.21.txt (Python 3.12 and 3.13).
CONTROLLERS: dict[str, Path] = {
    "2.19": Path(sys.executable).parent,
    "2.20": ROOT / ".cache" / "core-2.20" / "bin",
    "2.21": ROOT / ".cache" / "core-2.21" / "bin",
}


def controller(release: str) -> Path:
    """The bin directory of the ansible-core ``release`` controller (its python, ansible, ansible-playbook); a
    missing one fails the test, as any other missing part of the toolchain would."""
    bin_dir = CONTROLLERS[release]
    assert (bin_dir / "ansible-playbook").exists(), (
        f"no ansible-core {release} controller in {bin_dir.parent}: run `make setup` (scripts/setup.sh installs "
        f"requirements-core-{release}.txt there)")
    return bin_dir


def controller_python(release: str) -> Path:
    """The Python of the ``release`` controller: this pytest's own for 2.19, else the venv's."""
    bin_dir = controller(release)
    return Path(sys.executable) if bin_dir == Path(sys.executable).parent else bin_dir / "python"


def ansible_playbook(*args: str, release: str | None = None) -> subprocess.CompletedProcess[str]:
    """ansible-playbook with this checkout's ansible.cfg, from its root; on the ``release`` controller if given."""
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    if release is None:
        command = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    else:
        command = str(controller(release) / "ansible-playbook")
    return subprocess.run([command, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def run_example(playbook: str, *extra: str, release: str | None = None) -> subprocess.CompletedProcess[str]:
    """A playbook of this checkout against inventory/example (later -i options win), offline."""
    return ansible_playbook(playbook, "-i", "inventory/example", *extra, release=release)


def render(tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """playbooks/render.yml for inventory/example into tmp, offline."""
    return run_example("playbooks/render.yml", "-e", f"render_dir={tmp}", *extra)


# The resolve step's inputs for the example inventory, as roles/sglang_config/vars/main.yml passes them.
BASE: dict[str, Any] = {
    "sglang_version": "0.5.23", "sglang_instance": "kimi", "sglang_model_path": "/models/Kimi-K2.5",
    "sglang_served_model_name": "kimi-k2.5", "sglang_tp_size": 8, "sglang_host": "0.0.0.0",
    "sglang_port": 30000, "sglang_mem_fraction_static": 0.85, "sglang_kv_cache_dtype": "auto",
    "sglang_hicache_enabled": True, "sglang_hicache_ratio": 2.0, "sglang_hicache_size": None,
    "sglang_hicache_write_policy": "write_through", "sglang_hicache_io_backend": "kernel",
    "sglang_hicache_mem_layout": None, "sglang_hicache_storage_backend": None,
    "sglang_speculative_algorithm": "EAGLE3", "sglang_speculative_draft_model_path": "/models/draft",
    "sglang_speculative_num_steps": 3, "sglang_speculative_eagle_topk": 1,
    "sglang_speculative_num_draft_tokens": 4, "sglang_enable_metrics": True,
    "sglang_extra_args": {}, "sglang_env": {}, "sglang_numa_bind": "off",
    "sglang_venv_dir": "/opt/sglang/0.5.23/venv", "sglang_cuda_version": "13.0",
    # The example sets both keys (a server on 0.0.0.0 without a client key is refused): whether, never what.
    "secrets": {"api_key": True, "admin_api_key": True, "file": "/etc/sglang/kimi.secrets.yaml"},
}


class FakeClock:
    """A clock that moves only when the code under test sleeps: waits and timeouts without real time."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


# The least time any wait is given before it fails. A wait ends as soon as its state is observed, so this bound
# only decides when a broken server is declared broken: a busy machine (pytest -n 2 beside the linters) may make
# a start take many times longer, and must never make a test fail.
PATIENCE = 60.0


def send_json(handler: Any, code: int, body: Any) -> None:
    """Answer an http.server request with a JSON body: what the fake SGLang servers and routers of the tests send."""
    data = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.05, what: str = "condition") -> Any:
    timeout = max(timeout, PATIENCE)
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def fake_proc(root: Path, processes: dict[str, list[str]]) -> Path:
    """A /proc with the given argv per PID, as the kernel writes cmdline (NUL after each argument)."""
    (root / "self").mkdir(parents=True)  # not a PID: skipped
    for pid, argv in processes.items():
        (root / pid).mkdir()
        (root / pid / "cmdline").write_bytes(b"".join(arg.encode() + b"\0" for arg in argv))
    return root
