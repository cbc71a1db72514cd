"""The resolve step: variables -> the typed settings, argv and environment; and systemd quoting."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from ansible_collections.sglang.deploy.plugins.module_utils import (
    sglang_config,
    sglang_quote,
    sglang_settings,
    sglang_types,
)
from helpers import BASE, CATALOGS, ROOT


def resolve(**changes: Any) -> dict[str, Any]:
    """The example's inputs with changes; short names (`-e hicache_ratio=...`) under aliases=."""
    inputs = dict(BASE, **changes.pop("aliases", {}))
    inputs.update(changes)
    return sglang_config.resolve(inputs, str(CATALOGS))


def value_of(result: dict[str, Any], flag: str) -> str | None:
    argv = result["argv"]
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_example_resolves_in_a_stable_order() -> None:
    result = resolve()
    assert result["ok"], result["errors"]
    assert result["unit"] == "sglang-kimi.service"
    flags = [group[0] for group in result["args"]]
    assert flags == [
        "--model-path", "--served-model-name", "--tp-size", "--host", "--port", "--mem-fraction-static",
        "--kv-cache-dtype", "--enable-hierarchical-cache", "--hicache-ratio", "--hicache-write-policy",
        "--hicache-io-backend", "--speculative-algorithm", "--speculative-draft-model-path",
        "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--config",
        "--enable-metrics"]
    assert value_of(result, "--config") == "/etc/sglang/kimi.secrets.yaml"
    assert result == resolve(), "resolving twice must give the same result"


def test_typed_values_and_bare_flags() -> None:
    result = resolve(sglang_tp_size="8", sglang_port="30000", sglang_mem_fraction_static="0.9",
                     sglang_hicache_enabled="true")
    assert value_of(result, "--tp-size") == "8"
    assert value_of(result, "--mem-fraction-static") == "0.9"
    assert ["--enable-hierarchical-cache"] in result["args"]
    assert value_of(result, "--hicache-ratio") == "2.0"


def test_short_alias_from_the_command_line_wins() -> None:
    result = resolve(aliases={"hicache_ratio": "3.5"})
    assert result["ok"]
    assert value_of(result, "--hicache-ratio") == "3.5"
    only_ratio_changed = [a for a, b in zip(resolve()["argv"], result["argv"], strict=True) if a != b]
    assert only_ratio_changed == ["2.0"]


def test_alias_size_replaces_the_inventory_ratio_with_a_warning() -> None:
    result = resolve(aliases={"hicache_size": "300"})
    assert result["ok"], result["errors"]
    assert value_of(result, "--hicache-size") == "300" and "--hicache-ratio" not in result["argv"]
    assert any(w.startswith("hicache_size: replaces sglang_hicache_ratio") for w in result["warnings"])


