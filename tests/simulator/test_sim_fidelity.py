"""The simulator held to recordings of the REAL SGLang 0.5.23 server (tests/fixtures/sglang-engine/: the unmodified
wheel on this machine's CPU, a tiny Llama, tp_size 1), so that it cannot drift from the engine it stands in for.

(a) Run with the recording's own command line (its /get_server_info's launch_command) and asked what the real
    server was asked after it was ready (its access log), every line the simulator writes that is of a kind the
    real log has must have the real line's shape (numbers, times and paths normalised), in the real order; the
    real kinds it does not write are named in NOT_SIMULATED; it drains and exits like the real one; the lines the
    package reads are there (the readiness waiter's phases, the startup reader's figures); /get_server_info has the
    real shape.
(b) Every metric family it serves exists in the real scrape with the same type, label names and HELP (the
    families the CPU run cannot show, HiCache's and the prefix cache's: in tests/fixtures/metrics/sglang-0.5.23.json,
    read from the wheel).
(c) With 8 TP ranks the start-up constants (emit_constants) have one series per rank and the log_stats gauges one
    (tp_rank 0), or eight with --enable-metrics-for-all-schedulers.

The recordings are read, not copied here: re-recorded in the same format, they re-target the test.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import signal
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_startup, sglang_waiter
from helpers import load_script, wait_for
from sim_helpers import (
    REAL_CATALOG_DIR,
    REPO,
    VERSION,
    Server,
    build_wheel,
    free_port,
    get_status,
    kimi_config,
    request,
    server_args,
    sim_env,
    write_model,
)

ENGINE = REPO / "tests" / "fixtures" / "sglang-engine"
REAL_START = ENGINE / f"startup-{VERSION}-cpu.log"
REAL_DRAIN = ENGINE / f"drain-{VERSION}-cpu.log"
REAL_SCRAPE = ENGINE / f"metrics-{VERSION}-cpu.txt"
REAL_INFO = ENGINE / f"server-info-{VERSION}-cpu.json"
WHEEL_METRICS = REPO / "tests" / "fixtures" / "metrics" / f"sglang-{VERSION}.json"
TINY_LLAMA = REPO / "extensions" / "molecule" / "resources" / "models" / "make_tiny_llama.py"
MC_PY = Path("/var/cache/sglang-deploy/probe/src/sglang/srt/observability/metrics_collector.py")

# Kinds of real lines the simulator does not write, and why (a line of a new kind fails the test until it is
# simulated or listed here).
NOT_SIMULATED = {
    r"^Fail to set RLIMIT_NOFILE": "the recording machine's file limit",
    r"^Using default HuggingFace chat template": "the simulator has no tokenizer or chat template",
    r"^init_threads_binding|^init_cpu_threads_env": "the CPU engine's thread binding",
    r"^Cannot detect CUDA architecture": "the CPU engine",
    r"^Ignore import error when loading": "model classes the CPU build cannot import",
    r"^Init Unified Radix Cache|^Tree cache initialized": "the radix tree's own start-up lines",
    r"^Using fallback token IDs": "the tokenizer's yes/no ids",
    r"^Decode batch": "decode batches (every decode_log_interval steps) are not simulated",
}
# Kinds whose place depends on the requests, not on the start or the drain.
UNORDERED = (r"^INFO: #\.#\.#\.#:# -", r"^Prefill batch", r"^Endpoint ", r"^Health check request")
# Request bodies by path, for replaying the recording's requests (a recorded POST to another path fails the test).
BODIES: dict[str, dict[str, Any]] = {
    "/generate": {"text": "The capital of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 16}},
    "/v1/completions": {"model": "tiny-llama", "prompt": "Once upon a time", "max_tokens": 8, "stream": True},
    "/v1/chat/completions": {"model": "tiny-llama", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8},
    "/freeze_gc": {},
}
# The gauges emit_constants() sets once at start-up on EVERY scheduler process (0.5.23
# srt/observability/metrics_collector.py:1769-1800, called from managers/scheduler.py:1278-1282); every other
# scheduler gauge the simulator serves is a log_stats gauge (metrics_collector.py:1646-1680, attention-TP rank 0).
EMIT_CONSTANTS = frozenset({
    "sglang:max_total_num_tokens", "sglang:max_total_num_tokens_swa", "sglang:weight_memory_usage_gb",
    "sglang:kv_cache_memory_usage_gb", "sglang:graph_memory_usage_gb", "sglang:max_running_requests_under_SLO",
    "sglang:page_size", "sglang:num_pages", "sglang:context_len", "sglang:startup_available_gpu_memory_gb",
})
SCHEDULER_LABEL = "moe_ep_rank"  # only scheduler gauges carry it (the prefix cache's counters have tp_rank too)

_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?P<ranks>(?: [A-Z_]+\d+)*)\] (?P<message>.*)$")
_VARIABLE = re.compile(r"(?P<type>(?<=type=)\w+)|(?P<path>/(?:[^\s/'\",()\[\]]+/){2,}[^\s/'\",()\[\]]*)"
                       r"|(?P<number>-?\d+(?:\.\d+)*)")
_ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/1\.1" (?P<status>\d{3})')
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})? \S+$")


# ---- the recordings, read ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Record:
    """One line of a log: SGLang's prefix ranks ("" or " TP3"), the message, and its kind."""

    ranks: str
    message: str

    @property
    def kind(self) -> str:
        return kind_of(self.message)


