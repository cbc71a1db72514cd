"""The HTTP API of the simulated server (stdlib ThreadingHTTPServer, HTTP/1.1, JSON).

Routes, status codes and bodies follow SGLang's FastAPI app (0.5.23 srt/entrypoints/http_server.py): /health and
/health_generate run a 1-token generation and answer 503 before warm-up ends and while draining, /ping always
answers 200, /server_info (and the deprecated /get_server_info, which logs so) the resolved server args with the
scheduler's and tokenizer's state, the OpenAI routes OpenAI-shaped JSON (or SSE with "stream": true).
"""

from __future__ import annotations

import http
import http.client
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sglang._sim import logs, metrics
from sglang._sim import messages as msg
from sglang._sim.engine import Engine, Generation, estimate_tokens
from sglang._sim.metrics import Constants, Ranks
from sglang._sim.model import ModelInfo
from sglang._sim.settings import Settings

Writer = Callable[[bytes], None]
Stream = Callable[[Writer], None]
AUTH_EXEMPT = ("/health", "/health_generate", "/ping", "/metrics")
# POST /set_internal_state's config keys (0.5.23 srt/managers/scheduler_components/internal_state.py,
# _update_handlers): set as context overrides, which /server_info's internal_states show. Its two DSpark keys need a
# DSpark worker, which the simulator never is: refused, as a server without one refuses them.
LIVE_KEYS = ("pp_max_micro_batch_size", "speculative_accept_threshold_single", "speculative_accept_threshold_acc")
ADMIN_OPTIONAL = ("/set_internal_state",)
GENERATION_PATHS = ("/generate", "/v1/completions", "/v1/chat/completions")


class BadRequest(Exception):
    """The request body is unusable (400)."""


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    stream: Stream | None = None


def json_response(status: int, payload: Any) -> Response:
    return Response(status, json.dumps(payload).encode())


def empty(status: int) -> Response:
    return Response(status, b"", "text/plain; charset=utf-8")


def not_found() -> Response:
    return json_response(404, {"detail": "Not Found"})


def openai_error(message: str, status: int = 400) -> Response:
    return json_response(status, {"object": "error", "message": message,
                                  "type": "BadRequestError", "param": None, "code": status})


def sse(payload: Any) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return (f"data: {text}\n\n").encode()


@dataclass
class Info:
    """What /server_info reports besides the server args (the scheduler's info and the startup)."""
    resolved: dict[str, Any]           # ServerArgs.resolved_dict(), secrets redacted
    launch_command: str
    startup_time: dict[str, Any]
    memory_usage: dict[str, Any]
    decode_graph_bs: list[int] = field(default_factory=list)
    freeze_gc: bool = True             # the warm-up's POST /freeze_gc (0.5.23)


@dataclass
class State:
    """What the routes read: the parsed server args and the live server state."""
    args: dict[str, Any]
    model: ModelInfo
    settings: Settings
    engine: Engine
    version: str
    ready_route: bool
    info: Info
    ranks: Ranks
    constants: Constants
    host_pool_tokens: int | None = None
    dropped_reasons: tuple[str, ...] = ()  # HiCache's pre-seeded hicache_dropped_tokens_total reasons
    overrides: dict[str, Any] = field(default_factory=dict)  # set by POST /set_internal_state
    graph_label: str = "cuda graph"    # "cpu graph" on --device cpu (metrics_reporter.py:286-290)
    ready: threading.Event = field(default_factory=threading.Event)
    created: float = field(default_factory=time.time)
    last_prefill: float = field(default_factory=time.perf_counter)

    @property
    def served_name(self) -> str:
        return str(self.args.get("served_model_name") or self.args.get("model_path"))

    @property
    def max_req_input_len(self) -> int:
        """tp_worker.py:568-572: min(context_len - 1, KV pool - 1) - 5."""
        return min(int(self.args["context_length"]) - 1, self.engine.max_total_tokens - 1) - 5


def _int_field(body: dict[str, Any], key: str, default: int | None) -> int | None:
    value = body.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"{key} must be a non-negative integer, got {value!r}")
    return value


def _prompt_tokens(value: Any) -> int:
    if isinstance(value, str):
        return estimate_tokens(value)
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return len(value)
    raise BadRequest("prompt must be a string or a list of token ids")


