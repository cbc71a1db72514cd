"""The texts the real server prints, as ``str.format`` templates, and the tracebacks it ends with.

Kept together so a line checked against a real SGLang log is corrected in one place. The line
prefix (time, rank) is in ``logs.LOG_FORMAT``.
"""

from __future__ import annotations

from sglang._sim.logs import Frame

# ---- scheduler (per TP rank, prefix " TP<n>" when tp_size > 1: logs.rank_prefix) -------------------
INIT_DIST_BEGIN = "Init torch distributed begin."
INIT_DIST_END = "Init torch distributed ends. elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB"
# 0.5.23 (srt/distributed/bootstrap.py:115, :190, :219-222): "parallel" instead of torch distributed. The
# baseline's "mem usage" is the difference of two free-memory readings taken back to back (bootstrap.py:199-222),
# 0.00 GB on the real engine (tests/fixtures/sglang-engine/startup-0.5.23-cpu.log); a draft's runner takes one too.
INIT_PARALLEL_BEGIN = "Init parallel begin."
INIT_PARALLEL_END = "Init parallel ends. elapsed={elapsed:.2f} s"
MEMORY_BASELINE = "Memory baseline taken. mem usage={usage:.2f} GB"
LOAD_BEGIN = "Load weight begin. avail mem={avail:.2f} GB"
# Formats of 0.5.19+ as read from the 0.5.23 wheel (model_executor/model_runner.py:1272-1380,
# mem_cache/memory_pool.py:2073-2100, mem_cache/kv_cache_configurator.py:498-501,
# model_executor/model_runner_components/cuda_graph_setup.py:739-790, managers/scheduler.py:1266-1276).
# "{quant}" is "quant=<method>, " for a quantized checkpoint (ModelConfig.get_quantization_config_log_str), else "".
LOAD_END = ("Load weight end. elapsed={elapsed:.2f} s, type={arch}, {quant}avail mem={avail:.2f} GB, "
            "mem usage={usage:.2f} GB.")
KV_MLA = "KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, KV size: {size:.2f} GB"
KV_MHA = "KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, K size: {k:.2f} GB, V size: {v:.2f} GB"
KV_TORCH_DTYPES = {"fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2"}
MEMORY_POOL_END = "Memory pool end. avail mem={avail:.2f} GB"
# The target's decode graph ("verify" with speculative decoding), backend "full" (0.5.23's decode default,
# model_executor/cuda_graph_config.py); "num_tokens_per_req" is the tokens a request runs per step.
GRAPH_BEGIN = ("Capture target {name} CUDA graph begin. backend=full, num_tokens_per_req={per_req}, "
               "avail mem={avail:.2f} GB")
GRAPH_END = ("Capture target {name} CUDA graph end. bs={bs}, elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, "
             "avail mem={avail:.2f} GB.")
# cuda_graph_setup.py:495-500: no prefill graph (the default on a CPU, model_executor/cuda_graph_config.py:119-124).
NO_PREFILL_GRAPH = ("Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' (e.g. "
                    "via --cuda-graph-backend-prefill=disabled or auto-disable rules).")
HOST_POOL = "Allocating kv hierarchical KV host pool: {tokens} tokens, {size:.2f} GB host memory."
# "available_cpu_mem" on --device cpu (managers/scheduler.py:1274).
MAX_TOKENS = (
    "max_total_num_tokens={tokens}, chunked_prefill_size={chunked}, max_prefill_tokens={prefill}, "
    "max_running_requests={running}, context_len={context}, {mem_key}={avail:.2f} GB"
)
# managers/scheduler_components/metrics_reporter.py:754-783; "{graph}" is "cuda graph" ("cpu graph" on CPU).
PREFILL = (
    "Prefill batch, #new-seq: 1, #new-token: {tokens}, #cached-token: 0, token usage: {usage:.2f}, "
    "#running-req: {running}, #queue-req: {queued}, #pending-token: 0, {graph}: False, "
    "input throughput (token/s): {throughput:.2f}"
)
SCHEDULER_EXCEPTION = "Scheduler hit an exception: {traceback}"

# ---- main process ---------------------------------------------------------------------------
SERVER_ARGS = "server_args={args}"
# arg_groups/attention_hook.py:124-127, while the server args resolve (before they are logged).
NO_GRAPH_TORCH_NATIVE = "Cuda graph is disabled because of using torch native attention backend"
# srt/entrypoints/engine.py:1117-1128, once every scheduler is ready.
ENGINE_TIMINGS = (
    "Engine startup timings (s): load_weight={load_weight:.2f}, kv_cache_allocation={kv_cache_allocation:.2f}, "
    "scheduler_e2e={scheduler_e2e:.2f}, cuda_graph={{{cuda_graph}}}, tokenizer_e2e={tokenizer_e2e:.2f}"
)
GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
SIGQUIT = "Received sigquit from a child process. It usually means the child failed."
CHILD_FAILED = "Child process unexpectedly failed with exitcode={code}. pid={pid}"
RANK_DEAD = "Rank {rank} scheduler is dead. Please check if there are relevant logs."
EXIT_CODE = "Exit code: {code}"
WARMUP_FAILED = "Initialization failed. warmup error: {traceback}"
READY = "The server is fired up and ready to roll!"
# managers/tokenizer_manager.py:4066-4069: the handler is installed with loop.add_signal_handler, which calls it
# without arguments, so the real line always reads "signum=None frame=None".
SIGTERM = "SIGTERM received. signum=None frame=None. Draining requests and shutting down..."
DRAINING = "Gracefully exiting... Remaining number of requests {count}. Remaining requests remaining_rids={rids}."
FORCE_EXIT = "Signal SIGTERM received while force shutdown flag set. Force exiting."
HEALTH_DURING_SHUTDOWN = "Health check request received during shutdown. Returning 503."
# srt/utils/common.py:2523-2526; the drain ends with kill_process_tree(os.getpid(), include_parent=False).
KILL_TREE = "kill_process_tree called: parent_pid={pid}, include_parent=False, pid={pid}"
# srt/entrypoints/http_server.py:802-860.
DEPRECATED_ROUTE = ("Endpoint '/get_{name}' is deprecated and will be removed in a future version. "
                    "Please use '/{name}' instead.")

