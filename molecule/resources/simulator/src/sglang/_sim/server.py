"""The life of one simulated server process: checks, children, load, serve, drain, exit."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from sglang._sim import cli, devices, hostmem, logs, procs
from sglang._sim import messages as msg
from sglang._sim.dist import DistError, Rendezvous, nccl_remote_error
from sglang._sim.engine import Engine
from sglang._sim.http_api import Api, DummyHealthApi, State, display_url, make_server, self_request, serve_in_thread
from sglang._sim.logs import Frame
from sglang._sim.model import ModelError, ModelInfo, capacity, kv_bytes_per_token, load_model
from sglang._sim.settings import Settings, SettingsError, from_env
from sglang.version import __version__

GIB = 1024**3
CUDA_CONTEXT_GIB = 1.5  # the planner's gpu_reserved_bytes default
DIST_MEM_GIB = 0.79
GRAPH_MEM_GIB = 0.61
# Shares of SGLANG_SIM_LOAD_SECONDS: distributed init, shards, KV pool, CUDA graphs, the rest.
SHARES = (0.05, 0.75, 0.05, 0.10, 0.05)
WARMUP_BODY = {"text": "The capital city of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 8}}


@dataclass(frozen=True)
class Memory:
    """Per-GPU memory figures of the simulated load (GiB, printed as "GB" like SGLang)."""

    avail_begin: float
    weights: float
    kv_tokens: int
    kv_gib: float
    cell: int
    draft_weights: float = 0.0  # loaded before the KV pool (0.5.14+), else 0
    draft_arch: str = ""

    @property
    def avail_after_target(self) -> float:
        return self.avail_begin - self.weights

    @property
    def avail_after_weights(self) -> float:
        return self.avail_begin - self.weights - self.draft_weights

    @property
    def avail_after_kv(self) -> float:
        return self.avail_after_weights - self.kv_gib

    @property
    def avail_final(self) -> float:
        return self.avail_after_kv - GRAPH_MEM_GIB


def draft_model(args: cli.Args) -> ModelInfo | None:
    """The speculative draft, when there is one to load (EAGLE-family with a draft path)."""
    path = args.get("speculative_draft_model_path")
    if not args.get("speculative_algorithm") or not path:
        return None
    try:
        return load_model(str(path))
    except ModelError:
        return None


def plan_memory(args: cli.Args, model: ModelInfo, settings: Settings, version: str = __version__) -> Memory:
    """Device KV tokens by SGLang's profile step for the version, with the planner's own function
    (capacity.device_pool): free memory before the load minus the true weights
    (SGLANG_SIM_WEIGHT_GIB_PER_GPU, and from 0.5.14 the draft's), the (1 - mem_fraction_static) share
    and, from 0.5.18, a multimodal model's reserve, divided by the bytes per token the version charges."""
    version = version.split("+", 1)[0]
    cell = kv_bytes_per_token(model, args.get("kv_cache_dtype"), int(args.get("tp_size") or 1))
    draft = draft_model(args)
    shape = capacity.model_shape(model.config)
    draft_layers = capacity.model_shape(draft.config).draft_layers if draft is not None else 0
    draft_first = draft is not None and capacity.at_least(version, "0.5.14")
    draft_weights = settings.draft_weight_gib_per_gpu if draft_first else 0.0
    pool = capacity.device_pool(version, int(settings.gpu_mem_gib * GIB) - int(CUDA_CONTEXT_GIB * GIB),
                                int(settings.weight_gib_per_gpu * GIB), int(draft_weights * GIB),
                                float(args["mem_fraction_static"]), cell, shape.layers, draft_layers, shape.multimodal,
                                page_size=int(args.get("page_size") or 1))
    return Memory(
        avail_begin=settings.gpu_mem_gib - CUDA_CONTEXT_GIB,
        weights=settings.weight_gib_per_gpu,
        kv_tokens=pool.tokens,
        kv_gib=pool.tokens * cell / GIB,
        cell=cell,
        draft_weights=draft_weights,
        draft_arch=draft.architecture if draft_first and draft is not None else "",
    )


class Simulator:
    def __init__(self, args: cli.Args, model: ModelInfo, settings: Settings, catalog: Any) -> None:
        self.args = args
        self.model = model
        self.settings = settings
        self.faults = settings.faults
        self.catalog = catalog
        self.nnodes = int(args.get("nnodes") or 1)
        self.node_rank = int(args.get("node_rank") or 0)
        local = int(args.get("tp_size") or 1) // self.nnodes
        self.ranks = list(range(self.node_rank * local, (self.node_rank + 1) * local))
        self.dist: Rendezvous | None = None
        self.engine: Engine | None = None
        self.serving = False
        self.stop = threading.Event()
        self.host_pool_tokens: int | None = None

    # ---- exits ----------------------------------------------------------------------------------
    def crash(self, frames: Sequence[Frame], exception: str, ranks: Sequence[int] | None = None) -> NoReturn:
        """A scheduler raised: its traceback (per rank), the main process's SIGQUIT line, exit."""
        text = ""
        for rank in ranks if ranks is not None else self.ranks[:1]:
            trace = logs.traceback_text(frames, exception.rstrip("\n"))
            text += logs.line(msg.SCHEDULER_EXCEPTION.format(traceback=trace), rank) + "\n"
        text += logs.line(msg.SIGQUIT) + "\n"
        procs.exit_now(self.faults.exit_code, text)

    def child_died(self, title: str, pid: int, code: int) -> None:
        logs.log(msg.CHILD_FAILED.format(code=code, pid=pid))
        if not self.serving:
            rank = title.rsplit("TP", 1)[-1]
            text = logs.line(msg.RANK_DEAD.format(rank=rank)) + "\n" + logs.line(msg.EXIT_CODE.format(code=code))
            procs.exit_now(self.faults.exit_code, text + "\n")
        if self.engine is not None:
            self.engine.broken.set()

    def peer_lost(self, peer: str) -> None:
        if not procs.exiting():
            self.crash(msg.RUNTIME_FRAMES, nccl_remote_error(peer))

    # ---- startup --------------------------------------------------------------------------------
    def run(self) -> NoReturn:
        logs.log(msg.SERVER_ARGS.format(args=cli.server_args_repr(self.args, self.catalog)))
        signal.signal(signal.SIGINT, lambda *_: procs.die_by_signal(signal.SIGINT))
        procs.spawn_children(self.ranks)
        procs.watch_children(self.child_died)
        self.open_devices()
        memory = self.load()
        if self.node_rank > 0:
            self.serve_dummy()
        self.serve(memory)

    def open_devices(self) -> None:
        """Each rank opens its GPU as CUDA does; a node it cannot open ends the start like torch."""
        if not self.settings.gpu_devices:
            return
        local = range(len(self.ranks))
        denied = [rank for rank, gpu in zip(self.ranks, local, strict=True) if devices.problems([gpu])]
        if denied:
            logs.log("(simulator) CUDA cannot open: " + "; ".join(devices.problems(local)))
            self.crash(msg.CUDA_INIT_FRAMES, msg.NO_CUDA_GPUS, denied)

    def pause(self, share: float, since: float) -> float:
        """Sleep until `share` of the load time has passed since `since`; return the new mark."""
        until = since + share * self.settings.load_seconds
        time.sleep(max(until - time.monotonic(), 0))
        return until

    def each_rank(self, message: str) -> None:
        for rank in self.ranks:
            logs.log(message, rank)

    def load(self) -> Memory:
        mark = time.monotonic()
        parallel = cli.at_least("0.5.23")
        self.each_rank(msg.INIT_PARALLEL_BEGIN if parallel else msg.INIT_DIST_BEGIN)
        self.rendezvous()
        mark = self.pause(SHARES[0], mark)
        elapsed = SHARES[0] * self.settings.load_seconds
        if parallel:
            self.each_rank(msg.INIT_PARALLEL_END.format(elapsed=elapsed))
            self.each_rank(msg.MEMORY_BASELINE.format(usage=DIST_MEM_GIB))
        else:
            self.each_rank(msg.INIT_DIST_END.format(elapsed=elapsed, usage=DIST_MEM_GIB))
        memory = plan_memory(self.args, self.model, self.settings)
        self.each_rank(msg.LOAD_BEGIN.format(avail=memory.avail_begin))
        weights_start = time.monotonic()
        self.load_weights(SHARES[1] * self.settings.load_seconds)
        mark = time.monotonic()
        self.each_rank(msg.LOAD_END.format(elapsed=mark - weights_start, arch=self.model.architecture,
                                           avail=memory.avail_after_target, usage=memory.weights))
        if memory.draft_arch:  # 0.5.14+: the draft loads before the KV pool is sized
            self.each_rank(msg.LOAD_BEGIN.format(avail=memory.avail_after_target))
            self.each_rank(msg.LOAD_END.format(elapsed=0.05, arch=memory.draft_arch,
                                               avail=memory.avail_after_weights, usage=memory.draft_weights))
        if memory.kv_tokens <= 0:
            self.crash(msg.KV_FRAMES, msg.NOT_ENOUGH_GPU_MEMORY, self.ranks)
        self.log_kv(memory)
        mark = self.pause(SHARES[2], mark)
        self.each_rank(msg.GRAPH_BEGIN.format(avail=memory.avail_after_kv))
        graph_start = time.monotonic()
        mark = self.pause(SHARES[3], mark)
        elapsed = time.monotonic() - graph_start
        self.each_rank(msg.GRAPH_END.format(elapsed=elapsed, usage=GRAPH_MEM_GIB, avail=memory.avail_final))
        # The scheduler logs its capacity, then builds the HiCache host pool (scheduler.py, every version).
        if self.node_rank == 0:
            self.log_capacity(memory)
        self.host_pool_tokens = self.allocate_host_pool(memory)
        self.pause(SHARES[4], mark)
        return memory

    def log_kv(self, memory: Memory) -> None:
        dtype = msg.KV_TORCH_DTYPES.get(str(self.args.get("kv_cache_dtype")), "torch.bfloat16")
        if self.model.is_mla:
            text = msg.KV_MLA.format(dtype=dtype, tokens=memory.kv_tokens, size=memory.kv_gib)
        else:
            text = msg.KV_MHA.format(dtype=dtype, tokens=memory.kv_tokens, k=memory.kv_gib / 2, v=memory.kv_gib / 2)
        self.each_rank(text)

    def log_capacity(self, memory: Memory) -> None:
        args = self.args
        text = msg.MAX_TOKENS.format(
            tokens=memory.kv_tokens,
            chunked=args["chunked_prefill_size"],
            prefill=args["max_prefill_tokens"],
            running=args["max_running_requests"],
            context=args["context_length"],
            avail=memory.avail_final,
        )
        logs.log(text, rank=0)

    def rendezvous(self) -> None:
        if self.nnodes == 1:
            return
        try:
            addr = str(self.args["dist_init_addr"])
            self.dist = Rendezvous(addr, self.nnodes, self.node_rank, self.settings.dist_timeout, self.peer_lost)
            if self.node_rank == 0:
                self.dist.listen()
                self.dist.wait_for_peers()
            else:
                self.dist.connect()
        except DistError as error:
            self.crash(msg.DIST_FRAMES, str(error))

    def fault_at(self, percent: float) -> None:
        if self.faults.crash_at is not None and percent >= self.faults.crash_at:
            self.crash(msg.LOAD_FRAMES, msg.CUDA_ERROR)
        if self.faults.hang_at is not None and percent >= self.faults.hang_at:
            while True:
                time.sleep(3600)

    def load_weights(self, seconds: float) -> None:
        """One bar update per shard (rank 0 of node 0 only: tqdm is disabled on other ranks)."""
        shards = self.model.shards
        progress = logs.Bar(shards) if self.node_rank == 0 else None
        start = time.monotonic()
        for index in range(shards):
            self.fault_at(100.0 * index / shards)
            time.sleep(max(start + (index + 1) * seconds / shards - time.monotonic(), 0))
            if progress is not None:
                progress.update()
        self.fault_at(100.0)
        if progress is not None:
            progress.close()

    def host_pool_inputs(self, memory: Memory) -> hostmem.HostPoolInputs:
        available = hostmem.mem_available_bytes(self.settings.mem_available_gb)
        if self.settings.mem_available_gb is None and cli.at_least("0.5.21"):
            available = hostmem.cgroup_limited(available)
        ratio = self.args.get("hicache_ratio")
        return hostmem.HostPoolInputs(
            version=__version__,
            bytes_per_token=memory.cell,
            device_tokens=memory.kv_tokens,
            hicache_ratio=None if ratio is None else float(ratio),
            hicache_size_gb=int(self.args.get("hicache_size") or 0),
            host_memory_mode=str(self.args.get("hicache_host_memory_mode") or "cache"),
            host_memory_fraction=float(self.args.get("hicache_host_memory_fraction") or 0.8),
            page_size=int(self.args.get("page_size") or 1),
            ranks_on_host=len(self.ranks),
            available_bytes=available,
        )

    def allocate_host_pool(self, memory: Memory) -> int | None:
        """HiCache host pool of every local rank (checked, logged, never really allocated)."""
        if not self.args.get("enable_hierarchical_cache"):
            return None
        try:
            pool = hostmem.host_pool(self.host_pool_inputs(memory))
        except (ValueError, AssertionError) as error:
            self.crash(msg.HOST_FRAMES, f"{type(error).__name__}: {error}", self.ranks)
        self.each_rank(msg.HOST_POOL.format(tokens=pool.tokens, size=pool.bytes / 1e9))
        return pool.tokens

    # ---- serving --------------------------------------------------------------------------------
    def bind(self, api: Any, engine: Engine | None) -> None:
        host, port = str(self.args.get("host") or "127.0.0.1"), int(self.args.get("port") or 0)
        try:
            server = make_server(host, port, api, engine)
        except OSError as error:
            reason = str(error.strerror or error).lower()
            logs.uvicorn(msg.UVICORN_BIND_ERROR.format(errno=error.errno, host=host, port=port, reason=reason), "ERROR")
            procs.exit_now(1)
        logs.uvicorn(msg.UVICORN_STARTED.format(pid=os.getpid()))
        for text in msg.UVICORN_STARTUP:
            logs.uvicorn(text)
        serve_in_thread(server)
        logs.uvicorn(msg.UVICORN_RUNNING.format(url=display_url(host, port)))
        self.serving = True

    def uvicorn_exit(self, *_: Any) -> NoReturn:
        for text in msg.UVICORN_SHUTDOWN:
            logs.uvicorn(text)
        logs.uvicorn(msg.UVICORN_FINISHED.format(pid=os.getpid()))
        procs.exit_now(0)

    def serve_dummy(self) -> NoReturn:
        """Nodes other than 0: report loaded to node 0, then a health server that always says 200."""
        assert self.dist is not None
        self.dist.send_loaded()
        self.bind(DummyHealthApi(), None)
        signal.signal(signal.SIGTERM, self.uvicorn_exit)
        signal.signal(signal.SIGINT, self.uvicorn_exit)
        self.after_ready()
        while True:
            time.sleep(3600)

    def serve(self, memory: Memory) -> NoReturn:
        if self.dist is not None:
            try:
                self.dist.wait_for_loaded()
            except DistError as error:
                self.crash(msg.DIST_FRAMES, str(error))
        engine = Engine(
            int(self.args["max_running_requests"]), memory.kv_tokens, self.settings.token_seconds,
            self.faults.slow_drain, self.faults.hold_until_sigterm,
        )
        self.engine = engine
        usage = {"weight": round(memory.weights, 2), "kvcache": round(memory.kv_gib, 2), "graph": GRAPH_MEM_GIB,
                 "token_capacity": memory.kv_tokens}
        state = State(
            args=self.args, model=self.model, settings=self.settings, engine=engine, version=__version__,
            ready_route=cli.at_least("0.5.20"), host_pool_tokens=self.host_pool_tokens,
            internal={"memory_usage": usage, "max_total_num_tokens": memory.kv_tokens},
        )
        self.bind(Api(state), engine)
        signal.signal(signal.SIGTERM, self.on_sigterm)
        signal.signal(signal.SIGINT, self.uvicorn_exit)
        threading.Thread(target=self.warmup, args=(state,), name="warmup", daemon=True).start()
        self.drain_when_stopped(engine)

    def on_sigterm(self, signum: int, _frame: Any) -> None:
        if self.engine is not None:
            self.engine.draining.set()
        logs.log(msg.SIGTERM.format(signum=signum))
        self.stop.set()

    def drain_when_stopped(self, engine: Engine) -> NoReturn:
        """After SIGTERM: keep serving, log the remaining requests, exit 0 once none remain."""
        while not self.stop.wait(0.2):
            pass
        if self.settings.force_shutdown:
            self.exit_after_sigterm()
        next_log = 0.0
        while True:
            remaining = engine.remaining()
            if not remaining:
                self.exit_after_sigterm()
            if time.monotonic() >= next_log:
                logs.log(msg.DRAINING.format(count=len(remaining), rids=remaining))
                next_log = time.monotonic() + self.settings.drain_log_seconds
            time.sleep(0.05)

    def exit_after_sigterm(self) -> NoReturn:
        """Exit 0, the slow_exit fault's seconds later: SGLang freeing a large pinned host pool on its way out,
        silently, after the drain (at once with SGL_FORCE_SHUTDOWN, which skips it)."""
        time.sleep(self.faults.slow_exit)
        procs.exit_now(0)

    def warmup(self, state: State) -> None:
        """SGLang's _wait_and_warmup: /get_model_info and one /generate against itself."""
        time.sleep(self.settings.warmup_seconds)
        host, port, key = str(self.args.get("host")), int(self.args["port"]), self.args.get("api_key")
        try:
            self_request(host, port, "GET", "/get_model_info", None, key)
            if self.faults.fail_warmup:
                raise AssertionError("<Response [500]>")
            status, _body = self_request(host, port, "POST", "/generate", WARMUP_BODY, key)
            if status != 200:
                raise AssertionError(f"<Response [{status}]>")
        except Exception as error:  # any warm-up failure kills the server, as in SGLang
            trace = logs.traceback_text(msg.WARMUP_FRAMES, f"{type(error).__name__}: {error}")
            procs.exit_now(self.faults.exit_code, logs.line(msg.WARMUP_FAILED.format(traceback=trace)) + "\n")
        state.ready.set()
        logs.log(msg.READY)
        self.after_ready()

    def after_ready(self) -> None:
        delay = self.faults.crash_after_ready
        if delay is None:
            return
        timer = threading.Timer(delay, self.crash, args=(msg.RUNTIME_FRAMES, msg.CUDA_ERROR))
        timer.daemon = True
        timer.start()


def main(argv: Sequence[str] | None = None) -> NoReturn:
    try:
        settings = from_env(os.environ)
    except SettingsError as error:
        sys.stderr.write(f"sglang simulator: {error}\n")
        sys.exit(1)
    catalog = cli.load_catalog()
    try:
        args = cli.parse(sys.argv[1:] if argv is None else argv, catalog)
        model = cli.check(args)
    except cli.StartupError as error:
        logs.write(logs.traceback_text(error.frames, error.exception) + "\n")
        sys.exit(1)
    Simulator(cli.finalize(args, model), model, settings, catalog).run()
