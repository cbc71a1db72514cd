#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keep an sglang-router's worker list in step, through its HTTP API."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_router_workers
short_description: Add, remove or reconcile the workers of an sglang-router
author: sglang-deploy contributors (@sglang-deploy)
description:
  - Talks to the router's worker API (sglang-router / SGLang Model Gateway 0.3.x)
    C(GET /workers), C(POST /workers), C(DELETE /workers/{id}). Both writes are asynchronous on the
    router's side; with O(wait) the module waits until the list shows the result.
  - Idempotent. A worker is identified by its URL (a trailing slash is ignored).
  - Run it on a host that reaches the router (usually the router host itself, C(delegate_to)).
  - A router that does not answer (restarted by systemd or an operator while a rollout runs) is waited for,
    up to O(timeout); each write is made again against the list it then shows. With O(workers_file) the
    launcher's worker file follows every change first, so a router that restarts registers exactly the
    workers the rollout left in (a server out for its restart stays out).
version_added: "1.0.0"
options:
  router_url:
    description:
      - Base URL of the router, for example C(http://127.0.0.1:30080); C(https://127.0.0.1:30080) when the router
        serves TLS (role sglang_router, C(sglang_router_tls_cert)).
    type: str
    required: true
  router_ca:
    description:
      - With an C(https) O(router_url), the PEM file (on the host the module runs on) of the CA the router's
        certificate is verified against; the certificate must name the host of O(router_url). Empty uses the
        system's CAs.
    type: path
    version_added: "2.0.0"
  workers:
    description: Worker URLs, for example C(http://10.0.0.11:30000).
    type: list
    elements: str
    default: []
  state:
    description:
      - C(present) adds the workers that are missing, C(absent) removes the given workers,
        C(exact) also removes every registered worker that is not in O(workers).
    type: str
    choices: [present, absent, exact]
    default: present
  wait:
    description: Wait until the present workers are listed healthy and the absent ones are gone.
    type: bool
    default: true
  timeout:
    description: Seconds to wait.
    type: int
    default: 120
  api_key:
    description:
      - The key that authorizes the router's worker API, sent as a bearer token, never logged - its control-plane
        admin key when it has one (C(--control-plane-api-keys), role C(sglang_router)'s
        C(sglang_router_admin_api_key)); else its API key (C(--api-key)), if it was started with one. A router with
        a control-plane key refuses its clients' key here (HTTP 401).
    type: str
  worker_api_keys:
    description:
      - The key each worker requires, by worker URL (empty for none); sent with C(POST /workers) so that the
        router sends it to that worker. The router gives a worker added without one no key at all, and a
        server that requires a key then answers every request the router forwards with 401
        (sglang-router 0.3.2, measured). Never logged.
      - A worker already listed keeps the key it was added with; take it out and put it back to change it.
    type: dict
    default: {}
  defer:
    description:
      - Workers of O(workers) not to add now when the router does not list them, because a rollout will restart
        them and add them once they serve (C(deploy.yml) passes the servers its plan restarts). A server a
        failed rollout left out of the router (drained, maybe half-changed) then stays out until its turn,
        instead of taking traffic in between. A deferred worker the router lists stays; O(state=exact) does
        not remove it, and O(wait) does not wait for it.
      - One server per host - a listed worker at the host of a worker of O(workers) under another URL is that
        server at its earlier address (turning TLS on changes the scheme, a new port the port). O(state=exact) keeps
        a deferred worker's earlier address until its turn; O(state=absent) removes the earlier address too; a
        worker added replaces its earlier address (added first, then the old one removed).
    type: list
    elements: str
    default: []
  workers_file:
    description:
      - The launcher's worker file on this host (role sglang_router, C(/etc/sglang-router/workers.json)), whose
        C(workers) mapping (URL to key) is changed like the router's list, before it, in the format the role
        writes it; its owner and mode are kept. Unset, or no such file, no file is changed.
    type: path
extends_documentation_fragment: sglang.deploy.attributes
attributes:
  check_mode:
    support: full
    details: Reports the workers it would add and remove, and changes nothing.
  diff_mode:
    support: full
    details: The router's worker URLs before and after (as they would be, in check mode).
"""

EXAMPLES = r"""
- name: Take a worker out before its restart
  sglang.deploy.sglang_router_workers:
    router_url: http://127.0.0.1:30080
    workers: [http://10.0.0.11:30000]
    state: absent
  delegate_to: router-1

- name: Keep the router's list equal to the inventory
  sglang.deploy.sglang_router_workers:
    router_url: http://127.0.0.1:30080
    workers: "{{ groups['sglang_workers'] | map('extract', hostvars, ['sglang_config', 'url']) | list }}"
    state: exact
    wait: false

- name: Register the inventory's servers, but not the ones a rollout restarts that are out of the router now
  sglang.deploy.sglang_router_workers:
    router_url: http://127.0.0.1:30080
    workers: [http://10.0.0.11:30000, http://10.0.0.12:30000]
    defer: [http://10.0.0.12:30000]
    state: exact
    wait: false

- name: Put back a server that requires a key, behind a router whose control plane requires the deploy's key
  sglang.deploy.sglang_router_workers:
    router_url: http://127.0.0.1:30080
    api_key: "{{ sglang_router_admin_api_key }}"
    workers: [http://10.0.0.11:30000]
    worker_api_keys: {"http://10.0.0.11:30000": "{{ sglang_api_key }}"}
"""

RETURN = r"""
added:
  description: Worker URLs this run asked the router to add (would add, in check mode).
  type: list
  elements: str
  returned: always
  sample: ["http://10.0.0.11:30000"]
removed:
  description: Worker URLs this run asked the router to remove (would remove, in check mode).
  type: list
  elements: str
  returned: always
  sample: ["http://10.0.0.12:30000"]
workers:
  description: The router's list at the end.
  type: list
  elements: dict
  returned: always
  sample: [{"url": "http://10.0.0.11:30000", "id": "6f1c2d3e", "is_healthy": true, "load": 0}]
  contains:
    url:
      description: Worker URL, without a trailing slash.
      type: str
      sample: http://10.0.0.11:30000
    id:
      description: The router's id of the worker.
      type: str
      sample: 6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f
    is_healthy:
      description: The router counts the worker healthy.
      type: bool
      sample: true
    load:
      description: The router's load figure for the worker; null when it gives none.
      type: int
      sample: 0
workers_file_changed:
  description: Whether O(workers_file) was (or, in check mode, would be) changed.
  type: bool
  returned: always
  sample: true
router_down_s:
  description: Seconds this run waited for a router that did not answer.
  type: float
  returned: always
  sample: 0.0
msg:
  description:
    - In check mode when the router does not answer (it is not running yet, as on a first install), why the
      plan assumes it starts with no worker.
  type: str
  returned: in check mode, when the router does not answer
  sample: >-
    router http://127.0.0.1:30080 does not answer (GET /workers: [Errno 111] Connection refused); as it would
    start empty
"""

import json
import os
import tempfile
import time
from http.client import HTTPException
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import open_url


class RouterError(Exception):
    """The router did not answer as its API says."""


class RouterDown(RouterError):
    """The router does not answer at all (not running, or not reachable)."""


class Router:
    def __init__(self, base: str, api_key: str | None, timeout: float = 10, ca_path: str | None = None) -> None:
        self.base = base.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.ca_path = ca_path or None

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            with open_url(self.base + path, data=data, headers=headers, method=method, timeout=self.timeout,
                          ca_path=self.ca_path) as answer:
                text = answer.read().decode() or "null"
        except HTTPError as exc:
            raise RouterError(f"{method} {path}: HTTP {exc.code} {exc.read().decode(errors='replace')[:300]}") from exc
        except (URLError, OSError, HTTPException, UrlsConnectionError) as exc:
            raise RouterDown(f"{method} {path}: {getattr(exc, 'reason', exc)}") from exc
        try:
            return json.loads(text)
        except ValueError as exc:
            raise RouterError(f"{method} {path}: not JSON: {text[:200]}") from exc

    def workers(self) -> dict[str, dict[str, Any]]:
        listing = self.call("GET", "/workers")
        return {norm(w["url"]): {"url": norm(w["url"]), "id": w.get("id"), "is_healthy": bool(w.get("is_healthy")),
                                 "load": w.get("load")} for w in listing.get("workers", [])}

    def add(self, url: str, worker_key: str | None = None) -> None:
        self.call("POST", "/workers", {"url": url, "api_key": worker_key} if worker_key else {"url": url})

    def remove(self, worker_id: str) -> None:
        self.call("DELETE", f"/workers/{worker_id}")


def norm(url: str) -> str:
    return str(url).rstrip("/")


def worker_keys_of(keys: dict[str, Any] | None) -> dict[str, str]:
    """The non-empty worker keys, by normalized URL."""
    return {norm(url): str(key) for url, key in (keys or {}).items() if key}


def host_of(url: str) -> str:
    """A worker URL's host: one server per host, so a listed URL of a wanted worker's host that is not that URL is
    the same server at its earlier address (TLS turned on changes the scheme, a new port the port)."""
    return (urlsplit(url).hostname or "").lower()


def earlier(current: dict[str, dict[str, Any]], urls: list[str] | tuple[str, ...], wanted: list[str]) -> list[str]:
    """The listed URLs that are an earlier address of one of ``urls`` (same host, not wanted)."""
    hosts = {host_of(url) for url in urls}
    return [url for url in current if url not in wanted and host_of(url) in hosts]


def plan(current: dict[str, dict[str, Any]], wanted: list[str], state: str,
         defer: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(to add, to remove) for the requested state; a deferred worker the router does not list is not added, and
    its earlier address stays until its turn (the rollout drains and replaces it). Absent removes a worker at its
    earlier address too; an added worker replaces its earlier address (added first, then the old one removed)."""
    if state == "absent":
        return [], [url for url in current if url in wanted] + earlier(current, wanted, wanted)
    add = [url for url in wanted if url not in current and url not in defer]
    remove = earlier(current, add, wanted)
    if state == "exact":
        moving = {host_of(url) for url in defer}
        remove += [url for url in current if url not in wanted and url not in remove and host_of(url) not in moving]
    return add, remove


def settled(current: dict[str, dict[str, Any]], wanted: list[str], state: str, defer: tuple[str, ...] = ()) -> bool:
    if state == "absent":
        return not any(url in current for url in wanted) and not earlier(current, wanted, wanted)
    serving = [url for url in wanted if url not in defer]
    present = all(url in current and current[url]["is_healthy"] for url in serving)
    moving = {host_of(url) for url in defer}
    extra = earlier(current, serving, wanted) or (
        state == "exact" and any(url not in wanted and host_of(url) not in moving for url in current))
    return present and not extra


class Waiter:
    """Calls the router until it answers, up to a deadline, and counts the seconds it did not."""

    def __init__(self, router: Router, timeout: int, clock: Any) -> None:
        self.router, self.timeout, self.clock = router, timeout, clock
        self.deadline, self.down = clock.time() + timeout, 0.0

    def answer(self, call: Any) -> Any:
        first = None
        while True:
            try:
                result = call()
            except RouterDown as exc:
                now = self.clock.time()
                first = now if first is None else first
                if now >= self.deadline:
                    raise RouterDown(f"router {self.router.base} did not answer within {self.timeout} s "
                                     f"({exc})") from exc
                self.clock.sleep(1)
                continue
            if first is not None:
                self.down += self.clock.time() - first
            return result


def change(router: Router, url: str, add: bool, key: str | None) -> None:
    """Add or remove one worker against the list the router shows now (after a restart its ids are new, and
    its launcher may have registered the worker already)."""
    listed = router.workers()
    if add and url not in listed:
        router.add(url, key)
    elif not add and url in listed:
        router.remove(listed[url]["id"])


def run(router: Router, wanted: list[str], state: str, wait: bool, timeout: int, check: bool,
        clock: Any = time, worker_keys: dict[str, str] | None = None, defer: list[str] | None = None) -> dict[str, Any]:
    wanted = [norm(url) for url in wanted]
    deferred = tuple(norm(url) for url in defer or ())
    keys = worker_keys_of(worker_keys)
    waiter = Waiter(router, timeout, clock)
    try:
        current = router.workers() if check else waiter.answer(router.workers)
    except RouterDown as exc:
        if not check:
            raise
        # --check on a host where the router is not running yet (a first install): it would start with
        # none of these servers.
        current, note = {}, f"router {router.base} does not answer ({exc}); as it would start empty"
    else:
        note = ""
    add, remove = plan(current, wanted, state, deferred)
    diff = {"before": {"workers": sorted(current)}, "after": {"workers": sorted(set(current) - set(remove) | set(add))}}
    if not check:
        for url in add:
            waiter.answer(lambda url=url: change(router, url, True, keys.get(url)))
        for url in remove:
            waiter.answer(lambda url=url: change(router, url, False, None))
    while wait and not check:
        current = waiter.answer(router.workers)
        if settled(current, wanted, state, deferred):
            break
        if clock.time() >= waiter.deadline:
            pending = [u for u in wanted if state != "absent" and u not in deferred
                       and not current.get(u, {}).get("is_healthy")]
            raise RouterError(f"router {router.base} did not settle within {timeout} s "
                              f"(state {state}; not yet healthy: {pending or 'none'}; "
                              f"listed: {sorted(current)})")
        clock.sleep(1)
    return {"changed": bool(add or remove), "added": add, "removed": remove, "workers": list(current.values()),
            "diff": diff, "router_down_s": waiter.down, **({"msg": note} if note else {})}


def launcher_workers(before: dict[str, str], wanted: list[str], state: str, keys: dict[str, str],
                     deferred: set[str]) -> dict[str, str]:
    """The launcher's worker mapping (URL -> key) after the change: what a router that restarts then registers."""
    if state == "absent":
        after = {url: key for url, key in before.items() if url not in wanted}
        return {url: key for url, key in after.items() if url not in earlier(after, wanted, wanted)}
    # A deferred server still listed at its earlier address stays there until its turn.
    waiting = [url for url in wanted if url in deferred and url not in before and earlier(before, [url], wanted)]
    kept = earlier(before, waiting, wanted)
    after = dict(before) if state == "present" else {url: before[url] for url in kept}
    after.update({url: keys.get(url, before.get(url, "")) for url in wanted if url not in waiting})
    replaced = earlier(after, [url for url in wanted if url not in waiting], wanted)
    return {url: key for url, key in after.items() if url not in replaced}


def follow_file(module: AnsibleModule, path: str, wanted: list[str], state: str, keys: dict[str, str],
                defer: list[str] | None = None) -> bool:
    """Change the launcher's worker file as the router's list changes (plan's rules: a deferred server stays at its
    earlier address until its turn); whether it changed (would, in check)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return False  # a router this collection did not set up: no launcher, no file
    except (OSError, ValueError) as exc:
        raise RouterError(f"workers_file {path}: {exc}") from exc
    before = {norm(url): key for url, key in dict(data.get("workers") or {}).items()}
    after = launcher_workers(before, [norm(url) for url in wanted], state, keys, {norm(url) for url in defer or ()})
    if after == before:
        return False
    if not module.check_mode:
        text = json.dumps({**data, "workers": after}, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".workers.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        module.atomic_move(temp, path)  # keeps the file's owner, group and mode
    return True


ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "router_url": {"type": "str", "required": True},
    "router_ca": {"type": "path"},
    "workers": {"type": "list", "elements": "str", "default": []},
    "state": {"type": "str", "choices": ["present", "absent", "exact"], "default": "present"},
    "wait": {"type": "bool", "default": True},
    "timeout": {"type": "int", "default": 120},
    "api_key": {"type": "str", "no_log": True},
    "worker_api_keys": {"type": "dict", "default": {}, "no_log": True},
    "workers_file": {"type": "path"},
    "defer": {"type": "list", "elements": "str", "default": []},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    try:
        # The file first: a router that restarts in between registers what the rollout wants.
        moved = (follow_file(module, p["workers_file"], p["workers"], p["state"], worker_keys_of(p["worker_api_keys"]),
                             p["defer"]) if p["workers_file"] else False)
        router = Router(p["router_url"], p["api_key"], ca_path=p["router_ca"])
        result = run(router, p["workers"], p["state"], p["wait"], p["timeout"], module.check_mode,
                     worker_keys=p["worker_api_keys"], defer=p["defer"])
    except RouterError as exc:
        module.fail_json(msg=str(exc))
    result["workers_file_changed"] = moved
    result["changed"] = result["changed"] or moved
    if not module._diff:
        del result["diff"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
