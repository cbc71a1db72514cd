"""The life of one simulated server process: checks, children, load, serve, drain, exit."""

from __future__ import annotations

import os
import re
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
from sglang._sim.http_api import (
    Api,
    DummyHealthApi,
    Info,
    State,
    client_context,
    display_url,
    make_server,
    self_request,
    serve_in_thread,
    server_context,
)
from sglang._sim.logs import Frame
from sglang._sim.metrics import Constants, Ranks
from sglang._sim.model import ModelError, ModelInfo, capacity, kv_bytes_per_token, load_model
from sglang._sim.settings import Settings, SettingsError, from_env
from sglang.version import __version__

GIB = 1024**3
CUDA_CONTEXT_GIB = 1.5  # the planner's gpu_reserved_bytes default
DIST_MEM_GIB = 0.79
GRAPH_MEM_GIB = 0.61
FREEZE_GC_SINCE = "0.5.23"  # the warm-up's POST /freeze_gc (http_server.py:2553-2569), seen in 0.5.23's own log
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
    graph: float = GRAPH_MEM_GIB  # CUDA graphs; none on --device cpu

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
        return self.avail_after_kv - self.graph


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
    and, from 0.5.18, a multimodal model's reserve, divided by the bytes per token the version charges; at most
    --max-total-tokens (model_runner's min(profiled, max_total_tokens), in whole pages)."""
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
    tokens = pool.tokens
    page = int(args.get("page_size") or 1)
    if args.get("max_total_tokens"):
        tokens = min(tokens, int(args["max_total_tokens"]) // page * page)
    return Memory(
        avail_begin=settings.gpu_mem_gib - CUDA_CONTEXT_GIB,
        weights=settings.weight_gib_per_gpu,
        kv_tokens=tokens,
        kv_gib=tokens * cell / GIB,
        cell=cell,
        draft_weights=draft_weights,
        draft_arch=draft.architecture if draft_first and draft is not None else "",
        graph=GRAPH_MEM_GIB if captures_graphs(args) else 0.0,
    )


def on_cpu(args: cli.Args) -> bool:
    return str(args.get("device") or "cuda") == "cpu"


def torch_native(args: cli.Args) -> bool:
    return str(args.get("attention_backend") or "") == "torch_native"


def captures_graphs(args: cli.Args) -> bool:
    """Decode graphs: none on a CPU (cuda_graph_setup.py:733-736), with torch_native attention (attention_hook.py:
    124-127) or --disable-cuda-graph."""
    return not (on_cpu(args) or torch_native(args) or args.get("disable_cuda_graph"))


def decode_graph_bs(args: cli.Args) -> list[int]:
    """generate_decode_cuda_graph_batch_sizes (0.5.23 arg_groups/cuda_graph_hook.py:499-532), up to the
    running-request limit."""
    max_bs = max(int(args.get("max_running_requests") or 1), 1)
    if args.get("speculative_algorithm"):
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, max_bs + 1, 16)]
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    sizes = [size for size in sizes if size <= max_bs]
    return sizes if max_bs in sizes else [*sizes, max_bs]


@dataclass
class Timings:
    """The engine's startup timings (s): engine.py:1100-1128, /server_info's startup_time."""

    load_weight: float = 0.0
    kv_cache_allocation: float = 0.0
    scheduler_e2e: float = 0.0
    graph_phase: str = "decode"
    graph: float = 0.0

    def as_dict(self, tokenizer_e2e: float) -> dict[str, Any]:
        graphs = {phase: (self.graph if phase == self.graph_phase else 0.0) for phase in msg.GRAPH_PHASES}
        return {"load_weight": self.load_weight, "kv_cache_allocation": self.kv_cache_allocation,
                "scheduler_e2e": self.scheduler_e2e, "cuda_graph": graphs, "tokenizer_e2e": tokenizer_e2e}

    def line(self, tokenizer_e2e: float) -> str:
        timings = self.as_dict(tokenizer_e2e)
        graphs = ", ".join(f"{phase}={seconds:.2f}" for phase, seconds in timings.pop("cuda_graph").items())
        return msg.ENGINE_TIMINGS.format(cuda_graph=graphs, **timings)