@pytest.mark.parametrize(("changes", "variable", "allowed"), [
    ({"aliases": {"hicache_ratio": "1.0"}}, "hicache_ratio", "a number above 1.0"),
    ({"aliases": {"hicache_ratio": "0.5"}}, "hicache_ratio", "a number above 1.0"),
    ({"aliases": {"hicache_ratio": "lots"}}, "hicache_ratio", "a number above 1.0"),
    ({"sglang_hicache_ratio": "nan"}, "sglang_hicache_ratio", "a number above 1.0"),
    ({"aliases": {"hicache_size": "-5"}}, "hicache_size", "GB per TP rank"),
    ({"aliases": {"hicache_size": "2.5"}}, "hicache_size", "whole number"),
    ({"aliases": {"hicache_write_policy": "write_sometimes"}}, "hicache_write_policy",
     "write_back, write_through, write_through_selective"),
    ({"aliases": {"hicache_io_backend": "dma"}}, "hicache_io_backend", "direct, kernel"),
    ({"sglang_hicache_mem_layout": "diagonal"}, "sglang_hicache_mem_layout", "page_first"),
    ({"sglang_hicache_storage_backend": "tape"}, "sglang_hicache_storage_backend", "mooncake"),
    ({"sglang_speculative_draft_model_path": None}, "sglang_speculative_draft_model_path", "draft model"),
    ({"sglang_speculative_algorithm": "EAGEL3"}, "sglang_speculative_algorithm", "EAGLE3"),
    ({"sglang_mem_fraction_static": 1.0}, "sglang_mem_fraction_static", "between 0 and 1"),
    ({"sglang_mem_fraction_static": 0}, "sglang_mem_fraction_static", "between 0 and 1"),
    ({"sglang_port": 70000}, "sglang_port", "1 to 65535"),
    ({"sglang_port": "http"}, "sglang_port", "1 to 65535"),
    ({"sglang_tp_size": 0}, "sglang_tp_size", ">= 1"),
    ({"sglang_model_path": ""}, "sglang_model_path", "model directory"),
    ({"sglang_instance": "kimi k2"}, "sglang_instance", "unit name"),
    ({"sglang_instance": "../etc"}, "sglang_instance", "unit name"),
    ({"sglang_kv_cache_dtype": "fp3"}, "sglang_kv_cache_dtype", "fp8_e4m3"),
    ({"sglang_version": "0.0.1"}, "sglang_version", "allowed: a version with a catalog (0.5.9"),
    ({"sglang_hicache_enabled": "maybe"}, "sglang_hicache_enabled", "true or false"),
    ({"sglang_hicache_size": 100}, "sglang_hicache_size", "one of them"),
    ({"aliases": {"hicache_ratio": "2", "hicache_size": "10"}}, "hicache_ratio", "one of them"),
    ({"sglang_hicache_enabled": False, "aliases": {"hicache_ratio": "2.0"}}, "hicache_ratio",
     "sglang_hicache_enabled=true"),
    ({"sglang_extra_args": {"hicache-ratio": 3}}, "sglang_extra_args['hicache-ratio']", "one place"),
    ({"sglang_extra_args": {"cuda-graph-max-bs": 8}}, "sglang_extra_args['cuda-graph-max-bs']", "did you mean"),
    ({"sglang_extra_args": {"Bad Flag": 1}}, "sglang_extra_args['Bad Flag']", "lower-case"),
    ({"sglang_extra_args": {"cuda-graph-max-bs-decode": "lots"}}, "sglang_extra_args['cuda-graph-max-bs-decode']",
     "an integer"),
    ({"sglang_extra_args": {"trust-remote-code": "sometimes"}}, "sglang_extra_args['trust-remote-code']",
     "true or false"),
    ({"sglang_env": {"NCCL_DEBUG": "INFO\nEVIL=1"}}, "sglang_env['NCCL_DEBUG']", "single-line"),
    ({"sglang_env": {"1BAD": "x"}}, "sglang_env['1BAD']", "letters, digits"),
    ({"sglang_env": {"NCCL_DEBUG": ["INFO"]}}, "sglang_env['NCCL_DEBUG']", "string or number"),
])
def test_bad_input_is_refused_naming_the_variable_and_the_allowed_values(
        changes: dict[str, Any], variable: str, allowed: str) -> None:
    result = resolve(**changes)
    assert not result["ok"]
    matching = [e for e in result["errors"] if e.startswith(variable)]
    assert matching, result["errors"]
    assert allowed in matching[0], matching[0]


def test_unknown_extra_flag_suggests_a_known_one() -> None:
    result = resolve(sglang_extra_args={"hicache-ration": 2})
    assert "did you mean --hicache-ratio" in result["errors"][0]


def test_extra_args_bare_omitted_repeated_and_aliases() -> None:
    result = resolve(sglang_extra_args={
        "trust_remote_code": True, "disable-cuda-graph": False, "--context-length": 131072,
        "attention-backend": "triton", "tokenizer-worker-num": None})
    assert result["ok"], result["errors"]
    argv = result["argv"]
    assert "--trust-remote-code" in argv and "--disable-cuda-graph" not in argv
    assert value_of(result, "--context-length") == "131072"
    assert "--tokenizer-worker-num" not in argv
    # extra args come after the named ones, sorted by key
    assert argv.index("--attention-backend") < argv.index("--context-length") < argv.index("--trust-remote-code")


def test_flags_without_a_catalog_take_true_as_a_bare_flag() -> None:
    """The router's flags (no catalog says which take a value): true is the bare flag, as documented; a value is
    one word, a list repeats the flag, false or null leaves it out."""
    assert sglang_config.flag_groups({"enable-igw": True, "port": 30080, "dp_aware": False, "x": None,
                                      "policy": ["a", "b"]}, "sglang_router_extra_args") == [
        ["--enable-igw"], ["--policy", "a"], ["--policy", "b"], ["--port", "30080"]]
    with pytest.raises(ValueError, match=r"sglang_router_extra_args\['Bad Flag'\]: is not a flag name"):
        sglang_config.flag_groups({"Bad Flag": 1}, "sglang_router_extra_args")


