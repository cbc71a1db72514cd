"""sglang_router_workers: the plan, the wait, and the HTTP calls against a fake router on loopback."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.modules import sglang_router_workers as mod
from helpers import FakeClock, send_json


class FakeRouter(ThreadingHTTPServer):
    """The three endpoints of sglang-router 0.3.2 that the module uses; additions become healthy at once."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.workers: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []
        self.authorization: list[str | None] = []
        self.bodies: list[dict[str, Any]] = []


class Handler(BaseHTTPRequestHandler):
    server: FakeRouter

    def log_message(self, *args: Any) -> None:
        pass

    def reply(self, code: int, body: Any) -> None:
        send_json(self, code, body)

    def do_GET(self) -> None:
        self.server.authorization.append(self.headers.get("Authorization"))
        self.server.calls.append("GET " + self.path)
        self.reply(200, {"workers": list(self.server.workers.values()), "total": len(self.server.workers)})

    def do_POST(self) -> None:
        self.server.authorization.append(self.headers.get("Authorization"))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        url = body["url"]
        self.server.calls.append("POST " + url)
        worker = self.server.workers.setdefault(url, {"id": str(uuid.uuid4()), "url": url, "is_healthy": True})
        self.reply(202, {"status": "accepted", "worker_id": worker["id"]})

    def do_DELETE(self) -> None:
        worker_id = self.path.rsplit("/", 1)[-1]
        self.server.calls.append("DELETE " + worker_id)
        self.server.workers = {u: w for u, w in self.server.workers.items() if w["id"] != worker_id}
        self.reply(202, {"status": "accepted"})


@pytest.fixture
def router() -> Iterator[FakeRouter]:
    server = FakeRouter()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def client(server: FakeRouter) -> mod.Router:
    return mod.Router(f"http://127.0.0.1:{server.server_address[1]}/", None)


A, B, C = "http://a:30000", "http://b:30000", "http://c:30000"


def test_present_adds_only_what_is_missing_and_is_idempotent(router: FakeRouter) -> None:
    first = mod.run(client(router), [A, B], "present", True, 5, check=False)
    assert first["changed"] and first["added"] == [A, B]
    second = mod.run(client(router), [A, B], "present", True, 5, check=False)
    assert not second["changed"] and [c for c in router.calls if c.startswith("POST")] == [f"POST {A}", f"POST {B}"]


def test_absent_removes_by_id_and_waits_until_gone(router: FakeRouter) -> None:
    mod.run(client(router), [A, B], "present", True, 5, check=False)
    result = mod.run(client(router), [A + "/"], "absent", True, 5, check=False)
    assert result["removed"] == [A] and sorted(router.workers) == [B]


def test_exact_prunes_workers_not_in_the_inventory(router: FakeRouter) -> None:
    mod.run(client(router), [A, C], "present", True, 5, check=False)
    result = mod.run(client(router), [A, B], "exact", True, 5, check=False)
    assert result["added"] == [B] and result["removed"] == [C]
    assert result["diff"] == {"before": {"workers": [A, C]}, "after": {"workers": [A, B]}}
    assert sorted(router.workers) == [A, B]


def test_a_deferred_worker_is_not_added_but_one_listed_stays(router: FakeRouter) -> None:
    """deploy.yml defers the servers its plan restarts: one a failed rollout left out stays out until its turn
    adds it after its restart; one the router lists is neither removed (exact) nor waited for."""
    mod.run(client(router), [A, C], "present", True, 5, check=False)
    result = mod.run(client(router), [A, B, C], "exact", True, 5, check=False, defer=[B + "/", C])
    assert result["added"] == [] and result["removed"] == [] and not result["changed"]
    assert sorted(router.workers) == [A, C]
    later = mod.run(client(router), [A, B, C], "exact", True, 5, check=False)  # the rollout's turn adds it
    assert later["added"] == [B] and sorted(router.workers) == [A, B, C]


