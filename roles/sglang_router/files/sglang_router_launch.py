"""Start sglang-router with its keys and register the inventory's servers with theirs.

sglang-router 0.3.x takes its keys only on its command line (``--api-key KEY``,
``--control-plane-api-keys id:name:role:KEY``), and a command line is readable by every user
(``/proc/<pid>/cmdline``, ``ps``, ``systemctl show -p ExecStart``). Workers given with ``--worker-urls`` are
sent the router's key, so a server with a key of its own answers every request the router forwards with
401. The unit therefore runs this file with the router's interpreter:

    <venv>/bin/python sglang_router_launch.py --workers FILE [--key FILE] [--admin-key FILE] [--ca FILE]
        -- <router flags...>

The files are written by the role, mode 0640, root:<router user>. ``--workers`` maps each of the inventory's
servers to the key it requires (empty for none)::

    {"workers": {"http://h:30000": "<key or empty>"}}

``--key`` holds the clients' key, one line: the router then requires it on its inference routes.
``--admin-key`` holds the control-plane admin key, one line: the router then requires it (and refuses the
clients' key) on its control plane (``/workers``, ``/flush_cache``, ``/wasm``, ``/v1/tokenizers``, ``/ha/*``).
``--ca`` names the CA the router's own certificate is verified against when the router serves https (its flags
``--tls-cert-path``/``--tls-key-path``): the registration then calls it over https, on the address it binds (or
127.0.0.1), which the certificate must name.
Given either option, a missing or empty file is an error: a router meant to require a key never starts open.

This process appends ``--api-key`` and ``--control-plane-api-keys deploy:sglang-deploy:admin:<key>`` to the
router's flags in memory only: the router runs in this process (its Rust core is a library), so its
``/proc/<pid>/cmdline`` is this launcher's, which names the files, not the keys. It starts a detached
process that waits for the router's ``/liveness`` and registers each worker through ``POST /workers`` with
the worker's own key, authorized by the admin key (else the clients' key), as the deploy's rolling restarts
do, and runs the router through the functions behind ``sglang-router launch``
(``sglang_router.launch_router``), which name the process ``sglang::router``. A process, not a thread: the
router's Rust core holds the interpreter lock while it serves, so a thread of this process would never run
(measured with sglang-router 0.3.2). It is forked twice, so that the service's main process need not reap
it; it stays in the unit's cgroup. No key is ever printed. Exit status 2 with a message when a file cannot
be used. Standard library only besides sglang_router.
"""

from __future__ import annotations

import functools
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

EXIT_USAGE = 2
READY_SECONDS = 300.0  # how long the registration waits for the router to answer
POLL_SECONDS = 0.5


class LaunchError(Exception):
    """The workers file cannot be used."""


def _key(value: Any, where: str) -> str | None:
    """A key as the file holds it: null or empty for none, else one word of printable ASCII."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or any(not ("!" <= c <= "~") for c in value):
        raise LaunchError(f"{where} is not one word of printable ASCII (the value is not shown)")
    return value


def read_workers(path: Path) -> list[tuple[str, str | None]]:
    """[(worker URL, worker key)] from the workers file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LaunchError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("workers", {}), dict):
        raise LaunchError(f"{path} is not an object with a mapping 'workers'")
    workers = []
    for url, key in data.get("workers", {}).items():
        if not url.startswith(("http://", "https://")):
            raise LaunchError(f"{path}: worker {url!r} is not an http(s) URL")
        workers.append((url.rstrip("/"), _key(key, f"{path}: the key of {url}")))
    return workers