def kind_of(message: str) -> str:
    """A message's first three words with the digits masked: "Load weight end.", "INFO: #.#.#.#:# -"."""
    if message.startswith("server_args="):
        return "server_args="
    return " ".join(re.sub(r"\d+", "#", message).split()[:3])


def records(text: str) -> list[Record]:
    """SGLang's and uvicorn's lines ("[<time>( TPn)] ..."), and each drawing of a tqdm bar ("\\r..."); the rest
    (Python warnings and their source lines) is not SGLang's."""
    found = []
    for line in text.split("\n"):
        for segment in line.split("\r"):
            if match := _PREFIX.match(segment):
                found.append(Record(match.group("ranks"), match.group("message")))
            elif segment.startswith("Multi-thread loading shards:"):
                found.append(Record("", segment.rstrip()))
    return found


def shape(message: str) -> re.Pattern[str]:
    """The real message as a pattern: numbers keep their form (an "%.2f" stays two decimals, a sign may come),
    paths of three parts or more and a model class (type=...) become any, runs of blanks any run of blanks."""
    parts, position = [], 0
    for match in _VARIABLE.finditer(message):
        parts += [_literal(message[position:match.start()]), _variable(match)]
        position = match.end()
    parts.append(_literal(message[position:]))
    return re.compile("".join(parts))


def _literal(text: str) -> str:
    return " +".join(re.escape(piece) for piece in re.split(r" +", text))


def _variable(match: re.Match[str]) -> str:
    if match.group("type"):
        return r"\w+"
    if match.group("path"):
        return r"/\S+?"
    number = match.group("number").lstrip("-")
    pieces = number.split(".")
    if len(pieces) == 2:
        return rf"-?\d+\.\d{{{len(pieces[1])}}}"
    return r"-?\d+" + r"(?:\.\d+)" * (len(pieces) - 1)


def real_records() -> list[Record]:
    return records(REAL_START.read_text()) + records(REAL_DRAIN.read_text())


def real_server_args() -> dict[str, Any]:
    line = next(r.message for r in real_records() if r.kind == "server_args=")
    return dict(ast.literal_eval(line.split("=", 1)[1]))


def real_info() -> dict[str, Any]:
    return dict(json.loads(REAL_INFO.read_text()))


def recorded_requests() -> list[tuple[str, str, int]]:
    """(method, path, status) of each request the real server answered after it was ready."""
    log = REAL_START.read_text()
    after = log[log.index("The server is fired up and ready to roll!"):]
    return [(m.group("method"), m.group("path"), int(m.group("status"))) for m in _ACCESS.finditer(after)]


@dataclass(frozen=True)
class Family:
    kind: str
    labels: frozenset[str]
    help: str