def test_check_mode_reports_without_writing(router: FakeRouter) -> None:
    result = mod.run(client(router), [A], "present", True, 5, check=True)
    assert result["changed"] and not router.workers
    assert result["diff"]["after"] == {"workers": [A]}


def test_the_module_sends_the_api_key_and_shows_a_diff_only_when_asked(router: FakeRouter, run_module: Any) -> None:
    args = {"router_url": f"http://127.0.0.1:{router.server_address[1]}", "workers": [A], "api_key": "s3cret"}
    result = run_module(mod.main, dict(args, _ansible_diff=True))
    assert result["changed"] and result["added"] == [A] and result["diff"]["after"] == {"workers": [A]}
    assert router.authorization == ["Bearer s3cret"] * len(router.calls)
    assert "s3cret" not in json.dumps(result)  # no_log: the key is not echoed in the invocation
    assert "diff" not in run_module(mod.main, args)


def test_each_worker_is_added_with_its_own_key_and_none_is_echoed(router: FakeRouter, run_module: Any) -> None:
    """The router sends a worker only the key it was added with (sglang-router 0.3.2: none if none)."""
    args = {"router_url": f"http://127.0.0.1:{router.server_address[1]}", "workers": [A, B + "/", C],
            "api_key": "router-key", "worker_api_keys": {A: "key-a", B + "/": "key-b", C: ""}}
    result = run_module(mod.main, args)
    assert router.bodies == [{"url": A, "api_key": "key-a"}, {"url": B, "api_key": "key-b"}, {"url": C}]
    assert router.authorization == ["Bearer router-key"] * len(router.calls)
    assert not [key for key in ("router-key", "key-a", "key-b") if key in json.dumps(result)]
    assert A in json.dumps(result)  # the URLs are not secrets: only the values of the mapping are hidden


def test_waiting_for_an_unhealthy_worker_times_out_with_the_listing() -> None:
    class Sick:
        base = "http://router"

        def workers(self) -> dict[str, dict[str, Any]]:
            return {A: {"url": A, "id": "1", "is_healthy": False}}

    with pytest.raises(mod.RouterError, match=r"did not settle within 3 s .*not yet healthy: \['http://a:30000'\]"):
        mod.run(Sick(), [A], "present", True, 3, check=False, clock=FakeClock())  # type: ignore[arg-type]


def test_an_unreachable_router_is_a_clear_error() -> None:
    with pytest.raises(mod.RouterError, match="GET /workers"):
        mod.Router("http://127.0.0.1:9", None, timeout=2).workers()


def test_check_mode_plans_against_an_empty_router_when_it_does_not_run_yet() -> None:
    """deploy.yml --check on a first install: the router's unit is not written, so nothing answers. The check
    says what it would register; a real run still fails on a router that does not answer."""
    down = mod.Router("http://127.0.0.1:9", None, timeout=2)
    result = mod.run(down, [A], "exact", True, 5, check=True)
    assert result["changed"] and result["added"] == [A] and result["removed"] == []
    assert result["msg"].startswith("router http://127.0.0.1:9 does not answer (GET /workers: ")
    with pytest.raises(mod.RouterDown, match="GET /workers"):
        mod.run(down, [A], "exact", True, 5, check=False)


def test_check_mode_still_fails_on_a_router_that_refuses_the_key(router: FakeRouter) -> None:
    class Refusing(mod.Router):
        def workers(self) -> dict[str, dict[str, Any]]:
            raise mod.RouterError("GET /workers: HTTP 401 unauthorized")
    with pytest.raises(mod.RouterError, match="401"):
        mod.run(Refusing(client(router).base, None), [A], "present", True, 5, check=True)