def test_extra_flag_alias_counts_as_the_same_option() -> None:
    result = resolve(sglang_extra_args={"tensor-parallel-size": 4})
    assert not result["ok"] and "sglang_tp_size" in result["errors"][0]


def test_disabled_hicache_emits_nothing_and_warns_about_leftovers() -> None:
    result = resolve(sglang_hicache_enabled=False)
    assert result["ok"]
    assert not [w for w in result["argv"] if "hicache" in w or "hierarchical" in w]
    assert any(w.startswith("sglang_hicache_ratio: is ignored") for w in result["warnings"])


def test_flag_missing_from_an_older_catalog_names_the_variable() -> None:
    result = resolve(sglang_version="0.5.9", sglang_extra_args={"cuda-graph-max-bs-decode": 48})
    assert not result["ok"]
    assert result["errors"][0].startswith("sglang_extra_args['cuda-graph-max-bs-decode']")


def test_environment_is_typed_and_has_the_base_entries() -> None:
    result = resolve(sglang_env={"NCCL_IB_DISABLE": 1, "FLAG": True, "OFF": False, "NCCL_DEBUG": "WARN"})
    assert result["env"] == {"PYTHONUNBUFFERED": "1", "SGLANG_DEPLOY_LINE_PROGRESS": "1", "FLAG": "1",
                             "CUDA_HOME": "/usr/local/cuda-13.0",
                             "PATH": "/opt/sglang/0.5.23/venv/bin:/usr/local/cuda-13.0/bin:/usr/local/sbin:"
                                     "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                             "NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": "1", "OFF": "0", "SGLANG_AUTO_NUMA_BIND": "false",
                             "HF_HUB_OFFLINE": "1"}


def test_numa_binding_is_the_inventorys_decision_either_way() -> None:
    """SGLang 0.5.23 binds by default wherever numactl and a node1 exist (srt/environ.py SGLANG_AUTO_NUMA_BIND=True);
    the environment says what the inventory chose."""
    assert resolve()["env"]["SGLANG_AUTO_NUMA_BIND"] == "false" and resolve()["numa"] == {"bind": "off"}
    auto = resolve(sglang_numa_bind="auto")
    assert auto["env"]["SGLANG_AUTO_NUMA_BIND"] == "true" and auto["numa"] == {"bind": "auto"}
    assert resolve(sglang_numa_bind="sometimes")["errors"] == [
        "sglang_numa_bind: 'sometimes' is not a NUMA binding; allowed: off, auto"]
    assert resolve(sglang_env={"SGLANG_AUTO_NUMA_BIND": "1"})["errors"] == [
        "sglang_env['SGLANG_AUTO_NUMA_BIND']: is set by sglang_numa_bind (off); allowed: sglang_numa_bind: off or "
        "auto, and no SGLANG_AUTO_NUMA_BIND in sglang_env"]


def test_the_jit_toolchain_environment_follows_the_cuda_release_and_can_be_overridden() -> None:
    """SGLang's, FlashInfer's and tvm-ffi's JIT builds find nvcc through CUDA_HOME and run ninja from PATH
    (the virtualenv's bin); /usr/local/cuda is an alternatives link, not relied upon."""
    assert resolve(sglang_cuda_version="12.8")["env"]["CUDA_HOME"] == "/usr/local/cuda-12.8"
    assert resolve(sglang_env={"CUDA_HOME": "/opt/cuda"})["env"]["CUDA_HOME"] == "/opt/cuda"
    result = resolve(sglang_cuda_version="13")
    assert result["errors"] == ["sglang_cuda_version: '13' is not a CUDA release; allowed: major.minor such as 13.0"]


@pytest.mark.parametrize(("word", "quoted"), [
    ("plain/path-1.0", "plain/path-1.0"),
    ("with space", '"with space"'),
    ("100%", '"100%%"'),
    ("$HOME", '"$$HOME"'),
    ('a"b', '"a\\"b"'),
    ("back\\slash", '"back\\\\slash"'),
    ("", '""'),
    (";", '";"'),
    ("new\nline", '"new\\nline"'),
])
def test_systemd_quoting(word: str, quoted: str) -> None:
    assert sglang_quote.systemd_quote(word) == quoted