class Simulator:
    def __init__(self, args: cli.Args, model: ModelInfo, settings: Settings, catalog: Any,
                 launch_command: str = "", given: cli.Args | None = None) -> None:
        self.args = args
        self.given = args if given is None else given  # as parsed, before finalize()
        self.model = model
        self.settings = settings
        self.faults = settings.faults
        self.catalog = catalog
        self.launch_command = launch_command
        self.started = time.monotonic()
        self.nnodes = int(args.get("nnodes") or 1)
        self.node_rank = int(args.get("node_rank") or 0)
        self.tp_size = int(args.get("tp_size") or 1)
        local = self.tp_size // self.nnodes
        self.ranks = list(range(self.node_rank * local, (self.node_rank + 1) * local))
        logs.configure_ranks(self.tp_size, int(args.get("ep_size") or 1))
        self.dist: Rendezvous | None = None
        self.engine: Engine | None = None
        self.serving = False
        self.stop = threading.Event()
        self.host_pool_tokens: int | None = None
        self.timings = Timings()
        self.serve_started = time.monotonic()

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
            found = re.search(r"_TP(\d+)", title)
            rank = found.group(1) if found else "0"
            text = logs.line(msg.RANK_DEAD.format(rank=rank)) + "\n" + logs.line(msg.EXIT_CODE.format(code=code))
            procs.exit_now(self.faults.exit_code, text + "\n")
        if self.engine is not None:
            self.engine.broken.set()

    def peer_lost(self, peer: str) -> None:
        if not procs.exiting():
            self.crash(msg.RUNTIME_FRAMES, nccl_remote_error(peer))

    # ---- startup --------------------------------------------------------------------------------
    def run(self) -> NoReturn:
        if torch_native(self.args):
            logs.log(msg.NO_GRAPH_TORCH_NATIVE)
        logs.log(msg.SERVER_ARGS.format(args=cli.server_args_repr(self.args, self.catalog, self.given)))
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
        load_start = mark = time.monotonic()
        parallel = cli.at_least("0.5.23")
        self.each_rank(msg.INIT_PARALLEL_BEGIN if parallel else msg.INIT_DIST_BEGIN)
        self.rendezvous()
        mark = self.pause(SHARES[0], mark)
        elapsed = SHARES[0] * self.settings.load_seconds
        if parallel:
            self.each_rank(msg.INIT_PARALLEL_END.format(elapsed=elapsed))
            self.each_rank(msg.MEMORY_BASELINE.format(usage=0.0))
        else:
            self.each_rank(msg.INIT_DIST_END.format(elapsed=elapsed, usage=DIST_MEM_GIB))
        memory = plan_memory(self.args, self.model, self.settings)
        self.each_rank(msg.LOAD_BEGIN.format(avail=memory.avail_begin))
        weights_start = time.monotonic()
        self.load_weights(SHARES[1] * self.settings.load_seconds)
        mark = time.monotonic()
        self.timings.load_weight = mark - weights_start
        self.each_rank(msg.LOAD_END.format(elapsed=mark - weights_start, arch=self.model.architecture,
                                           quant=self.model.quant_log, avail=memory.avail_after_target,
                                           usage=memory.weights))
        if memory.draft_arch:  # 0.5.14+: the draft loads before the KV pool is sized
            self.log_draft_load(memory)
        if memory.kv_tokens <= 0:
            self.crash(msg.KV_FRAMES, msg.NOT_ENOUGH_GPU_MEMORY, self.ranks)
        kv_start = mark
        mark = self.pause(SHARES[2], mark)
        self.log_kv(memory)
        self.timings.kv_cache_allocation = time.monotonic() - kv_start
        if on_cpu(self.args) or torch_native(self.args):
            self.each_rank(msg.NO_PREFILL_GRAPH)
        if captures_graphs(self.args):
            mark = self.capture_graphs(memory, mark)
        # The scheduler logs its capacity, then builds the HiCache host pool (scheduler.py, every version).
        if self.node_rank == 0:
            self.log_capacity(memory)
        self.host_pool_tokens = self.allocate_host_pool(memory)
        self.pause(SHARES[4], mark)
        self.timings.scheduler_e2e = time.monotonic() - load_start
        return memory

    def log_draft_load(self, memory: Memory) -> None:
        """The draft's runner: its own memory baseline (0.5.23) or distributed init (before), then its weights."""
        if cli.at_least("0.5.23"):
            self.each_rank(msg.MEMORY_BASELINE.format(usage=0.0))
        else:
            self.each_rank(msg.INIT_DIST_END.format(elapsed=0.0, usage=0.0))
        self.each_rank(msg.LOAD_BEGIN.format(avail=memory.avail_after_target))
        self.each_rank(msg.LOAD_END.format(elapsed=0.05, arch=memory.draft_arch, quant="",
                                           avail=memory.avail_after_weights, usage=memory.draft_weights))

    def capture_graphs(self, memory: Memory, mark: float) -> float:
        """The target's decode graphs ("verify" with speculative decoding), every rank."""
        speculative = bool(self.args.get("speculative_algorithm"))
        name = "verify" if speculative else "decode"
        per_req = int(self.args.get("speculative_num_draft_tokens") or 1) if speculative else 1
        self.each_rank(msg.GRAPH_BEGIN.format(name=name, per_req=per_req, avail=memory.avail_after_kv))
        graph_start = time.monotonic()
        mark = self.pause(SHARES[3], mark)
        elapsed = time.monotonic() - graph_start
        self.timings.graph_phase, self.timings.graph = ("target_verify" if speculative else "decode"), elapsed
        self.each_rank(msg.GRAPH_END.format(name=name, bs=decode_graph_bs(self.args), elapsed=elapsed,
                                            usage=memory.graph, avail=memory.avail_final))
        return mark

    def log_kv(self, memory: Memory) -> None:
        dtype = msg.KV_TORCH_DTYPES.get(str(self.args.get("kv_cache_dtype")), "torch.bfloat16")
        if self.model.is_mla:
            text = msg.KV_MLA.format(dtype=dtype, tokens=memory.kv_tokens, size=memory.kv_gib)
        else:
            text = msg.KV_MHA.format(dtype=dtype, tokens=memory.kv_tokens, k=memory.kv_gib / 2, v=memory.kv_gib / 2)
        self.each_rank(text)
        self.each_rank(msg.MEMORY_POOL_END.format(avail=memory.avail_after_kv))

    def log_capacity(self, memory: Memory) -> None:
        args = self.args
        text = msg.MAX_TOKENS.format(
            tokens=memory.kv_tokens,
            chunked=args["chunked_prefill_size"],
            prefill=args["max_prefill_tokens"],
            running=args["max_running_requests"],
            context=args["context_length"],
            mem_key="available_cpu_mem" if on_cpu(args) else "available_gpu_mem",
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
        while self.faults.hold_load and not os.path.exists(self.faults.hold_load):
            time.sleep(0.1)  # a drill holds the load here until it releases it
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
    def bind(self, api: Any, engine: Engine | None, quiet: bool = False) -> None:
        """Listen like uvicorn; quiet for the dummy health server of nodes > 0 (log_level "warning"), which serves
        plain HTTP even with --ssl-certfile (0.5.23 utils/common.py launch_dummy_health_check_server: no ssl)."""
        host, port = str(self.args.get("host") or "127.0.0.1"), int(self.args.get("port") or 0)
        certfile = None if quiet else self.args.get("ssl_certfile")
        try:
            context = server_context(str(certfile), str(self.args.get("ssl_keyfile")),
                                     self.args.get("ssl_ca_certs")) if certfile else None
            server = make_server(host, port, api, engine, context)
        except OSError as error:
            reason = str(error.strerror or error).lower()
            logs.uvicorn(msg.UVICORN_BIND_ERROR.format(errno=error.errno, host=host, port=port, reason=reason), "ERROR")
            procs.exit_now(1)
        if not quiet:
            logs.uvicorn(msg.UVICORN_STARTED.format(pid=os.getpid()))
            for text in msg.UVICORN_STARTUP:
                logs.uvicorn(text)
        serve_in_thread(server)
        if not quiet:
            logs.uvicorn(msg.UVICORN_RUNNING.format(url=display_url(host, port, bool(certfile))))
        self.serving = True
        self.serve_started = time.monotonic()

    def uvicorn_exit(self, *_: Any) -> NoReturn:
        self.uvicorn_shutdown()
        procs.exit_now(0)

    @staticmethod
    def uvicorn_shutdown() -> None:
        for text in msg.UVICORN_SHUTDOWN:
            logs.uvicorn(text)
        logs.uvicorn(msg.UVICORN_FINISHED.format(pid=os.getpid()))

    def serve_dummy(self) -> NoReturn:
        """Nodes other than 0: report loaded to node 0, then a health server that always says 200."""
        assert self.dist is not None
        self.dist.send_loaded()
        self.bind(DummyHealthApi(), None, quiet=True)
        signal.signal(signal.SIGTERM, lambda *_: procs.exit_now(0))
        signal.signal(signal.SIGINT, lambda *_: procs.exit_now(0))
        self.after_ready()
        while True:
            time.sleep(3600)

    def build_state(self, memory: Memory, engine: Engine) -> State:
        """What the routes read: /server_info's startup figures, /metrics's ranks and constants."""
        graphs = {phase: (memory.graph if phase == self.timings.graph_phase else 0.0) for phase in msg.GRAPH_PHASES}
        usage = {"weight": round(memory.weights, 3), "kvcache": round(memory.kv_gib, 3),
                 "startup_available": round(memory.avail_final, 3), "token_capacity": memory.kv_tokens,
                 "token_capacity_swa": None, "graph": graphs}
        tokenizer_e2e = time.monotonic() - self.started
        info = Info(resolved=cli.resolved_dict(self.args, self.catalog, self.given), launch_command=self.launch_command,
                    startup_time=self.timings.as_dict(tokenizer_e2e), memory_usage=usage,
                    decode_graph_bs=decode_graph_bs(self.args) if captures_graphs(self.args) else [],
                    freeze_gc=cli.at_least(FREEZE_GC_SINCE))
        ranks = Ranks(model_name=str(self.args.get("served_model_name") or self.args.get("model_path")),
                      local=tuple(self.ranks), tp_size=self.tp_size, ep_size=int(self.args.get("ep_size") or 1),
                      all_schedulers=bool(self.args.get("enable_metrics_for_all_schedulers")))
        constants = Constants(max_total_num_tokens=memory.kv_tokens, context_len=int(self.args["context_length"]),
                              page_size=int(self.args.get("page_size") or 1), weight_gb=memory.weights,
                              kv_cache_gb=memory.kv_gib, startup_available_gb=memory.avail_final, graph_gb=graphs)
        return State(args=self.args, model=self.model, settings=self.settings, engine=engine, version=__version__,
                     ready_route=cli.at_least("0.5.20"), info=info, ranks=ranks, constants=constants,
                     host_pool_tokens=self.host_pool_tokens, dropped_reasons=self.dropped_reasons(),
                     graph_label="cpu graph" if on_cpu(self.args) else "cuda graph")

    def dropped_reasons(self) -> tuple[str, ...]:
        """What HiCache pre-seeds hicache_dropped_tokens_total with (unified_radix_cache.py:565-575, 1060-1065)."""
        if self.host_pool_tokens is None:
            return ()
        write_through = str(self.args.get("hicache_write_policy") or "write_through") == "write_through"
        cache_mode = str(self.args.get("hicache_host_memory_mode") or "cache") == "cache"
        return ("host_pressure", "write_through_unbacked_eviction") if write_through and cache_mode \
            else ("host_pressure",)

    def serve(self, memory: Memory) -> NoReturn:
        if self.dist is not None:
            try:
                self.dist.wait_for_loaded()
            except DistError as error:
                self.crash(msg.DIST_FRAMES, str(error))
        engine = Engine(
            int(self.args["max_running_requests"]), memory.kv_tokens, self.settings.token_seconds,
            self.faults.slow_drain,
        )
        self.engine = engine
        state = self.build_state(memory, engine)
        logs.log(self.timings.line(state.info.startup_time["tokenizer_e2e"]))
        self.bind(Api(state), engine)
        signal.signal(signal.SIGTERM, self.on_sigterm)
        signal.signal(signal.SIGINT, self.uvicorn_exit)
        threading.Thread(target=self.warmup, args=(state,), name="warmup", daemon=True).start()
        self.drain_when_stopped(engine)

    def on_sigterm(self, _signum: int, _frame: Any) -> None:
        if self.engine is not None:
            self.engine.draining.set()
        logs.log(msg.SIGTERM)
        self.stop.set()

    def next_tick(self) -> None:
        """Sleep until the next tick of SGLang's sigterm_watchdog, which wakes every 5 s from the start
        (tokenizer_manager.py:3508-3539), here every SGLANG_SIM_DRAIN_LOG_SECONDS from the port's opening."""
        period = self.settings.drain_log_seconds
        since = time.monotonic() - self.serve_started
        time.sleep(period - since % period)

    def drain_when_stopped(self, engine: Engine) -> NoReturn:
        """After SIGTERM: keep serving; at each watchdog tick log the remaining requests, and once none remain
        (that line says 0) shut down and exit 0. SGL_FORCE_SHUTDOWN: at the first tick, without draining."""
        while not self.stop.wait(0.2):
            pass
        self.next_tick()
        if self.settings.force_shutdown:
            logs.log(msg.FORCE_EXIT)
            self.exit_after_sigterm()
        while True:
            remaining = engine.remaining()
            logs.log(msg.DRAINING.format(count=len(remaining), rids=remaining))
            if not remaining:
                self.exit_after_sigterm()
            self.next_tick()

    def exit_after_sigterm(self) -> NoReturn:
        """The end of the drain: the schedulers release what they hold (the slow_exit fault's seconds, silently:
        SGLang freeing a large pinned host pool), kill_process_tree, uvicorn's shutdown, exit 0."""
        time.sleep(self.faults.slow_exit)
        logs.log(msg.KILL_TREE.format(pid=os.getpid()))
        self.uvicorn_shutdown()
        logs.log(msg.KILL_TREE.format(pid=os.getpid()))
        procs.exit_now(0)

    def warmup(self, state: State) -> None:
        """SGLang's _wait_and_warmup: GET /model_info, one /generate, then (0.5.23) POST /freeze_gc."""
        time.sleep(self.settings.warmup_seconds)
        host, port, key = str(self.args.get("host")), int(self.args["port"]), self.args.get("api_key")
        tls = client_context(self.args.get("ssl_ca_certs")) if self.args.get("ssl_certfile") else None
        try:
            self_request(host, port, "GET", "/model_info", None, key, tls=tls)
            if self.faults.fail_warmup:
                raise AssertionError("<Response [500]>")
            status, _body = self_request(host, port, "POST", "/generate", WARMUP_BODY, key, tls=tls)
            if status != 200:
                raise AssertionError(f"<Response [{status}]>")
        except Exception as error:  # any warm-up failure kills the server, as in SGLang
            trace = logs.traceback_text(msg.WARMUP_FRAMES, f"{type(error).__name__}: {error}")
            procs.exit_now(self.faults.exit_code, logs.line(msg.WARMUP_FAILED.format(traceback=trace)) + "\n")
        if state.info.freeze_gc:
            self_request(host, port, "POST", "/freeze_gc", None, key, tls=tls)
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
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        args = cli.parse(given, catalog)
        model = cli.check(args)
        command = cli.launch_command(cli.merged_argv(given, catalog))
    except cli.StartupError as error:
        logs.write(logs.traceback_text(error.frames, error.exception) + "\n")
        sys.exit(1)
    Simulator(cli.finalize(args, model), model, settings, catalog, command, given=args).run()