# ---- uvicorn --------------------------------------------------------------------------------
UVICORN_STARTED = "Started server process [{pid}]"
UVICORN_STARTUP = ("Waiting for application startup.", "Application startup complete.")
UVICORN_RUNNING = "Uvicorn running on {url} (Press CTRL+C to quit)"
UVICORN_BIND_ERROR = "[Errno {errno}] error while attempting to bind on address ({host!r}, {port}): {reason}"
UVICORN_SHUTDOWN = ("Shutting down", "Waiting for application shutdown.", "Application shutdown complete.")
UVICORN_FINISHED = "Finished server process [{pid}]"

# ---- exception lines ------------------------------------------------------------------------
CUDA_ERROR = (
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might "
    "be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
# torch 2.14.1 (libc10_cuda.so) when CUDA finds no usable device.
NO_CUDA_GPUS = "RuntimeError: No CUDA GPUs are available"
NOT_ENOUGH_GPU_MEMORY = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."

# ---- traceback frames (paths relative to the installed sglang package) ---------------------
SCHEDULER: list[Frame] = [
    ("srt/managers/scheduler.py", 3015, "run_scheduler_process", "scheduler = Scheduler("),
    ("srt/managers/scheduler.py", 356, "__init__", "self.init_model_worker()"),
    ("srt/managers/scheduler.py", 540, "init_model_worker", "self.tp_worker = TpModelWorker("),
    ("srt/managers/tp_worker.py", 246, "__init__", "self._model_runner = ModelRunner("),
    ("srt/model_executor/model_runner.py", 383, "__init__", "self.initialize(min_per_gpu_memory)"),
]
LOAD_FRAMES: list[Frame] = [
    *SCHEDULER,
    ("srt/model_executor/model_runner.py", 459, "initialize", "self.load_model()"),
    ("srt/model_executor/model_runner.py", 925, "load_model", "self.model = self.loader.load_model("),
    ("srt/model_loader/loader.py", 651, "load_model", "self.load_weights_and_postprocess("),
    ("srt/model_loader/loader.py", 659, "load_weights_and_postprocess", "model.load_weights(weights)"),
    ("srt/models/deepseek_v2.py", 3412, "load_weights", "weight_loader(param, loaded_weight)"),
]
CUDA_INIT_FRAMES: list[Frame] = [
    *SCHEDULER,
    ("srt/model_executor/model_runner.py", 441, "initialize", "min_per_gpu_memory = self.init_torch_distributed()"),
    ("srt/model_executor/model_runner.py", 705, "init_torch_distributed", "torch.get_device_module(self.device)"
     ".set_device(self.gpu_id)"),
]
DIST_FRAMES: list[Frame] = [
    *SCHEDULER,
    ("srt/model_executor/model_runner.py", 441, "initialize", "min_per_gpu_memory = self.init_torch_distributed()"),
    ("srt/model_executor/model_runner.py", 735, "init_torch_distributed", "init_distributed_environment("),
    ("srt/distributed/parallel_state.py", 1498, "init_distributed_environment",
     "torch.distributed.init_process_group("),
]
KV_FRAMES: list[Frame] = [
    *SCHEDULER,
    ("srt/model_executor/model_runner.py", 470, "initialize", "self.init_memory_pool("),
    ("srt/model_executor/model_runner.py", 1702, "init_memory_pool", "raise RuntimeError("),
]
HOST_FRAMES: list[Frame] = [
    SCHEDULER[0],
    ("srt/managers/scheduler.py", 360, "__init__", "self.init_cache_with_memory_pool()"),
    ("srt/managers/scheduler.py", 702, "init_cache_with_memory_pool", "self.tree_cache = HiRadixCache("),
    ("srt/mem_cache/hiradix_cache.py", 118, "__init__", "self.token_to_kv_pool_host = MLATokenToKVPoolHost("),
    ("srt/mem_cache/memory_pool_host.py", 152, "__init__", "self._check_host_memory_available()"),
    ("srt/mem_cache/memory_pool_host.py", 171, "_check_host_memory_available", "raise ValueError("),
]
RUNTIME_FRAMES: list[Frame] = [
    ("srt/managers/scheduler.py", 3040, "run_scheduler_process", "scheduler.event_loop_overlap()"),
    ("srt/managers/scheduler.py", 1188, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
    ("srt/managers/scheduler.py", 2311, "run_batch", "batch_result = self.model_worker.forward_batch_generation("),
]
WARMUP_FRAMES: list[Frame] = [
    ("srt/entrypoints/http_server.py", 1712, "_wait_and_warmup", "if not _execute_server_warmup("),
    ("srt/entrypoints/http_server.py", 1655, "_execute_server_warmup", 'assert res.status_code == 200, f"{res}"'),
]
