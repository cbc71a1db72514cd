"""The engine scenario's drain drill, on a server host (run by hooks/drain_drill.yml in transient units).

    drain_drill.py request OUT   one long generation from the local server; its answer (or error) goes to OUT
    drain_drill.py release FILE  once the server logs SGLang's "SIGTERM received" in its journal after the cursor in
                                 FILE (taken before this starts, so no line is missed), continue its paused generation

The drill holds the long request in the engine (POST /pause_generation, mode in_place) from before the restart
until SIGTERM has reached the server, so the request is in flight at SIGTERM however fast this machine decodes;
then the drain lets it finish. It sends the server's keys, read from the secrets file the deploy wrote (root only
reads it; the keys pass through no argv and no Ansible output): the client key for the generation, the admin key
(else the client key) for /continue_generation. Standard library only; it talks to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

SERVER = "http://127.0.0.1:30000"
UNIT = "sglang-kimi.service"
SECRETS = "/etc/sglang/kimi.secrets.yaml"
# Held until SIGTERM whatever its length; 600 tokens take 2-25 s here once it goes on, as busy as the machine is.
LONG = {"text": "The drain drill", "sampling_params": {"max_new_tokens": 600, "ignore_eos": True, "temperature": 0}}


def keys() -> dict[str, str]:
    """The secrets file's keys (role sglang_service writes each as `name: <JSON string>`); none without the file."""
    try:
        with open(SECRETS, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return {}
    found = {}
    for line in lines:
        name, sep, value = line.partition(": ")
        if sep and not line.startswith("#"):
            found[name.strip()] = json.loads(value)
    return found


def post(path: str, body: dict[str, object], timeout: float, admin: bool = False) -> bytes:
    known = keys()
    key = (known.get("admin-api-key") if admin else None) or known.get("api-key")
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(SERVER + path, data=json.dumps(body).encode(), method="POST", headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


def request(out: str) -> int:
    try:
        answer = json.loads(post("/generate", LONG, timeout=900))
        result = {"ok": True, "meta_info": answer.get("meta_info", {})}
    except (OSError, ValueError) as error:
        result = {"ok": False, "error": str(error)}
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return 0 if result["ok"] else 1


def journal(*argv: str) -> str:
    return subprocess.run(["journalctl", "--no-pager", "-u", UNIT, *argv], capture_output=True, text=True,
                          check=True).stdout


def release(cursor_file: str) -> int:
    with open(cursor_file, encoding="utf-8") as handle:
        cursor = handle.read().rsplit("-- cursor: ", 1)[-1].strip()
    print(f"following {UNIT} after {cursor}", flush=True)
    while "SIGTERM received" not in journal("--after-cursor", cursor, "-o", "cat"):
        time.sleep(0.2)
    print(post("/continue_generation", {}, timeout=60, admin=True).decode(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(request(sys.argv[2]) if sys.argv[1] == "request" else release(sys.argv[2]))
