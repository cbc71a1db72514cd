"""sglang_host_facts: GPUs, the unit's processes and memory, the model and the port, read through the module."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.sglang.deploy.plugins.modules import sglang_host_facts as facts_mod
from helpers import ROOT
from host_commands import Commands

REAL = ROOT / "tests" / "fixtures" / "real-host"
KIMI = json.loads((ROOT / "extensions/molecule/resources/models/kimi-k2.5/config.json").read_text())
NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
GPU_CSV = "\n".join(f"{i}, {NAME}, 97887, 12.0, Default, 00000000:{i + 1:02X}:00.0, Enabled, GPU-{i:08x}, 580.95.05"
                    for i in range(8)) + "\n"
GPU_QUERY = ["--query-gpu=index,name,memory.total,compute_cap,compute_mode,pci.bus_id,persistence_mode,uuid,"
             "driver_version", "--format=csv,noheader,nounits"]


def test_gpu_facts_come_from_nvidia_smi(commands: Commands, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = commands.add("nvidia-smi", stdout=GPU_CSV)
    monkeypatch.setattr(facts_mod, "iommu_mode", lambda bus_ids: f"passthrough ({len(bus_ids)} GPUs)")
    found, notes = facts_mod.gpus(commands.module, smi)
    p2p = found.pop("p2p_read")
    assert found == {"gpu_count": 8, "gpu_names": [NAME], "gpu_memory_mib": 97887, "compute_capability": "12.0",
                     "compute_modes": ["Default"] * 8, "iommu": "passthrough (8 GPUs)"}
    assert p2p == {} and notes == []  # this stub answers topo with the GPU list, which holds no matrix
    assert commands.calls("nvidia-smi")[0] == GPU_QUERY
    assert commands.calls("nvidia-smi")[1] == ["topo", "-p2p", "r"]


def test_the_p2p_matrix_of_a_real_host_is_read(commands: Commands, monkeypatch: pytest.MonkeyPatch) -> None:
    topo = (REAL / "nvidia-smi-topo-p2p-r-8gpu-pcie.txt").read_text()
    monkeypatch.setattr(facts_mod.smi, "run", lambda module, command, args: facts_mod.smi.Answer(
        0, topo if args[0] == "topo" else GPU_CSV, ""))
    found, notes = facts_mod.gpus(commands.module, "nvidia-smi")
    assert not notes and len(found["p2p_read"]) == 56 and set(found["p2p_read"].values()) == {"OK"}


def test_a_host_without_a_driver_yet_gives_a_note_not_facts(commands: Commands) -> None:
    found, notes = facts_mod.gpus(commands.module, "nvidia-smi")  # not installed at all
    assert found == {} and "nvidia-smi is not installed" in notes[0]
    commands.add("nvidia-smi", stdout="NVIDIA-SMI has failed because it couldn't communicate with the driver", rc=9)
    found, notes = facts_mod.gpus(commands.module, "nvidia-smi")
    assert found == {} and "NVIDIA-SMI has failed" in notes[0] and "inventory's GPU values" in notes[0]
    commands.add("nvidia-smi", stdout="0, NVIDIA L40S\n")
    found, notes = facts_mod.gpus(commands.module, "nvidia-smi")  # output of another shape
    assert found == {} and "unexpected nvidia-smi line" in notes[0]


def test_foreign_compute_apps_leave_out_the_units_own(commands: Commands) -> None:
    smi = commands.add("nvidia-smi", stdout="7, python3, 80000\n99, other, 1000\nNo running processes found\n")
    assert facts_mod.foreign_compute_apps(commands.module, smi, {7}) == [
        {"pid": 99, "name": "other", "used_memory_mib": "1000"}]
    assert commands.calls("nvidia-smi") == [["--query-compute-apps=pid,process_name,used_memory",
                                             "--format=csv,noheader,nounits"]]


def test_the_units_control_group_memory_and_state_come_from_one_systemctl_show(commands: Commands) -> None:
    commands.add("systemctl", stdout="ControlGroup=/system.slice/sglang-kimi.service\nMemoryCurrent=1048576\n"
                                     "LoadState=loaded\nActiveState=active\n")
    assert facts_mod.unit_properties(commands.module, "sglang-kimi.service") == ({
        "ControlGroup": "/system.slice/sglang-kimi.service", "MemoryCurrent": "1048576", "LoadState": "loaded",
        "ActiveState": "active"}, "")
    assert commands.calls("systemctl") == [
        ["show", "-p", "ControlGroup,MemoryCurrent,LoadState,ActiveState,MainPID,ExecMainStartTimestampMonotonic,"
         "NeedDaemonReload", "--", "sglang-kimi.service"]]
    commands.add("systemctl", stderr="Failed to connect to bus", rc=1)
    properties, error = facts_mod.unit_properties(commands.module, "sglang-kimi.service")
    assert properties == {} and "Failed to connect to bus" in error


def test_the_deployed_state_comes_with_the_read_as_sglang_service_state_gives_it(
        commands: Commands, monkeypatch: pytest.MonkeyPatch, run_module: Any, tmp_path: Path) -> None:
    """deploy.yml's one read of a host: with deployed_files, the files' checksums, the unit's state and a
    pending reboot, in sglang_service_state's shape; a systemctl that cannot tell fails the read, as it fails
    sglang_service_state (the restart decision must not guess)."""
    from ansible_collections.sglang.deploy.plugins.modules import sglang_service_state as state_mod

    monkeypatch.setattr(facts_mod.AnsibleModule, "get_bin_path", lambda self, arg, *args, **kwargs:
                        commands.get_bin_path(arg))
    monkeypatch.setattr(state_mod.AnsibleModule, "get_bin_path", lambda self, arg, *args, **kwargs:
                        commands.get_bin_path(arg))
    unit, env = tmp_path / "sglang-kimi.service", tmp_path / "kimi.env"
    unit.write_text("[Service]\n")
    commands.add("systemctl", stdout="ControlGroup=/system.slice/sglang-kimi.service\nMemoryCurrent=[not set]\n"
                                     "LoadState=loaded\nActiveState=active\n")
    files = [str(unit), str(env)]
    result = run_module(facts_mod.main, {"unit": "sglang-kimi.service", "model_path": str(tmp_path),
                                         "nvidia_smi_path": "nvidia-smi", "deployed_files": files})
    expected = run_module(state_mod.main, {"unit": "sglang-kimi.service", "files": files})
    # (This systemctl stub answers every property whatever -p asks: the unit's state is compared on its own.)
    compared = ("files", "reboot", "running")
    assert {key: result["deployed"][key] for key in compared} == {key: expected[key] for key in compared}
    assert result["deployed"]["files"] == {str(unit): hashlib.sha1(b"[Service]\n").hexdigest(), str(env): None}
    assert result["deployed"]["unit"] == {"LoadState": "loaded", "ActiveState": "active", "MainPID": "",
                                          "ExecMainStartTimestampMonotonic": "", "NeedDaemonReload": ""}
    assert result["deployed"]["running"] is None  # no main process
    without = run_module(facts_mod.main, {"unit": "sglang-kimi.service", "model_path": str(tmp_path),
                                          "nvidia_smi_path": "nvidia-smi"})
    assert "deployed" not in without
    commands.add("systemctl", stderr="Failed to connect to bus", rc=1)
    failed = run_module(facts_mod.main, {"unit": "sglang-kimi.service", "model_path": str(tmp_path),
                                         "nvidia_smi_path": "nvidia-smi", "deployed_files": files})
    assert failed.get("failed") and "Failed to connect to bus" in failed["msg"]


@pytest.mark.parametrize(("value", "expected"), [("1048576", 1048576), ("[not set]", 0), ("", 0),
                                                 (str(2**64 - 1), 0)])
def test_unit_memory(value: str, expected: int) -> None:
    assert facts_mod.unit_memory(value) == expected


def test_unit_pids_read_the_control_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    group = tmp_path / "system.slice" / "sglang-kimi.service"
    group.mkdir(parents=True)
    (group / "cgroup.procs").write_text("7\n8\n")
    monkeypatch.setattr(facts_mod, "CGROUP_ROOTS", (str(tmp_path),))
    assert facts_mod.unit_pids("/system.slice/sglang-kimi.service") == {7, 8}
    assert facts_mod.unit_pids("") == set()


def test_model_directory_is_read_and_its_shards_summed(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(KIMI))
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"x" * 100)
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"x" * 50)
    config, size, errors = facts_mod.model(str(tmp_path), "sglang_model_path")
    assert config == KIMI and size == 150 and not errors
    errors = facts_mod.model(str(tmp_path / "missing"), "sglang_model_path")[2]
    assert errors[0].startswith("sglang_model_path: ") and "is not a directory" in errors[0]


def test_with_presharded_the_read_brings_the_fingerprints_and_the_dump_directory(tmp_path: Path) -> None:
    model, draft, dumps = tmp_path / "model", tmp_path / "draft", tmp_path / "presharded"
    for path in (model, draft):
        path.mkdir()
        (path / "config.json").write_text(json.dumps(KIMI))
        (path / "a.safetensors").write_bytes(b"x" * 10)
    (dumps / "0123456789abcdef" / "TP-8-sig-0011223344556677").mkdir(parents=True)
    (dumps / "0123456789abcdef" / "TP-8-sig-0011223344556677" / "READY").write_text("")
    (dumps / "0123456789abcdef" / "TP-8-sig-0011223344556677" / "model-00000-common.safetensor").write_bytes(b"y" * 7)
    found: dict[str, Any] = {}
    params = {"model_path": str(model), "draft_model_path": str(draft), "presharded_dir": str(dumps)}
    assert facts_mod.model_facts(found, params) == []
    assert len(found["weights_fingerprint"]) == 64 and len(found["draft_weights_fingerprint"]) == 64
    assert found["presharded"]["dumps"]["0123456789abcdef"]["ready"] is True
    assert found["presharded"]["dumps"]["0123456789abcdef"]["bytes"] == 7
    assert found["presharded"]["free_bytes"] > 0
    without: dict[str, Any] = {}
    facts_mod.model_facts(without, {**params, "presharded_dir": None})
    assert "presharded" not in without and "weights_fingerprint" not in without


@pytest.mark.parametrize(("ss", "own", "foreign"), [
    ("", {1}, False),                                                   # nothing listens
    ('LISTEN 0 5 0.0.0.0:30000 0.0.0.0:* users:(("python",pid=7,fd=3))', {7, 8}, False),  # the unit's
    ('LISTEN 0 5 0.0.0.0:30000 0.0.0.0:* users:(("nginx",pid=99,fd=3))', {7}, True),      # someone else
    ("LISTEN 0 5 0.0.0.0:30000 0.0.0.0:*", {7}, False),                 # no PID visible, unit running
    ("LISTEN 0 5 0.0.0.0:30000 0.0.0.0:*", set(), True),                # no PID visible, unit down
])
def test_port_holder(commands: Commands, ss: str, own: set[int], foreign: bool) -> None:
    commands.add("ss", stdout=ss + "\n")
    assert bool(facts_mod.port_holder(facts_mod.listeners(commands.module, 30000), own)) is foreign
    assert commands.calls("ss") == [["-Htlnp", "sport", "=", ":30000"]]


def test_the_module_reports_every_problem_without_failing(
        commands: Commands, monkeypatch: pytest.MonkeyPatch, run_module: Any, tmp_path: Path) -> None:
    monkeypatch.setattr(facts_mod.AnsibleModule, "get_bin_path", lambda self, arg, *args, **kwargs:
                        commands.get_bin_path(arg))
    commands.add("ss", stdout='LISTEN 0 5 0.0.0.0:30000 0.0.0.0:* users:(("nginx",pid=99,fd=3))\n')
    result = run_module(facts_mod.main, {"unit": "sglang-kimi.service", "model_path": str(tmp_path / "none"),
                                         "port": 30000, "nvidia_smi_path": "nvidia-smi"})
    found = result["facts"]
    assert result["changed"] is False and not result.get("failed")
    assert found["errors"][0].startswith("sglang_model_path: ") and found["errors"][1].startswith("sglang_port: 30000")
    assert "nvidia-smi is not installed" in found["notes"][0] and found["compute_apps"] == []
    assert found["unit_memory_bytes"] == 0 and found["host_mem_available_bytes"] > 0


def test_the_install_roles_stamps_come_back_as_the_runs_fact_with_the_host(
        commands: Commands, monkeypatch: pytest.MonkeyPatch, run_module: Any, tmp_path: Path) -> None:
    """One read of the host in deploy.yml: the stamps come back as converge_stamp returns them."""
    monkeypatch.setattr(facts_mod.AnsibleModule, "get_bin_path", lambda self, arg, *args, **kwargs:
                        commands.get_bin_path(arg))
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    (stamps / "sglang_stack.json").write_text(json.dumps({"version": 1, "name": "sglang_stack", "digest": "abc",
                                                          "manifest": {}, "observed": {}}))
    args = {"unit": "sglang-kimi.service", "model_path": str(tmp_path), "stamps_dir": str(stamps)}
    result = run_module(facts_mod.main, {**args, "stamps": ["sglang_stack", "nvidia_driver"]})
    read = result["ansible_facts"]["sglang_deploy_stamps"]
    assert read["sglang_stack"]["found"] and read["sglang_stack"]["digest"] == "abc"
    assert read["sglang_stack"]["drift"] == [] and read["nvidia_driver"]["found"] is False
    assert "ansible_facts" not in run_module(facts_mod.main, args)
    refused = run_module(facts_mod.main, {**args, "stamps": ["../x"]})
    assert refused["failed"] and "stamps: a stamp name is a plain file name" in refused["msg"]


def test_the_driver_stamps_command_is_the_gpu_query_of_the_facts() -> None:
    """Were they to differ, the read would start nvidia-smi (and NVML on every GPU) once more, for the stamp."""
    manifest = yaml.safe_load((ROOT / "roles/nvidia_driver/vars/main.yml").read_text())["__nvidia_driver_manifest"]
    assert manifest["commands"] == [["nvidia-smi", *GPU_QUERY]]
    assert facts_mod.smi.query_args(facts_mod.GPU_FIELDS) == GPU_QUERY


def test_the_driver_stamp_takes_the_answer_of_the_gpu_query_nvidia_smi_runs_once_for_both(
        commands: Commands, monkeypatch: pytest.MonkeyPatch, run_module: Any, tmp_path: Path) -> None:
    monkeypatch.setattr(facts_mod.AnsibleModule, "get_bin_path", lambda self, arg, *args, **kwargs:
                        commands.get_bin_path(arg))
    commands.add("nvidia-smi", stdout=GPU_CSV)
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    query = " ".join(["nvidia-smi", *GPU_QUERY])
    recorded = f"exit 0 sha256:{hashlib.sha256(GPU_CSV.encode()).hexdigest()}"  # as converge_stamp records it
    (stamps / "nvidia_driver.json").write_text(json.dumps({
        "version": 1, "name": "nvidia_driver", "digest": "abc", "manifest": {"commands": [["nvidia-smi", *GPU_QUERY]]},
        "observed": {"commands": {query: recorded}}}))
    args = {"unit": "sglang-kimi.service", "model_path": str(tmp_path), "stamps_dir": str(stamps),
            "stamps": ["nvidia_driver"]}
    read = run_module(facts_mod.main, args)["ansible_facts"]["sglang_deploy_stamps"]["nvidia_driver"]
    assert read["found"] and read["drift"] == []
    assert commands.calls("nvidia-smi").count(GPU_QUERY) == 1
    commands.add("nvidia-smi", stdout=GPU_CSV.replace("580.95.05", "580.105.08"))  # another driver since
    read = run_module(facts_mod.main, args)["ansible_facts"]["sglang_deploy_stamps"]["nvidia_driver"]
    assert read["drift"] == [f"command {query}: {recorded} -> exit 0 sha256:"
                             f"{hashlib.sha256(GPU_CSV.replace('580.95.05', '580.105.08').encode()).hexdigest()}"]


def test_what_the_unit_holds_is_its_anonymous_and_shared_memory_not_its_page_cache(tmp_path: Path) -> None:
    """MemAvailable counts page cache already; adding the unit's file pages (MemoryCurrent) counted them twice."""
    group = "/system.slice/sglang-kimi.service"
    v2, v1 = tmp_path / "v2", tmp_path / "v1"
    roots = ((str(v2), ("anon", "shmem")), (str(v1), ("total_rss", "total_shmem")))
    assert facts_mod.unreclaimable_memory(group, roots) is None
    (v1 / group.strip("/")).mkdir(parents=True)
    (v1 / group.strip("/") / "memory.stat").write_text("cache 900\ntotal_rss 100\ntotal_shmem 20\n")
    assert facts_mod.unreclaimable_memory(group, roots) == 120
    (v2 / group.strip("/")).mkdir(parents=True)
    (v2 / group.strip("/") / "memory.stat").write_text("anon 300000\nfile 9000000\nshmem 4000\nunevictable 300000\n")
    assert facts_mod.unreclaimable_memory(group, roots) == 304000


class _Module:
    def __init__(self, **params: Any) -> None:
        self.params = {"bind": None, "api_key": None, **params}


def test_the_live_settings_are_read_back_from_server_info_on_loopback() -> None:
    """A listening server's live settings: /server_info's internal_states (0.5.23's shape; the top level keeps the
    launch's values), asked with the server's key; None when it does not answer or refuses."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            ok = self.path == "/server_info" and self.headers.get("Authorization") == "Bearer k"
            body = json.dumps({"speculative_accept_threshold_single": 1.0, "internal_states": [
                {"speculative_accept_threshold_single": 0.7, "speculative_accept_threshold_acc": 1.0}]}).encode()
            self.send_response(200 if ok else 401)
            self.end_headers()
            self.wfile.write(body if ok else b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        assert facts_mod.live_settings(_Module(port=port, bind="0.0.0.0", api_key="k")) == {
            "speculative_accept_threshold_single": 0.7, "speculative_accept_threshold_acc": 1.0}
        assert facts_mod.live_settings(_Module(port=port)) is None  # refused without the key
        assert seen == ["Bearer k", None]
    finally:
        server.shutdown()
        server.server_close()
    assert facts_mod.live_settings(_Module(port=port, api_key="k")) is None  # nothing listens any more