class Api:
    """The route table of the main server (node 0)."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.get_routes: dict[str, Callable[[], Response]] = {
            "/health": self.health, "/health_generate": self.health, "/ping": self.ping,
            "/model_info": self.model_info, "/get_model_info": deprecated("model_info", self.model_info),
            "/server_info": self.server_info, "/get_server_info": deprecated("server_info", self.server_info),
            "/v1/models": self.models,
        }
        if state.ready_route:
            self.get_routes["/ready"] = self.health
        if state.args.get("enable_metrics"):
            self.get_routes["/metrics"] = self.metrics
        self.post_routes: dict[str, Callable[[dict[str, Any]], Response]] = {
            "/generate": self.generate, "/v1/completions": self.completions,
            "/v1/chat/completions": self.chat, "/set_internal_state": self.set_internal_state,
        }
        if state.info.freeze_gc:  # GET and POST (http_server.py:1254-1264)
            self.get_routes["/freeze_gc"] = self.freeze_gc
            self.post_routes["/freeze_gc"] = lambda _body: self.freeze_gc()

    # ---- dispatch ---------------------------------------------------------------------
    def authorized(self, path: str, headers: Any) -> bool:
        # ADMIN_OPTIONAL routes take the admin key when the server has one, else its API key (srt/utils/auth.py).
        admin = self.state.args.get("admin_api_key")
        key = admin if path in ADMIN_OPTIONAL and admin else self.state.args.get("api_key")
        if not key or path in AUTH_EXEMPT:
            return True
        return headers.get("Authorization") == f"Bearer {key}"

    def dispatch(self, method: str, path: str, headers: Any, body: bytes) -> Response:
        if not self.authorized(path, headers):
            return json_response(401, {"error": "Unauthorized"})
        if method in ("GET", "HEAD") and path in self.get_routes:
            return self.get_routes[path]()
        if method in ("POST", "PUT") and path in self.post_routes:
            if method == "PUT" and path not in ("/generate", "/set_internal_state"):
                return json_response(405, {"detail": "Method Not Allowed"})
            return self._post(path, body)
        if path in self.get_routes or path in self.post_routes:
            return json_response(405, {"detail": "Method Not Allowed"})
        return not_found()

    def _post(self, path: str, body: bytes) -> Response:
        if path == "/freeze_gc":
            return self.freeze_gc()
        try:
            payload = json.loads(body.decode("utf-8") or "null")
            if not isinstance(payload, dict):
                raise BadRequest("the request body must be a JSON object")
            return self.post_routes[path](payload)
        except (BadRequest, ValueError) as error:
            if path == "/generate":
                return json_response(400, {"error": {"message": str(error)}})
            return openai_error(str(error))

    # ---- GET routes -------------------------------------------------------------------
    def health(self) -> Response:
        state = self.state
        if state.engine.draining.is_set():
            logs.log(msg.HEALTH_DURING_SHUTDOWN)
            return empty(503)
        if not state.ready.is_set():
            return empty(503)
        self._log_prefill(1)  # the health check's own request: input_ids=[0], max_new_tokens=1
        ok = state.engine.health_generate(state.settings.health_timeout)
        ok = ok and not state.engine.draining.is_set()
        return empty(200 if ok else 503)

    def ping(self) -> Response:
        return empty(200)

    def freeze_gc(self) -> Response:
        return Response(200, b"Garbage collection frozen.\n", "text/plain; charset=utf-8")

    def model_info(self) -> Response:
        """http_server.py:812-850."""
        args = self.state.args
        return json_response(200, {
            "model_path": args.get("model_path"), "served_model_name": self.state.served_name,
            "tokenizer_path": args.get("tokenizer_path"), "is_generation": True,
            "preferred_sampling_params": args.get("preferred_sampling_params"), "weight_version": "default",
            "load_format": args.get("load_format") or "auto", "reasoning_parser": args.get("reasoning_parser"),
            "tool_call_parser": args.get("tool_call_parser"),
            "disaggregation_mode": args.get("disaggregation_mode") or "null",
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": self.state.model.model_type,
            "architectures": [self.state.model.architecture],
        })

    def server_info(self) -> Response:
        """http_server.py:863-891 with utils/common.py:3584-3593: the resolved args, launch_command, the
        scheduler's info, kv_events, startup_time, one internal state per DP rank, version, frontend. The version
        is the installed package's, as SGLang reports sglang.__version__: "<pin>+sim" for this simulator."""
        state, info = self.state, self.state.info
        internal = dict(info.resolved, **state.overrides, world_size=len(state.ranks.local),
                        effective_max_running_requests_per_dp=state.engine.max_running,
                        last_gen_throughput=state.engine.throughput(), memory_usage=info.memory_usage,
                        decode_cuda_graph_bs=info.decode_graph_bs,
                        decode_cuda_graph_memory_gb=info.memory_usage["graph"].get("decode", 0.0),
                        startup_time={k: v for k, v in info.startup_time.items() if k != "tokenizer_e2e"})
        page_size = int(state.args.get("page_size") or 1)
        layout = {"enabled": False, "backend": None, "page_size": page_size, "hicache_object_layout": {"pools": []},
                  "reason": ("Mooncake storage is not attached" if state.host_pool_tokens is not None
                             else "Hierarchical cache is disabled")}
        body = dict(info.resolved, launch_command=info.launch_command, status="ready",
                    max_total_num_tokens=state.engine.max_total_tokens, max_req_input_len=state.max_req_input_len,
                    hicache_object_layout=layout, kv_events=None, startup_time=info.startup_time,
                    internal_states=[internal], version=state.version, frontend="python")
        return json_response(200, body)

    def set_internal_state(self, body: dict[str, Any]) -> Response:
        """0.5.23's POST /set_internal_state: every key checked first, and the whole request refused (200, [false],
        a warning in the scheduler's log) when one is not a live key or out of range; else all set at once (200,
        [true], one per DP rank) and logged as the real scheduler logs it."""
        requested = body.get("server_args")
        if not isinstance(requested, dict):
            raise BadRequest("server_args must be a JSON object")
        for key, value in requested.items():
            problem = self._live_problem(key, value)
            if problem:
                logs.log(problem, 0)
                return json_response(200, [False])
        if requested:
            self.state.overrides.update(requested)
            logs.log(f"Config updated via context override: {requested}", 0)
        return json_response(200, [True])

    def _live_problem(self, key: str, value: Any) -> str:
        if key not in LIVE_KEYS:
            return f"Updating {key} is not supported."
        if key == "pp_max_micro_batch_size":
            upper = self.state.engine.max_running // max(int(self.state.args.get("pp_size") or 1), 1)
            if not isinstance(value, int) or not 1 <= value <= upper:
                return (f"Updating {key} to {value} is rejected because it is out of the valid range "
                        f"[1, {upper}].")
        return ""

    def models(self) -> Response:
        name = self.state.served_name
        return json_response(200, {"object": "list", "data": [{
            "id": name, "object": "model", "created": int(self.state.created),
            "owned_by": "sglang", "root": name, "parent": None,
            "max_model_len": int(self.state.args["context_length"]),
        }]})

    def metrics(self) -> Response:
        state = self.state
        text = metrics.render(state.engine, state.ranks, state.constants, state.host_pool_tokens,
                              state.dropped_reasons)
        return Response(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    # ---- generation -------------------------------------------------------------------
    def _check_length(self, prompt_tokens: int) -> None:
        context = int(self.state.args["context_length"])
        if prompt_tokens >= context:
            raise BadRequest(
                f"The input ({prompt_tokens} tokens) is longer than the model's context length ({context} tokens)."
            )

    def _log_prefill(self, tokens: int) -> None:
        """The scheduler's prefill line (TP rank 0), input throughput over the time since the last prefill."""
        state = self.state
        stats, now = state.engine.stats, time.perf_counter()
        gap, state.last_prefill = now - state.last_prefill, now
        usage = stats.used_tokens / state.engine.max_total_tokens
        logs.log(msg.PREFILL.format(tokens=tokens, usage=usage, running=stats.running, queued=stats.queued,
                                    graph=state.graph_label, throughput=tokens / gap if gap > 0 else 0.0), 0)

    def _run(self, prompt_tokens: int, max_new: int,
             on_token: Callable[[Generation, str], None] | None = None) -> Generation:
        self._check_length(prompt_tokens)
        rid = uuid.uuid4().hex
        self._log_prefill(prompt_tokens)
        return self.state.engine.generate(rid, prompt_tokens, max_new, on_token, streaming=on_token is not None)

    @staticmethod
    def _meta(gen: Generation) -> dict[str, Any]:
        return {"id": gen.rid, "finish_reason": {"type": "length", "length": gen.max_new_tokens},
                "prompt_tokens": gen.prompt_tokens, "weight_version": "default",
                "total_retractions": 0, "completion_tokens": gen.completion_tokens,
                "cached_tokens": 0, "e2e_latency": round(gen.latency, 6)}

    def generate(self, body: dict[str, Any]) -> Response:
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise BadRequest("sampling_params must be an object")
        max_new = _int_field(params, "max_new_tokens", 128) or 0
        if body.get("text") is not None:
            texts = body["text"]
            batch = isinstance(texts, list)
            items = texts if batch else [texts]
            if not items or not all(isinstance(t, str) for t in items):
                raise BadRequest("text must be a string or a list of strings")
            prompts = [estimate_tokens(t) for t in items]
        elif body.get("input_ids") is not None:
            ids = body["input_ids"]
            batch = bool(ids) and isinstance(ids, list) and isinstance(ids[0], list)
            items = ids if batch else [ids]
            prompts = [_prompt_tokens(i) for i in items]
        else:
            raise BadRequest("Either text or input_ids should be provided.")
        if body.get("stream"):
            return Response(200, content_type="text/event-stream",
                            stream=lambda write: self._stream_generate(prompts[0], max_new, write))
        results = [{"text": gen.text, "meta_info": self._meta(gen)}
                   for gen in (self._run(p, max_new) for p in prompts)]
        return json_response(200, results if batch else results[0])

    def _stream_generate(self, prompt: int, max_new: int, write: Writer) -> None:
        def on_token(gen: Generation, _piece: str) -> None:
            write(sse({"text": gen.text, "meta_info": self._meta(gen)}))

        self._run(prompt, max_new, on_token)
        write(sse("[DONE]"))

    @staticmethod
    def _usage(gen: Generation) -> dict[str, Any]:
        return {"prompt_tokens": gen.prompt_tokens, "completion_tokens": gen.completion_tokens,
                "total_tokens": gen.prompt_tokens + gen.completion_tokens,
                "prompt_tokens_details": None}

    def completions(self, body: dict[str, Any]) -> Response:
        if "prompt" not in body:
            raise BadRequest("Field required: prompt")
        prompts = body["prompt"]
        items = prompts if isinstance(prompts, list) and prompts and isinstance(
            prompts[0], (str, list)) else [prompts]
        tokens = [_prompt_tokens(p) for p in items]
        max_new = _int_field(body, "max_tokens", 16) or 0
        base = {"id": "cmpl-" + uuid.uuid4().hex, "created": int(time.time()),
                "model": self.state.served_name}
        if body.get("stream"):
            return Response(200, content_type="text/event-stream",
                            stream=lambda write: self._stream_completion(tokens[0], max_new,
                                                                         base, write))
        choices, usage = [], {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        for index, count in enumerate(tokens):
            gen = self._run(count, max_new)
            choices.append({"index": index, "text": gen.text, "logprobs": None,
                            "finish_reason": "length", "matched_stop": None})
            for key, value in self._usage(gen).items():
                if value is not None:
                    usage[key] += value
        usage["prompt_tokens_details"] = None
        return json_response(200, dict(base, object="text_completion", choices=choices,
                                       usage=usage))

    def _stream_completion(self, prompt: int, max_new: int, base: dict[str, Any],
                           write: Writer) -> None:
        def on_token(_gen: Generation, piece: str) -> None:
            write(sse(dict(base, object="text_completion", choices=[{
                "index": 0, "text": piece, "logprobs": None, "finish_reason": None,
                "matched_stop": None}])))

        gen = self._run(prompt, max_new, on_token)
        write(sse(dict(base, object="text_completion", choices=[{
            "index": 0, "text": "", "logprobs": None, "finish_reason": "length",
            "matched_stop": None}], usage=self._usage(gen))))
        write(sse("[DONE]"))

    def chat(self, body: dict[str, Any]) -> Response:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and "role" in m for m in messages):
            raise BadRequest("messages must be a non-empty list of {role, content} objects")
        prompt = 8 + sum(estimate_tokens(json.dumps(m.get("content", ""))) for m in messages)
        limit = _int_field(body, "max_completion_tokens", None)
        limit = _int_field(body, "max_tokens", limit)
        max_new, finish = (16, "stop") if limit is None else (limit, "length")
        base = {"id": uuid.uuid4().hex, "created": int(time.time()),
                "model": self.state.served_name}
        if body.get("stream"):
            return Response(200, content_type="text/event-stream",
                            stream=lambda write: self._stream_chat(prompt, max_new, finish,
                                                                   base, write))
        gen = self._run(prompt, max_new)
        return json_response(200, dict(base, object="chat.completion", choices=[{
            "index": 0, "message": {"role": "assistant", "content": gen.text,
                                    "reasoning_content": None, "tool_calls": None},
            "logprobs": None, "finish_reason": finish, "matched_stop": None}],
            usage=self._usage(gen)))

    def _stream_chat(self, prompt: int, max_new: int, finish: str, base: dict[str, Any],
                     write: Writer) -> None:
        def chunk(delta: dict[str, Any], reason: str | None) -> bytes:
            return sse(dict(base, object="chat.completion.chunk", choices=[{
                "index": 0, "delta": delta, "logprobs": None, "finish_reason": reason,
                "matched_stop": None}]))

        write(chunk({"role": "assistant", "content": ""}, None))
        self._run(prompt, max_new, lambda _gen, piece: write(chunk({"content": piece}, None)))
        write(chunk({}, finish))
        write(sse("[DONE]"))


def deprecated(name: str, route: Callable[[], Response]) -> Callable[[], Response]:
    """/get_<name>: logs its deprecation (a warning, http_server.py:802-809, 853-860), then answers as /<name>."""
    def answer() -> Response:
        logs.log(msg.DEPRECATED_ROUTE.format(name=name))
        return route()

    return answer


class DummyHealthApi:
    """What nodes other than 0 serve: health that always says 200."""

    def dispatch(self, method: str, path: str, headers: Any, body: bytes) -> Response:
        if path in ("/health", "/health_generate", "/ping"):
            return empty(200) if method in ("GET", "HEAD") else json_response(
                405, {"detail": "Method Not Allowed"})
        return not_found()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 5  # uvicorn --timeout-keep-alive 5 under SGLang
    api: Any = None
    engine: Engine | None = None

    def version_string(self) -> str:
        return "uvicorn"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        try:
            status = int(code)
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            status, phrase = 0, ""
        host, port = self.client_address[:2]
        logs.access(f"{host}:{port}", self.requestline, status, phrase)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _handle(self) -> None:
        path = self.path.split("?", 1)[0]
        body = self._body()
        counted = self.engine is not None and path in GENERATION_PATHS
        if counted:
            assert self.engine is not None
            with self.engine.in_flight():
                self._send(self.api.dispatch(self.command, path, self.headers, body))
        else:
            self._send(self.api.dispatch(self.command, path, self.headers, body))

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _handle

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        if response.stream is not None:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            response.stream(self._chunk)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # uvicorn with --ssl-certfile/--ssl-keyfile serves https only: a plain-HTTP client fails its handshake and is
    # disconnected. The handshake runs in the connection's own thread (not in accept), as uvicorn's does per
    # connection, so one slow client does not hold the others.
    ssl_context: ssl.SSLContext | None = None
    handshake_timeout = 30.0
    # The real server's listen backlog: SGLang runs uvicorn without a backlog, whose default is 2048
    # (uvicorn/config.py, Config(backlog=2048), read in uvicorn 0.38.0). socketserver's default of 5 made
    # the kernel drop the SYNs of a burst of connections (a drill's 48 at once) on a busy machine: their
    # clients retried after 1, 3, 7 s, and the burst arrived spread out, unlike on the real server.
    request_queue_size = 2048

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        if self.ssl_context is not None:
            sock = self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            request.settimeout(self.handshake_timeout)
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError):
                return  # not TLS, or a client that does not trust us: closed, as uvicorn closes it
            request.settimeout(None)
        super().finish_request(request, client_address)