def test_exec_line_puts_one_flag_per_continued_line() -> None:
    line = sglang_quote.systemd_exec_line(
        ["/v/bin/python", "-m", "sglang.launch_server"],
        [["--model-path", "/m"], ["--enable-metrics"], ["--served-model-name", "a b"]])
    assert line == ('/v/bin/python -m sglang.launch_server \\\n    --model-path /m \\\n    --enable-metrics \\\n'
                    '    --served-model-name "a b"')
    with pytest.raises(ValueError, match="absolute path"):
        sglang_quote.systemd_exec_line(["python"], [])


def test_env_file_quoting() -> None:
    body = sglang_quote.env_file_lines({"A": 'x $HOME "q" `t` b\\s', "B": "1"})
    assert body == 'A="x \\$HOME \\"q\\" \\`t\\` b\\\\s"\nB="1"'
    with pytest.raises(ValueError, match="bad environment variable name"):
        sglang_quote.env_file_lines({"A B": "x"})


def test_multinode_group_gives_rank_size_and_rendezvous() -> None:
    group = {"group": "sglang_multinode_big", "members": ["a", "b"], "host": "b", "first_host": "10.0.0.1",
             "port": 20000}
    result = resolve(sglang_tp_size=16, multinode=group, sglang_advertise_host="10.0.0.2")
    assert result["ok"], result["errors"]
    assert ["--nnodes", "2"] in result["args"] and ["--node-rank", "1"] in result["args"]
    assert ["--dist-init-addr", "10.0.0.1:20000"] in result["args"]
    assert result["primary"] is False and result["url"] == "http://10.0.0.2:30000"
    first = resolve(sglang_tp_size=16, multinode=dict(group, host="a"))
    assert first["primary"] is True and ["--node-rank", "0"] in first["args"]


def test_multinode_refuses_a_tp_size_that_does_not_split() -> None:
    group = {"group": "g", "members": ["a", "b", "c"], "host": "a", "first_host": "a", "port": 20000}
    result = resolve(sglang_tp_size=8, multinode=group)
    assert any(e.startswith("sglang_tp_size: 8 does not split over the 3 hosts") for e in result["errors"])


def test_single_host_has_no_multinode_flags() -> None:
    result = resolve()
    assert result["primary"] is True and result["multinode"]["nnodes"] == 1
    assert "--nnodes" not in result["argv"]


# --- the settings table ------------------------------------------------------------------------

def test_every_value_keeps_its_type_and_the_name_that_set_it() -> None:
    result = resolve(aliases={"hicache_ratio": "3.5"}, sglang_extra_args={"page-size": 64, "max-total-tokens": "128k"})
    settings = result["settings"]
    assert settings["hicache_ratio"] == {"flag": "--hicache-ratio", "value": 3.5,
                                         "source": "hicache_ratio (overrides sglang_hicache_ratio)"}
    assert settings["tp_size"] == {"flag": "--tp-size", "value": 8, "source": "sglang_tp_size"}
    assert settings["enable_hierarchical_cache"]["value"] is True
    assert settings["page_size"] == {"flag": "--page-size", "value": 64, "source": "sglang_extra_args['page-size']"}
    assert settings["max_total_tokens"]["value"] == 128_000  # a row types it for the plan; argv keeps "128k"
    assert value_of(result, "--max-total-tokens") == "128k"