class Restarting:
    """A router that does not answer for its first `down` calls (its process restarts), then lists the workers
    its launcher registered, under new ids."""

    base = "http://router"

    def __init__(self, down: int, registered: list[str]) -> None:
        self.down, self.calls = down, []
        self.listing = {url: {"url": url, "id": f"new-{url}", "is_healthy": True} for url in registered}

    def _maybe_down(self, call: str) -> None:
        self.calls.append(call)
        if self.down > 0:
            self.down -= 1
            raise mod.RouterDown(f"{call}: [Errno 111] Connection refused")

    def workers(self) -> dict[str, dict[str, Any]]:
        self._maybe_down("GET /workers")
        return {url: dict(worker) for url, worker in self.listing.items()}

    def add(self, url: str, worker_key: str | None = None) -> None:
        self._maybe_down(f"POST {url}")
        self.listing[url] = {"url": url, "id": f"new-{url}", "is_healthy": True}

    def remove(self, worker_id: str) -> None:
        self._maybe_down(f"DELETE {worker_id}")
        self.listing = {u: w for u, w in self.listing.items() if w["id"] != worker_id}


def test_a_restarting_router_is_waited_for_and_each_write_made_against_its_new_list() -> None:
    router = Restarting(down=3, registered=[A, B])
    result = mod.run(router, [B], "absent", True, 30, check=False, clock=FakeClock())  # type: ignore[arg-type]
    assert result["removed"] == [B] and sorted(router.listing) == [A]
    assert router.calls[:3] == ["GET /workers"] * 3 and f"DELETE new-{B}" in router.calls
    assert result["router_down_s"] == 3
    # Down again between the listing and the write: the write waits, and finds the worker the launcher added.
    router = Restarting(down=0, registered=[A])
    original = router.workers

    def listing_then_restart() -> dict[str, dict[str, Any]]:
        answer = original()
        if len(router.calls) == 1:
            router.down, router.listing[B] = 2, {"url": B, "id": f"new-{B}", "is_healthy": True}
        return answer

    router.workers = listing_then_restart  # type: ignore[method-assign]
    result = mod.run(router, [B], "present", True, 30, check=False, clock=FakeClock())  # type: ignore[arg-type]
    assert result["added"] == [B] and not [call for call in router.calls if call.startswith("POST")]


def test_a_router_that_never_comes_back_fails_after_the_timeout() -> None:
    with pytest.raises(mod.RouterDown, match=r"router http://router did not answer within 5 s \(GET /workers"):
        mod.run(Restarting(down=100, registered=[]), [A], "present", True, 5, check=False,  # type: ignore[arg-type]
                clock=FakeClock())


def role_file(workers: dict[str, str]) -> str:
    """workers.json as role sglang_router writes it (tasks/run.yml: to_nice_json, then a newline)."""
    from ansible.plugins.filter.core import to_nice_json
    return to_nice_json({"workers": workers}) + "\n"


@pytest.mark.parametrize(("state", "wanted", "expected"), [
    ("absent", [B + "/"], {A: "key-a"}),
    ("present", [C], {A: "key-a", B: "key-b", C: "key-c"}),
    ("present", [B], {A: "key-a", B: "key-b"}),  # already there: its key stays
    ("exact", [A, C], {A: "key-a", C: "key-c"}),
])
def test_the_launchers_worker_file_follows_the_change_in_the_roles_format(
        tmp_path: Any, state: str, wanted: list[str], expected: dict[str, str]) -> None:
    path = tmp_path / "workers.json"
    path.write_text(role_file({A: "key-a", B: "key-b"}))
    path.chmod(0o640)

    class Module:
        check_mode = False

        @staticmethod
        def atomic_move(src: str, dest: str) -> None:
            import os
            import shutil
            mode = os.stat(dest).st_mode
            shutil.move(src, dest)
            os.chmod(dest, mode)

    keys = {C: "key-c"}
    changed = mod.follow_file(Module(), str(path), wanted, state, keys)  # type: ignore[arg-type]
    assert changed is (expected != {A: "key-a", B: "key-b"})
    assert path.read_text() == role_file(expected)
    assert path.stat().st_mode & 0o777 == 0o640
    Module.check_mode = True
    assert mod.follow_file(Module(), str(path), [A], "absent", {}) is True  # type: ignore[arg-type]
    assert path.read_text() == role_file(expected)  # check mode: told, not written