def families(text: str) -> dict[str, Family]:
    """Prometheus text -> {family: its TYPE, the label names of its series (le/quantile aside), its HELP}."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    labels: dict[str, set[str]] = {name: set() for name in types}
    for line in text.splitlines():
        sample = _SAMPLE.match(line)
        if sample and not line.startswith("#"):
            name = sample.group("name")
            family = next((f for f in (name, re.sub(r"_(bucket|sum|count)$", "", name)) if f in types), None)
            assert family, f"sample {name} has no TYPE line"
            labels[family] |= set(re.findall(r'(\w+)="', sample.group("labels") or "")) - {"le", "quantile"}
    return {name: Family(kind, frozenset(labels[name]), helps.get(name, "")) for name, kind in types.items()}


def series(text: str, family: str) -> list[dict[str, str]]:
    return [dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            for m in re.finditer(rf"^{re.escape(family)}\{{([^}}]*)\}} \S+$", text, re.M)]


# ---- the simulator, run ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulator wheel built with the real 0.5.23 flag catalog (the recording's flags are all in it)."""
    wheel = build_wheel(tmp_path_factory.mktemp("fidelity-wheel"), catalog=REAL_CATALOG_DIR / f"sglang-{VERSION}.json")
    site = tmp_path_factory.mktemp("fidelity-site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return site


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recording's model (molecule/resources/models/make_tiny_llama.py), one shard."""
    config = load_script(TINY_LLAMA).config(4096, "LlamaForCausalLM")
    return write_model(tmp_path_factory.mktemp("fidelity-model") / "tiny", config, shards=1)


def recorded_command(model: Path, port: int) -> list[str]:
    """The recording's command line, with this model directory and a free port."""
    argv = shlex.split(real_info()["launch_command"])
    argv[argv.index("--model-path") + 1] = str(model)
    argv[argv.index("--port") + 1] = str(port)
    return argv


def wait_ready(server: Server) -> None:
    """Poll /health_generate, as the recording's harness did (its 503s are in the real log)."""
    def ready() -> bool:
        assert server.running(), f"the simulator exited {server.proc.returncode}:\n{server.stderr[-3000:]}"
        return get_status(server.port, "/health_generate") == 200

    wait_for(ready, 120, interval=0.1, what="health 200")


@dataclass
class Run:
    stderr: str
    stdout: str
    exit_code: int
    answers: dict[str, bytes]

    @property
    def log(self) -> str:
        return self.stderr + self.stdout

    @property
    def drain(self) -> list[Record]:
        start = self.stderr.index("SIGTERM received")
        return records(self.stderr[self.stderr.rindex("\n", 0, start) + 1:])


def replay(server: Server) -> dict[str, bytes]:
    answers = {}
    for method, path, status in recorded_requests():
        if method == "POST" and path not in BODIES:
            pytest.fail(f"the recording POSTs to {path}: give BODIES a request body for it")
        got, body, _headers = request(server.port, method, path, BODIES.get(path) if method == "POST" else None)
        assert got == status, f"{method} {path}: the simulator answered {got}, the real server {status}"
        answers[path] = body
    return answers


@pytest.fixture(scope="module")
def recorded_run(sim_python: Path, real_site: Path, tiny_llama: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The simulator with the recording's settings, asked what the real server was asked, then SIGTERMed."""
    server = Server(sim_python, recorded_command(tiny_llama, free_port()), sim_env(PYTHONPATH=str(real_site)),
                    tmp_path_factory.mktemp("fidelity-run"))
    try:
        wait_ready(server)
        answers = replay(server)
        answers["/metrics"] = request(server.port, "GET", "/metrics")[1]
        server.send(signal.SIGTERM)
        code = server.wait_exit()
        yield Run(server.stderr, server.stdout, code, answers)
    finally:
        server.kill()


def scrape_tp8(sim_python: Path, site: Path, model: Path, workdir: Path, *extra: str) -> tuple[str, str]:
    """/metrics and the log of an 8-rank server with HiCache, after one request."""
    port = free_port()
    args = server_args(model, port, "--enable-metrics", "--enable-hierarchical-cache", "--hicache-ratio", "2", *extra)
    server = Server(sim_python, args, sim_env(PYTHONPATH=str(site)), workdir)
    try:
        wait_ready(server)
        request(port, "POST", "/generate", BODIES["/generate"])
        return request(port, "GET", "/metrics")[1].decode(), server.stderr
    finally:
        server.kill()


@pytest.fixture(scope="module")
def kimi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model(tmp_path_factory.mktemp("fidelity-kimi") / "kimi", kimi_config())


@pytest.fixture(scope="module")
def tp8(sim_python: Path, real_site: Path, kimi: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return scrape_tp8(sim_python, real_site, kimi, tmp_path_factory.mktemp("tp8"))


# ---- (a) the log -------------------------------------------------------------------------------------------------

# What the CPU run prints where a GPU server prints otherwise, by the source: the capacity line's memory
# (managers/scheduler.py:1274), the batch lines' graph (scheduler_components/metrics_reporter.py:286-290), and an
# MLA model's one KV size (mem_cache/memory_pool.py:2083-2098).
GPU_VARIANTS = (
    (r"available_cpu_mem=", "available_gpu_mem="),
    (r"cpu graph: ", "cuda graph: "),
    (r"K size: ([\d.]+) GB, V size: [\d.]+ GB", r"KV size: \1 GB"),
)


def on_gpu(real: list[Record]) -> list[Record]:
    """The real lines, and each as a GPU server (an MLA model's) would print it."""
    variants = []
    for record in real:
        message = record.message
        for pattern, replacement in GPU_VARIANTS:
            message = re.sub(pattern, replacement, message)
        if message != record.message:
            variants.append(Record(record.ranks, message))
    return real + variants


def mismatches(simulated: list[Record], real: list[Record], same_prefix: bool = True) -> list[str]:
    """Each simulated line of a real kind that has the shape of no real line of that kind."""
    by_kind: dict[str, list[Record]] = {}
    for record in real:
        by_kind.setdefault(record.kind, []).append(record)
    found = []
    for record in simulated:
        shapes = by_kind.get(record.kind)
        if not shapes or record.kind == "server_args=":
            continue
        if not any(shape(r.message).fullmatch(record.message) and (not same_prefix or r.ranks == record.ranks)
                   for r in shapes):
            found.append(f"simulator: [..{record.ranks}] {record.message!r}\n"
                         f"     real: [..{shapes[0].ranks}] {shapes[0].message!r}")
    return found


def test_every_line_has_the_shape_of_the_real_line_of_its_kind(recorded_run: Run) -> None:
    problems = mismatches(records(recorded_run.log), real_records())
    assert not problems, "lines that drifted from SGLang 0.5.23's:\n" + "\n".join(problems)


def test_the_simulator_writes_every_real_kind_but_the_listed_ones(recorded_run: Run) -> None:
    written = {record.kind for record in records(recorded_run.log)}
    missing = {r.kind: r.message for r in real_records()
               if r.kind not in written and not any(re.search(p, r.message) for p in NOT_SIMULATED)}
    assert not missing, "real lines the simulator does not write (simulate them or list them in NOT_SIMULATED):\n" \
        + "\n".join(missing.values())


def first_kinds(found: list[Record], among: set[str]) -> list[str]:
    kinds = [r.kind for r in found if r.kind in among and not any(re.search(p, r.kind) for p in UNORDERED)]
    return list(dict.fromkeys(kinds))


def test_the_lines_come_in_the_real_order(recorded_run: Run) -> None:
    simulated, real = records(recorded_run.stderr), real_records()
    shared = {r.kind for r in simulated} & {r.kind for r in real}
    assert first_kinds(simulated, shared) == first_kinds(real, shared)


def test_the_drain_ends_as_the_real_one(recorded_run: Run) -> None:
    """SIGTERM -> the watchdog's count of the remaining requests down to 0 -> kill_process_tree -> uvicorn's
    shutdown -> exit 0 (the real exit code)."""
    assert recorded_run.exit_code == 0
    real = records(REAL_DRAIN.read_text())
    drained = recorded_run.drain
    expected, got = first_kinds(real, {r.kind for r in real}), first_kinds(drained, {r.kind for r in real})
    assert got == expected, f"the drain's lines: simulator {got}, real {expected}"
    problems = mismatches(drained, real)
    assert not problems, "drain lines that drifted:\n" + "\n".join(problems)


def test_the_server_args_line_is_the_resolved_dict(recorded_run: Run) -> None:
    line = next(r.message for r in records(recorded_run.stderr) if r.kind == "server_args=")
    assert line.startswith("server_args={"), f"not the resolved dict of 0.5.19+: {line[:120]!r}"
    logged, real = dict(ast.literal_eval(line.split("=", 1)[1])), real_server_args()
    assert next(iter(logged)) == next(iter(real))
    assert set(logged) <= set(real), f"keys SGLang 0.5.23 does not log: {sorted(set(logged) - set(real))}"
    for key in given_settings():
        assert logged[key] == real[key], f"server_args[{key!r}]: simulator {logged[key]!r}, real {real[key]!r}"


def given_settings() -> list[str]:
    """The settings the recording's command line gives, but the model path and the port."""
    flags = [word for word in shlex.split(real_info()["launch_command"]) if word.startswith("--")]
    return [flag[2:].replace("-", "_") for flag in flags if flag not in ("--model-path", "--port")]


def test_the_package_reads_the_simulators_start_as_the_real_one(recorded_run: Run) -> None:
    """The readiness waiter's phases (plugins/module_utils/sglang_waiter.py) and the startup reader's figures
    (plugins/module_utils/sglang_startup.py) come out of both logs alike."""
    real_text = REAL_START.read_text()
    assert sglang_waiter.PHASES
    for marker, name, _stall in sglang_waiter.PHASES:
        if marker.search(real_text):
            assert marker.search(recorded_run.stderr), f"no line of the phase {name!r} ({marker.pattern})"
    real, simulated = sglang_startup.read(real_text), sglang_startup.read(recorded_run.stderr)
    assert len(simulated.ranks) == len(real.ranks)
    assert simulated.kv_tokens == real.kv_tokens
    assert [w.architecture for w in simulated.loads] == [w.architecture for w in real.loads]
    assert simulated.summary.keys() == real.summary.keys()
    assert simulated.summary["max_total_num_tokens"] == real.summary["max_total_num_tokens"]
    assert simulated.server_args.keys() == real.server_args.keys()


def test_server_info_has_the_real_shape(recorded_run: Run) -> None:
    """/get_server_info: the resolved args plus the scheduler's and the tokenizer's state, keyed and typed as
    the real one, its version the installed package's ("<pin>+sim", as SGLang reports sglang.__version__)."""
    real, info = real_info(), json.loads(recorded_run.answers["/get_server_info"])
    args = real_server_args()
    assert set(info) <= set(real), f"keys the real server does not answer: {sorted(set(info) - set(real))}"
    for key in sorted(set(real) - set(args)):
        assert key in info, f"/get_server_info has no {key!r}"
        assert type(info[key]) is type(real[key]) or real[key] is None, (key, info[key], real[key])
        if isinstance(real[key], dict):
            assert info[key].keys() == real[key].keys(), key
    for key in given_settings():
        assert info[key] == real[key], (key, info[key], real[key])
    state, real_state = info["internal_states"][0], real["internal_states"][0]
    assert set(state) - set(args) == set(real_state) - set(args)
    assert state["memory_usage"].keys() == real_state["memory_usage"].keys()
    assert state["memory_usage"]["graph"].keys() == real_state["memory_usage"]["graph"].keys()
    assert info["startup_time"]["cuda_graph"].keys() == real["startup_time"]["cuda_graph"].keys()
    assert info["version"] == real["version"] + "+sim"
    for answer in (info, real):  # tp_worker.py:568-572
        limit = min(answer["context_length"] or answer["max_total_num_tokens"], answer["max_total_num_tokens"])
        assert answer["max_req_input_len"] == limit - 1 - 5
    assert launched(info) == launched(real)


def launched(info: dict[str, Any]) -> str:
    """launch_command with the model path and the port masked."""
    masks = {str(info["model_path"]): "<model>", str(info["port"]): "<port>"}
    return " ".join(masks.get(word, word) for word in info["launch_command"].split())


# ---- (b) the metric families -------------------------------------------------------------------------------------

def drifted_families(text: str) -> list[str]:
    """Each family the simulator serves that the real server does not serve alike."""
    real = families(REAL_SCRAPE.read_text())
    wheel = json.loads(WHEEL_METRICS.read_text())["metrics"]
    problems = []
    for name, family in sorted(families(text).items()):
        if name in real:
            expected = real[name]
            if (family.kind, family.labels, family.help) != (expected.kind, expected.labels, expected.help):
                problems.append(f"{name}: simulator {family}, real {expected}")
        elif name in wheel:  # a family the CPU run cannot show (HiCache, the prefix cache's evictions)
            expected_labels = frozenset(wheel[name]["labels"])
            if (family.kind, family.labels) != (wheel[name]["type"], expected_labels):
                problems.append(f"{name}: simulator {family.kind} {sorted(family.labels)}, 0.5.23's wheel "
                                f"{wheel[name]['type']} {sorted(expected_labels)}")
        else:
            problems.append(f"{name}: no such family in SGLang 0.5.23")
    return problems


def test_every_metric_family_served_is_a_real_one(recorded_run: Run, tp8: tuple[str, str]) -> None:
    for text in (recorded_run.answers["/metrics"].decode(), tp8[0]):
        problems = drifted_families(text)
        assert not problems, "metric families that drifted from SGLang 0.5.23's:\n" + "\n".join(problems)
    served = families(recorded_run.answers["/metrics"].decode())
    assert {"sglang:max_total_num_tokens", "sglang:context_len", "sglang:token_usage",
            "sglang:num_requests_total"} <= set(served)


def test_the_families_are_the_real_wheels() -> None:
    """The real scrape agrees with the project's record of the wheel, which stands in for what the CPU run cannot
    show (a check of the stand-in, not of the simulator)."""
    wheel = json.loads(WHEEL_METRICS.read_text())["metrics"]
    for name, family in families(REAL_SCRAPE.read_text()).items():
        if name in wheel and not name.startswith("sglang:process_"):
            assert family.kind == wheel[name]["type"], name


# ---- (c) who writes which series ---------------------------------------------------------------------------------

def scheduler_families(text: str) -> dict[str, list[dict[str, str]]]:
    found = {name: series(text, name) for name, family in families(text).items() if SCHEDULER_LABEL in family.labels}
    return {name: [s for s in found[name] if s.get("phase", "decode") == "decode"] for name in found}


def check_ranks(text: str, stats_ranks: list[str]) -> None:
    every = [str(rank) for rank in range(8)]
    by_family = scheduler_families(text)
    assert EMIT_CONSTANTS & set(by_family) >= {"sglang:max_total_num_tokens", "sglang:context_len"}
    assert {"sglang:token_usage", "sglang:num_queue_reqs", "sglang:hicache_host_total_tokens"} <= set(by_family)
    for name, found in by_family.items():
        expected = every if name in EMIT_CONSTANTS else stats_ranks
        assert sorted((s["tp_rank"] for s in found), key=int) == expected, \
            f"{name}: series of tp_rank {[s['tp_rank'] for s in found]}, SGLang writes {expected}"


def test_constants_come_from_every_rank_and_log_stats_from_rank_0(tp8: tuple[str, str]) -> None:
    check_ranks(tp8[0], ["0"])


def test_all_schedulers_write_log_stats_with_the_flag(sim_python: Path, real_site: Path, kimi: Path,
                                                      tmp_path: Path) -> None:
    text, _log = scrape_tp8(sim_python, real_site, kimi, tmp_path, "--enable-metrics-for-all-schedulers")
    check_ranks(text, [str(rank) for rank in range(8)])


def test_emit_constants_is_the_wheels() -> None:
    """EMIT_CONSTANTS against the unpacked wheel's emit_constants() when this machine has it."""
    if not MC_PY.exists():
        pytest.skip(f"{MC_PY} is not here")
    source = MC_PY.read_text()
    body = source[source.index("    def emit_constants("):]
    end = re.search(r"\n(?:    def |def |class )", body[10:])
    body = body[:10 + end.start()] if end else body
    names = set(re.findall(r"self\.(\w+)(?:,|\.labels)", body))
    declared = dict(re.findall(r"self\.(\w+) = Gauge\(\s*name=\"(sglang:\w+)\"", source))
    assert {declared[name] for name in names if name in declared} == EMIT_CONSTANTS


# ---- the 8-rank log: what a GPU server writes ---------------------------------------------------------------------

def test_an_8_rank_start_has_every_phase_and_real_shaped_lines(tp8: tuple[str, str]) -> None:
    """Every readiness phase is there (CUDA graphs and the HiCache host pool too), each scheduler line carries its
    rank as SGLang writes it with tp_size > 1 (" TPn"), and the lines of the real kinds keep the real shapes."""
    log = tp8[1]
    for marker, name, _stall in sglang_waiter.PHASES:
        assert marker.search(log), f"no line of the phase {name!r} ({marker.pattern})"
    simulated = records(log)
    assert sorted({r.ranks for r in simulated if r.kind == "Load weight begin."}) == sorted(
        f" TP{rank}" for rank in range(8))
    problems = mismatches(simulated, on_gpu(real_records()), same_prefix=False)
    assert not problems, "lines that drifted from SGLang 0.5.23's:\n" + "\n".join(problems)
