"""SGLang simulator: the test double behind ``python -m sglang.launch_server``.

It behaves like the real server at the process, HTTP and log level (argument parsing from the
pinned version's flag catalog, a slow "load" with the port closed, one named child process per
TP rank, 503 until warm-up, graceful SIGTERM drain, multi-node rendezvous, hicache host-memory
check), without GPUs, torch or any third-party package. Only the standard library is used.

Tuning and fault injection come from the environment:

==============================  ========  ==================================================
variable                        default   meaning
==============================  ========  ==================================================
SGLANG_SIM_LOAD_SECONDS         6         total simulated startup (weights, KV, CUDA graphs);
                                          the HTTP port stays closed during it
SGLANG_SIM_WARMUP_SECONDS       1         warm-up after the port opens; /health is 503 until
                                          it ends and "fired up and ready to roll" is logged
SGLANG_SIM_TOKEN_SECONDS        0.005     time per generated token (a request takes
                                          max_new_tokens x this)
SGLANG_SIM_DRAIN_LOG_SECONDS    5         period of SGLang's SIGTERM watchdog (5 s in SGLang):
                                          after SIGTERM, at each tick "Gracefully exiting...
                                          Remaining number of requests N", until N is 0
SGLANG_SIM_GPU_MEM_GIB          95.6      simulated memory of each GPU (GiB)
SGLANG_SIM_WEIGHT_GIB_PER_GPU   68        the true weights per GPU (GiB), which may differ from
                                          checkpoint size / TP as on a real host; device KV
                                          tokens follow the version's formula (the planner's)
SGLANG_SIM_DRAFT_WEIGHT_GIB_PER_GPU 0.45  the draft's weights per GPU (GiB); from 0.5.14 the draft
                                          loads before the KV pool and is logged like SGLang
SGLANG_SIM_MEM_AVAILABLE_GB     (unset)   host memory available for the hicache check (GB,
                                          1e9); unset = MemAvailable from /proc/meminfo
SGLANG_SIM_DIST_TIMEOUT         60        multi-node: seconds a peer retries to reach rank 0,
                                          and rank 0 waits for its peers
SGLANG_SIM_GPU_DEVICES          (unset)   1 = each rank opens /dev/nvidiactl, /dev/nvidia-uvm
                                          and its /dev/nvidia<N> at start like CUDA; a node
                                          the device policy denies (EPERM) or that is missing
                                          kills the start ("No CUDA GPUs are available")
SGLANG_SIM_FAULT                (none)    comma-separated faults: crash_at=<pct>,
                                          hang_at=<pct>, fail_warmup, crash_after_ready=<s>,
                                          slow_drain=<s>, slow_exit=<s>,
                                          exit_code=<n> (default 1), hold_load=<path>
SGLANG_HEALTH_CHECK_TIMEOUT     20        (real SGLang variable) how long /health waits for
                                          its 1-token generation before answering 503
SGL_FORCE_SHUTDOWN              (unset)   (real SGLang variable) 1 = SIGTERM exits at the
                                          watchdog's next tick, without draining
==============================  ========  ==================================================

``--config file.yaml`` is merged under the command line like SGLang does, for the YAML subset a
deployment writes (top-level scalars and lists; see ``configfile``).

``crash_at`` and ``hang_at`` act during the "Multi-thread loading shards" bar, at the
first update whose percentage reaches the value (tqdm redraws at most every 0.1 s, so the last count the
bar shows may be a few shards short of it). ``crash_after_ready`` counts from "The server is
fired up and ready to roll!". ``slow_drain`` adds its seconds once to every request that is in
flight after SIGTERM arrived. (A request in flight at SIGTERM is the real server's drill: Molecule's engine
scenario holds one with SGLang's own /pause_generation until SIGTERM.)
``hold_load=<path>`` holds the weight load at its first shard until the file <path> exists (a drill's
deterministic "still loading"). ``slow_exit=<s>`` makes the exit after SIGTERM, once no request remains (or at
once with SGL_FORCE_SHUTDOWN), take s seconds more, silently: SGLang freeing a large pinned host pool on its way
out.

The log, /metrics and /server_info follow the real 0.5.23 server; ``tests/simulator/test_sim_fidelity.py`` holds
them to recordings of it (tests/fixtures/sglang-engine/). Scheduler lines carry " TP<n>" only when tp_size > 1;
/metrics writes the start-up constants once per TP rank and the log_stats gauges from TP rank 0 only (every rank
with --enable-metrics-for-all-schedulers).
"""