def read_key(path: Path) -> str:
    """A key of the router: the file's one line, which must not be empty."""
    try:
        key = _key(path.read_text(encoding="ascii").removesuffix("\n"), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise LaunchError(f"cannot read the router's key file {path}: {exc}") from exc
    if key is None:
        raise LaunchError(f"the router's key file {path} is empty")
    return key


class Files(NamedTuple):
    """The files this launcher's command line names."""

    workers: Path
    key: Path | None = None
    admin_key: Path | None = None
    ca: Path | None = None


USAGE = ("usage: sglang_router_launch.py --workers FILE [--key FILE] [--admin-key FILE] [--ca FILE] "
         "-- <router flags...>")
_OPTIONS = {"--workers": "workers", "--key": "key", "--admin-key": "admin_key", "--ca": "ca"}
# Flags whose values come from the files, never from the command line.
_FROM_FILES = ("--api-key", "--control-plane-api-keys", "--worker-urls")
# The control-plane key's id and name (sglang-router's format id:name:role:key, split at the first three ':').
ADMIN_KEY_ID, ADMIN_KEY_NAME = "deploy", "sglang-deploy"


def parse(argv: list[str]) -> tuple[Files, list[str]]:
    """(the files, the router's flags) from this launcher's command line."""
    if "--" not in argv:
        raise LaunchError(USAGE)
    split = argv.index("--")
    own, router = argv[:split], argv[split + 1:]
    files: dict[str, Path] = {}
    while own:
        if len(own) < 2 or own[0] not in _OPTIONS or _OPTIONS[own[0]] in files:
            raise LaunchError(f"unexpected {own[0]!r}; {USAGE}")
        files[_OPTIONS[own[0]]], own = Path(own[1]), own[2:]
    if "workers" not in files:
        raise LaunchError("--workers FILE is required")
    return Files(**files), router


def with_keys(argv: list[str], key: str | None, admin_key: str | None = None) -> list[str]:
    """The router's flags with its keys appended: the clients' key as --api-key, the admin key as the
    control-plane key of the deploy. A key or worker list on the command line is refused."""
    for arg in argv:
        if arg.split("=", 1)[0] in _FROM_FILES:
            raise LaunchError(f"{arg.split('=', 1)[0]} is on the command line; it belongs in the key or workers file")
    if key and admin_key and key == admin_key:
        raise LaunchError("the admin key file holds the clients' key; the control plane needs a key of its own")
    flags = list(argv)
    if key:
        flags += ["--api-key", key]
    if admin_key:
        flags += ["--control-plane-api-keys", f"{ADMIN_KEY_ID}:{ADMIN_KEY_NAME}:admin:{admin_key}"]
    return flags


def local_url(host: str, port: int, tls: bool = False) -> str:
    """Where this host reaches the router it starts (https when the router serves TLS)."""
    if host in ("", "0.0.0.0"):  # the bind address, read: not binding
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    scheme = "https" if tls else "http"
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def tls_context(ca: Path | None) -> ssl.SSLContext | None:
    """The context that verifies the router's own certificate against its CA (None: plain http)."""
    if ca is None:
        return None
    try:
        return ssl.create_default_context(cafile=str(ca))
    except (OSError, ssl.SSLError) as exc:
        raise LaunchError(f"cannot read the router's CA file {ca}: {exc}") from exc


def _call(url: str, key: str | None, body: dict[str, Any] | None = None, timeout: float = 10,
          context: ssl.SSLContext | None = None) -> int:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
        return int(answer.status)


def register(base: str, key: str | None, workers: list[tuple[str, str | None]],
             clock: Any = time, call: Any = _call, log: Any = print) -> list[str]:
    """Wait for the router, then add each worker with its own key. Returns the URLs it added."""
    deadline = clock.monotonic() + READY_SECONDS
    while True:
        try:
            if call(base + "/liveness", None) == 200:
                break
        except (urllib.error.URLError, OSError):
            pass
        if clock.monotonic() >= deadline:
            log(f"sglang_router_launch: the router at {base} did not answer within {READY_SECONDS:.0f} s; "
                "no worker registered (the deploy registers them)")
            return []
        clock.sleep(POLL_SECONDS)
    added = []
    for url, worker_key in workers:
        body: dict[str, Any] = {"url": url}
        if worker_key:
            body["api_key"] = worker_key
        try:
            call(base + "/workers", key, body)
            added.append(url)
            log(f"sglang_router_launch: registered {url} ({'with' if worker_key else 'without'} a worker key)")
        except (urllib.error.URLError, OSError) as exc:
            log(f"sglang_router_launch: could not register {url}: {getattr(exc, 'code', '')} "
                f"{getattr(exc, 'reason', exc)}")
    return added


def main(argv: list[str]) -> int:
    try:
        files, flags = parse(argv)
        workers = read_workers(files.workers)
        key = read_key(files.key) if files.key else None
        admin_key = read_key(files.admin_key) if files.admin_key else None
        args = with_keys(flags, key, admin_key)
        context = tls_context(files.ca)
    except LaunchError as exc:
        print(f"sglang_router_launch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from sglang_router.launch_router import launch_router, parse_router_args

    router_args = parse_router_args(args)
    base = local_url(str(router_args.host), int(router_args.port), tls=bool(router_args.server_cert_path))
    # The worker API takes the admin key when the router has one; else the clients' key (or none).
    detached(register, base, admin_key or key, workers, call=functools.partial(_call, context=context), log=_log)
    launch_router(router_args)
    return 0


def detached(function: Any, *args: Any, **kwargs: Any) -> None:
    """Run function(*args, **kwargs) in a grandchild process; return once the child has exited."""
    child = os.fork()
    if child == 0:
        try:
            if os.fork() == 0:
                try:
                    function(*args, **kwargs)
                finally:
                    os._exit(0)
        finally:
            os._exit(0)
    os.waitpid(child, 0)


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
