"""Fixtures for the SGLang simulator tests: the wheel, a venv with it installed, a model, servers."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from sim_helpers import VERSION, LaunchFn, Server, build_wheel, kimi_config, sim_env, write_model


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheelhouse"))


@pytest.fixture(scope="session")
def sim_package(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[ModuleType]:
    """The simulator package as the wheel installs it (with its copy of the capacity planner), imported
    into this test process for the tests of its pure functions."""
    site = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        import sglang._sim

        yield sglang._sim
        for name in [name for name in sys.modules if name == "sglang" or name.startswith("sglang.")]:
            del sys.modules[name]


@pytest.fixture(scope="session")
def sim_python(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh venv with the wheel installed the production way (pip, no index, find-links)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheel.parent),
         f"sglang=={VERSION}"],
        check=True, env=env,
    )
    return python


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Kimi-K2.5-style model: MLA config.json and an index naming 64 shards."""
    return write_model(tmp_path_factory.mktemp("models") / "kimi-k2.5", kimi_config())


@pytest.fixture
def launch(sim_python: Path, tmp_path: Path) -> Iterator[LaunchFn]:
    """Start servers; every one is SIGKILLed (with its children) when the test ends."""
    started: list[Server] = []

    def start(args: list[str], python: Path | None = None, **env: str) -> Server:
        server = Server(python or sim_python, args, sim_env(**env), tmp_path / f"server{len(started)}")
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()