class Server6(Server):
    address_family = socket.AF_INET6


def server_context(certfile: str, keyfile: str, ca_certs: str | None = None) -> ssl.SSLContext:
    """uvicorn's create_ssl_context (uvicorn/config.py): TLS server, the chain and key, no client certificate asked
    (cert_reqs CERT_NONE, as SGLang starts it), the CA loaded when given."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certfile, keyfile)
    if ca_certs:
        context.load_verify_locations(ca_certs)
    return context


def make_server(host: str, port: int, api: Any, engine: Engine | None,
                context: ssl.SSLContext | None = None) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"api": api, "engine": engine})
    cls = Server6 if ":" in host else Server
    server = cls((host, port), handler)
    server.ssl_context = context
    return server


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              name="http", daemon=True)
    thread.start()
    return thread


def display_url(host: str, port: int, tls: bool = False) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"


def local_target(host: str) -> str:
    """Where the warm-up connects to reach a server bound on host."""
    return {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)


def client_context(ca_certs: str | None) -> ssl.SSLContext:
    """0.5.23 serving_hook.ssl_verify_of: with --ssl-ca-certs, verified against it (host name included); without,
    verification off (SGLang warms up a self-signed server that way, with a warning)."""
    if ca_certs:
        return ssl.create_default_context(cafile=ca_certs)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def self_request(host: str, port: int, method: str, path: str, body: dict[str, Any] | None,
                 api_key: str | None, timeout: float = 600.0,
                 tls: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    """One request to our own server, as SGLang's warm-up does with requests (https with ``tls``)."""
    conn = (http.client.HTTPSConnection(local_target(host), port, timeout=timeout, context=tls) if tls is not None
            else http.client.HTTPConnection(local_target(host), port, timeout=timeout))
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=headers)
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()
