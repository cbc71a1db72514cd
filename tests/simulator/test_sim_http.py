"""The HTTP API of a ready server: info routes, generation, OpenAI routes, metrics, queueing, errors."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_for
from sim_helpers import (
    VERSION,
    LaunchFn,
    Server,
    free_port,
    get_json,
    get_status,
    post_json,
    request,
    server_args,
    sim_env,
)

NAME = "kimi-k2.5"


@pytest.fixture(scope="module")
def api(sim_python: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = free_port()
    args = server_args(model_dir, port, "--enable-metrics", "--served-model-name", NAME,
                       "--max-running-requests", "2", tp=2)
    server = Server(sim_python, args, sim_env(SGLANG_SIM_TOKEN_SECONDS="0.01"), tmp_path_factory.mktemp("api"))
    try:
        server.wait_ready()
        yield server
    finally:
        server.kill()


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M)
    assert match, name
    return float(match.group(1))


def metrics(port: int) -> str:
    status, body, headers = request(port, "GET", "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    return body.decode()


def test_info_routes(api: Server) -> None:
    for path in ("/model_info", "/get_model_info"):
        info = get_json(api.port, path)
        assert info["is_generation"] is True
        assert info["served_model_name"] == NAME
        assert info["model_path"] == info["tokenizer_path"]
    for path in ("/server_info", "/get_server_info"):
        info = get_json(api.port, path)
        assert info["version"] == f"{VERSION}+sim"
        assert info["tp_size"] == 2
        assert info["served_model_name"] == NAME
        assert info["max_running_requests"] == 2
        assert info["max_total_num_tokens"] == 154371 == info["internal_states"][0]["memory_usage"]["token_capacity"]
        assert info["status"] == "ready" and info["launch_command"].startswith("--model-path ")
    assert api.stderr.count("Endpoint '/get_server_info' is deprecated") == 1  # /server_info does not log
    models = get_json(api.port, "/v1/models")
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == [NAME]
    assert get_status(api.port, "/ready") == 200
    assert get_status(api.port, "/health_generate") == 200


def test_the_listen_backlog_is_uvicorns(api: Server) -> None:
    """The real server listens with uvicorn's default backlog, 2048 (uvicorn/config.py), capped by the kernel's
    somaxconn; a listening socket's Send-Q in ss is its backlog. (With socketserver's 5, a burst of
    connections lost SYNs on a busy machine and arrived seconds apart.)"""
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    listening = subprocess.run(["ss", "-Hltn", "sport", "=", f":{api.port}"], capture_output=True, text=True,
                               check=True).stdout.split()
    assert int(listening[2]) == min(2048, somaxconn), listening


def test_generate(api: Server) -> None:
    status, body = post_json(api.port, "/generate", {"text": "Hello there", "sampling_params": {"max_new_tokens": 5}})
    assert status == 200
    meta = body["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 5}
    assert meta["completion_tokens"] == 5
    assert meta["prompt_tokens"] > 0
    assert meta["e2e_latency"] >= 0.05
    assert body["text"]
    status, body = post_json(api.port, "/generate", {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 1}})
    assert status == 200
    assert body["meta_info"]["prompt_tokens"] == 3


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[]", {"sampling_params": {"max_new_tokens": 3}},
     {"text": "x", "sampling_params": {"max_new_tokens": -1}}, {"text": 5}],
)
def test_generate_rejects_bad_bodies(api: Server, body: object) -> None:
    status, data, _headers = request(api.port, "POST", "/generate", body)
    assert status == 400
    assert "message" in json.loads(data)["error"]


def test_openai_completions_and_chat(api: Server) -> None:
    status, body = post_json(api.port, "/v1/completions", {"model": NAME, "prompt": "Say hi", "max_tokens": 3})
    assert status == 200
    assert body["object"] == "text_completion"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 3
    chat = {"model": NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    status, body = post_json(api.port, "/v1/chat/completions", chat)
    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 4
    status, body = post_json(api.port, "/v1/chat/completions", {"model": NAME, "messages": "hi"})
    assert status == 400
    assert body["object"] == "error"


def test_streaming_chat_is_server_sent_events(api: Server) -> None:
    chat = {"model": NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": True}
    status, data, headers = request(api.port, "POST", "/v1/chat/completions", chat)
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    events = [line[len("data: "):] for line in data.decode().split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert len(chunks) == 5


def test_unknown_routes_and_methods(api: Server) -> None:
    assert request(api.port, "GET", "/nope")[0] == 404
    assert request(api.port, "POST", "/health")[0] == 405
    assert request(api.port, "GET", "/generate")[0] == 405


def test_metrics_count_requests_and_show_running_and_queue(api: Server) -> None:
    before = metrics(api.port)
    for family in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                   "sglang:max_total_num_tokens", "sglang:gen_throughput", "sglang:cache_hit_rate",
                   "sglang:num_used_tokens"):
        assert f"# TYPE {family} gauge" in before
        # SGLang 0.5.23's scheduler labels (tests/fixtures/metrics/sglang-0.5.23.json).
        labels = f'engine_type="unified",model_name="{NAME}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
        assert f"{family}{{{labels}}}" in before
    assert "# TYPE sglang:generation_tokens_total counter" in before
    assert "sglang:hicache_host_total_tokens" not in before
    assert metric(before, "sglang:max_total_num_tokens") == 154371

    def long_request() -> None:
        post_json(api.port, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 150}})

    threads = [threading.Thread(target=long_request) for _index in range(3)]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    busy = wait_for(lambda: (text := metrics(api.port)) and metric(text, "sglang:num_queue_reqs") == 1 and text,
                    5, what="a queued request")
    assert metric(busy, "sglang:num_running_reqs") == 2
    used = metric(busy, "sglang:num_used_tokens")
    assert used > 0  # token_usage is rounded to 2 decimals, as SGLang does: 0.0 for ~300 of 154,371 tokens
    assert metric(busy, "sglang:token_usage") == round(used / 154371, 2)
    for thread in threads:
        thread.join()
    after = metrics(api.port)
    assert metric(after, "sglang:num_running_reqs") == 0
    assert metric(after, "sglang:num_requests_total") == metric(before, "sglang:num_requests_total") + 3
    delta = metric(after, "sglang:generation_tokens_total") - metric(before, "sglang:generation_tokens_total")
    assert delta == 450
    assert metric(after, "sglang:gen_throughput") > 0


def test_api_key_is_enforced_except_on_health_and_metrics(launch: LaunchFn, model_dir: Path) -> None:
    port = free_port()
    server = launch(server_args(model_dir, port, "--api-key", "sekret", tp=1))
    server.wait_ready()
    good = {"Authorization": "Bearer sekret"}
    assert request(port, "GET", "/v1/models")[0] == 401
    assert request(port, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert request(port, "GET", "/v1/models", headers=good)[0] == 200
    status, body = post_json(port, "/generate", {"text": "x"})
    assert (status, body) == (401, {"error": "Unauthorized"})
    assert post_json(port, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 1}}, good)[0] == 200
    for path in ("/health", "/health_generate", "/ping"):
        assert get_status(port, path) == 200
    assert get_status(port, "/metrics") == 404  # not enabled: 404, not 401


def test_set_internal_state_is_all_or_nothing_and_read_back_in_internal_states(api: Server) -> None:
    """0.5.23's POST /set_internal_state (internal_state.py): a live key is set and shows in /server_info's
    internal_states while the top level keeps the launch's value; one refused key refuses the whole request (200,
    [false], the scheduler's warning), as the real server answered on this machine's CPU."""
    key = "speculative_accept_threshold_single"
    status, body, _headers = request(api.port, "POST", "/set_internal_state",
                                     json.dumps({"server_args": {key: 0.7}}).encode())
    assert (status, json.loads(body)) == (200, [True])
    info = get_json(api.port, "/server_info")
    assert info["internal_states"][0][key] == 0.7 and info.get(key, 1.0) == 1.0  # the launch value stays
    status, body, _headers = request(api.port, "POST", "/set_internal_state",
                                     json.dumps({"server_args": {key: 0.5, "page_size": 64}}).encode())
    assert (status, json.loads(body)) == (200, [False])
    assert get_json(api.port, "/server_info")["internal_states"][0][key] == 0.7  # nothing of it was set
    assert "Updating page_size is not supported." in api.stderr