# --- a server that moves to another address (TLS turned on: the scheme; a new port) ---------------------------------
A_TLS, B_TLS = "https://a:30000", "https://b:30000"


def test_a_deploy_that_moves_every_server_to_https_keeps_them_at_their_earlier_address_until_their_turn(
        router: FakeRouter) -> None:
    """deploy.yml's router play defers the servers it restarts; their new (https) addresses are not added, and the
    old ones serve on, not pruned as strangers: the router never empties before the roll."""
    mod.run(client(router), [A, B, C], "present", True, 5, check=False)
    result = mod.run(client(router), [A_TLS, B_TLS, C], "exact", True, 5, check=False, defer=[A_TLS, B_TLS])
    assert result["added"] == [] and result["removed"] == [] and sorted(router.workers) == [A, B, C]
    # Its turn: the drain takes it out at its earlier address, the rejoin adds the new one; the other keeps serving.
    drained = mod.run(client(router), [A_TLS], "absent", True, 5, check=False)
    assert drained["removed"] == [A] and sorted(router.workers) == [B, C]
    back = mod.run(client(router), [A_TLS], "present", True, 5, check=False)
    assert back["added"] == [A_TLS] and set(router.workers) == {A_TLS, B, C}
    # A later router play, the roll done: nothing to change.
    assert not mod.run(client(router), [A_TLS, B, C], "exact", True, 5, check=False)["changed"]


def test_a_server_added_at_its_new_address_replaces_its_earlier_one_and_no_other(router: FakeRouter) -> None:
    mod.run(client(router), [A, B], "present", True, 5, check=False)
    result = mod.run(client(router), ["http://a:31000"], "present", True, 5, check=False)
    assert result["added"] == ["http://a:31000"] and result["removed"] == [A]
    assert sorted(router.workers) == ["http://a:31000", B]
    assert router.calls.index("POST http://a:31000") < len(router.calls) - 1  # added before the old one went


@pytest.mark.parametrize(("state", "wanted", "defer", "expected"), [
    # the router play of a deploy that moves A to https: A stays at its earlier address in the file
    ("exact", [A_TLS, B], [A_TLS], {A: "key-a", B: "key-b"}),
    # the drain of A (at its new address): its earlier address goes
    ("absent", [A_TLS], [], {B: "key-b"}),
    # the rejoin: the new address with its key, the earlier one replaced
    ("present", [A_TLS], [], {A_TLS: "key-a2", B: "key-b"}),
    # a deferred server with no earlier address is written at its new one, as before
    ("exact", [A, B, C], [C], {A: "key-a", B: "key-b", C: "key-c"}),
])
def test_the_launchers_file_keeps_a_deferred_server_at_its_earlier_address(
        state: str, wanted: list[str], defer: list[str], expected: dict[str, str]) -> None:
    keys = {A_TLS: "key-a2", B: "key-b", C: "key-c"}
    assert mod.launcher_workers({A: "key-a", B: "key-b"}, wanted, state, keys, set(defer)) == expected


def test_settled_waits_until_a_moved_servers_earlier_address_is_gone() -> None:
    listed = {A: {"is_healthy": True}, A_TLS: {"is_healthy": True}}
    assert not mod.settled(listed, [A_TLS], "present")
    assert mod.settled({A_TLS: {"is_healthy": True}}, [A_TLS], "present")
    assert not mod.settled({A: {"is_healthy": True}}, [A_TLS], "absent")
    assert mod.settled({A: {"is_healthy": True}, B: {"is_healthy": True}}, [A_TLS, B], "exact", (A_TLS,))