def test_adding_a_plain_setting_is_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/adding-a-setting.md: a row in the table (plus the variable's default and argument spec in
    role sglang) and the setting is typed, range-checked, checked against the catalog, on the command
    line with its provenance, and looked up by role sglang_config."""
    row = sglang_settings.Setting("--chunked-prefill-size", "sglang_chunked_prefill_size",
                                  sglang_settings.Kind(sglang_types.to_int, "an integer >= -1", lambda x: x >= -1))
    monkeypatch.setattr(sglang_settings, "SETTINGS", (*sglang_settings.SETTINGS, row))
    assert "sglang_chunked_prefill_size" in sglang_settings.variables()
    assert "--chunked-prefill-size" not in resolve()["argv"]  # unset: existing units do not change
    result = resolve(sglang_chunked_prefill_size="8192")
    assert result["ok"], result["errors"]
    assert value_of(result, "--chunked-prefill-size") == "8192"
    assert result["settings"]["chunked_prefill_size"]["source"] == "sglang_chunked_prefill_size"
    assert resolve(sglang_chunked_prefill_size=-2)["errors"] == [
        "sglang_chunked_prefill_size: -2 is out of range; allowed: an integer >= -1"]
    taken = resolve(sglang_chunked_prefill_size=8192, sglang_extra_args={"chunked-prefill-size": 4096})
    assert taken["errors"] == ["sglang_extra_args['chunked-prefill-size']: sets --chunked-prefill-size, which "
                               "sglang_chunked_prefill_size already sets; allowed: set it in one place"]


def test_a_row_whose_flag_a_version_lacks_is_refused_naming_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    row = sglang_settings.Setting("--enable-hicache", "sglang_enable_hicache_alias", sglang_settings.SWITCH,
                                  emit="switch")
    monkeypatch.setattr(sglang_settings, "SETTINGS", (*sglang_settings.SETTINGS, row))
    assert resolve(sglang_enable_hicache_alias=True)["ok"]
    old = resolve(sglang_version="0.5.9", sglang_enable_hicache_alias=True, sglang_cuda_version="12.8")
    assert any(e.startswith("sglang_enable_hicache_alias: --enable-hicache is not a flag of sglang 0.5.9")
               for e in old["errors"])


def test_the_contract_role_declares_every_table_variable() -> None:
    """Each row's variable has a default and an argument spec in role sglang; a new row without them
    fails here."""
    defaults = yaml.safe_load((ROOT / "roles/sglang/defaults/main.yml").read_text())
    specs = yaml.safe_load((ROOT / "roles/sglang/meta/argument_specs.yml").read_text())["argument_specs"]
    for setting in sglang_settings.SETTINGS:
        if setting.var:
            assert setting.var in defaults and setting.var in specs["main"]["options"], setting.var
    for fact in sglang_settings.FACTS:
        assert fact.var in defaults and fact.var in specs["main"]["options"], fact.var


# --- who can reach the server, and what its clients can run (issue 48) ---------------------------------------------

NO_KEYS = {"api_key": False, "admin_api_key": False, "file": "/etc/sglang/kimi.secrets.yaml"}


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.11", "gpu-node-1.example", "127.0.0.1.nip.io"])
def test_a_keyless_server_on_a_non_loopback_address_is_refused_naming_the_variables(host: str) -> None:
    result = resolve(sglang_host=host, secrets=NO_KEYS)
    assert result["errors"] == [
        f"sglang_api_key: is empty while sglang_host binds {host}, reachable from other machines: anyone who reaches "
        "the port could call every endpoint, the admin ones included (swap the weights, log every prompt, abort "
        "requests); allowed: a key (in Ansible Vault), sglang_host 127.0.0.1, ::1 or localhost, or "
        "sglang_allow_unauthenticated: true"]
    assert resolve(sglang_host=host, secrets=NO_KEYS, sglang_allow_unauthenticated=True)["ok"]
    assert resolve(sglang_host=host, secrets=NO_KEYS, sglang_allow_unauthenticated="false")["errors"]
    assert resolve(sglang_host=host, secrets=dict(NO_KEYS, api_key=True))["ok"]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "localhost", "LOCALHOST"])
def test_a_keyless_server_on_loopback_is_fine(host: str) -> None:
    result = resolve(sglang_host=host, secrets=NO_KEYS)
    assert result["ok"], result["errors"]
    assert "--config" not in result["argv"]


def test_an_admin_key_without_a_client_key_is_refused_even_on_loopback_or_with_the_opt_in() -> None:
    for host in ("0.0.0.0", "127.0.0.1"):
        result = resolve(sglang_host=host, secrets=dict(NO_KEYS, admin_api_key=True), sglang_allow_unauthenticated=True)
        assert result["errors"] == [
            "sglang_admin_api_key: is set without sglang_api_key: SGLang then answers /server_info to anyone, and it "
            "returns the admin key; allowed: set sglang_api_key too, or neither"]


@pytest.mark.parametrize(("flag", "value"), [("enable-custom-logit-processor", True),
                                             ("enable_custom_logit_processor", "true"),
                                             ("tool-server", "demo"), ("--tool-server", "http://mcp:8000")])
def test_flags_that_let_clients_run_code_are_refused_unless_allowed(flag: str, value: Any) -> None:
    result = resolve(sglang_extra_args={flag: value})
    name = "--" + flag.lstrip("-").replace("_", "-")
    assert len(result["errors"]) == 1 and result["errors"][0].startswith(f"sglang_extra_args[{flag!r}]: {name} ")
    assert result["errors"][0].endswith(
        "allowed: leave it out, or set sglang_allow_unsafe_flags: true (flags it allows: "
        "--enable-custom-logit-processor, --tool-server)")
    allowed = resolve(sglang_extra_args={flag: value}, sglang_allow_unsafe_flags=True)
    assert allowed["ok"], allowed["errors"]
    assert name in allowed["argv"]
    assert resolve(sglang_extra_args={flag: False} if value is True else {flag: None})["ok"]  # left out: fine


@pytest.mark.parametrize("name", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "EXA_API_KEY",
                                  "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "DB_PASSWORD", "MY_SECRET",
                                  "GOOGLE_APPLICATION_CREDENTIALS", "github_token", "SERVICE_AUTH_TOKEN_FILE",
                                  "TOKEN", "SGLANG_MY_API_KEY", "NCCL_SECRET"])
def test_secret_looking_environment_names_are_refused_with_a_pointer_to_the_secrets_variables(name: str) -> None:
    assert sglang_config.secret_name(name)
    result = resolve(sglang_env={name: "x", "NCCL_DEBUG": "WARN"})
    assert result["errors"] == [
        f"sglang_env[{name!r}]: looks like a secret, and the environment file is readable by the service's group and "
        "printed by --diff; allowed: the secrets variables (sglang_api_key, sglang_admin_api_key for the server's "
        "keys; sglang_weights_hf_token for Hugging Face), or a name that is no secret"]


@pytest.mark.parametrize("name", ["NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "CUDA_DEVICE_ORDER",
                                  "SGLANG_LOG_DECODE_GRAPH_KEY", "SGLANG_MAX_THINK_TOKENS",
                                  "SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE",
                                  "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION", "SGLANG_PATCH_TOKENIZER",
                                  "SGLANG_PREFILL_DELAYER_MAX_DELAY_PASSES", "HF_HUB_OFFLINE", "TOKENIZERS_PARALLELISM",
                                  "KEYBOARD", "MONKEY", "TORCH_CUDA_ARCH_LIST", "PASSES", "NCCL_NET_PLUGIN"])
def test_settings_whose_names_only_mention_tokens_or_keys_are_no_secret(name: str) -> None:
    assert not sglang_config.secret_name(name)
    assert resolve(sglang_env={name: "1"})["ok"]


def test_numa_auto_without_the_sandbox_is_refused() -> None:
    result = resolve(sglang_numa_bind="auto", sglang_service_hardening="none")
    assert result["errors"] == [
        "sglang_numa_bind: is auto with sglang_service_hardening: none: SGLang 0.5.23 then writes its NUMA helper "
        "script, mode 0777, to the shared /tmp and runs it for every rank (srt/utils/numa_utils.py:83-102), so any "
        "local user could replace it; allowed: sglang_numa_bind: off, or sglang_service_hardening: basic or strict "
        "(PrivateTmp)"]
    for hardening in ("basic", "strict"):
        assert resolve(sglang_numa_bind="auto", sglang_service_hardening=hardening)["ok"]
    assert resolve(sglang_numa_bind="off", sglang_service_hardening="none")["ok"]


def test_prestaged_weights_keep_the_server_off_the_hugging_face_hub() -> None:
    assert resolve()["env"]["HF_HUB_OFFLINE"] == "1"  # prestaged: the role's default
    assert resolve(sglang_weights_mode="prestaged")["env"]["HF_HUB_OFFLINE"] == "1"
    assert "HF_HUB_OFFLINE" not in resolve(sglang_weights_mode="download")["env"]
    assert resolve(sglang_env={"HF_HUB_OFFLINE": 0})["env"]["HF_HUB_OFFLINE"] == "0"  # the inventory may say otherwise


def test_a_live_threshold_without_speculative_decoding_is_written_with_a_note() -> None:
    """SGLang 0.5.23 takes --speculative-accept-threshold-acc without a draft (and /set_internal_state the value): the
    unit carries it, and the plan notes that it does nothing (the engine's live-change drill sets one on the CPU)."""
    result = resolve(sglang_speculative_algorithm=None, sglang_speculative_draft_model_path=None,
                     sglang_speculative_num_steps=None, sglang_speculative_eagle_topk=None,
                     sglang_speculative_num_draft_tokens=None, sglang_speculative_accept_threshold_acc=0.5)
    assert result["ok"], result["errors"]
    assert value_of(result, "--speculative-accept-threshold-acc") == "0.5"
    assert [w for w in result["warnings"] if w.startswith("sglang_speculative_accept_threshold_acc: has no effect "
                                                          "without speculative decoding")], result["warnings"]
    with_draft = resolve(sglang_speculative_accept_threshold_acc=0.5)
    assert not [w for w in with_draft["warnings"] if "has no effect without speculative" in w]
