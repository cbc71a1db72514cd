"""Argument parsing (catalog parser, exit 2) and the startup checks of ServerArgs (traceback, exit 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import LaunchFn, free_port, kimi_config, logged_server_args, server_args, write_model


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--no-such-flag"], "launch_server.py: error: unrecognized arguments: --no-such-flag"),
        (["--kv-cache-dtype", "fp16"], "argument --kv-cache-dtype: invalid choice: 'fp16'"),
        (["--port", "http"], "argument --port: invalid int value: 'http'"),
        (["--cuda-graph-max-bs", "8"], "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode,"),
        (["--context-length", "256K"], "argument --context-length: invalid human_readable_int value: '256K'"),
    ],
)
def test_bad_arguments_exit_2_like_argparse(launch: LaunchFn, model_dir: Path, extra: list[str], message: str) -> None:
    server = launch(server_args(model_dir, free_port(), *extra))
    assert server.wait_exit() == 2
    assert server.stderr.startswith("usage: launch_server.py --model-path MODEL_PATH")
    assert message in server.stderr


def test_model_path_is_required(launch: LaunchFn) -> None:
    server = launch(["--port", str(free_port())])
    assert server.wait_exit() == 2
    assert "error: the following arguments are required: --model-path/--model" in server.stderr


def check_fails(server_stderr: str, last_line: str) -> None:
    lines = server_stderr.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == last_line


@pytest.mark.parametrize(
    ("extra", "last_line"),
    [
        (["--speculative-algorithm", "EAGLE3"],
         "ValueError: EAGLE3 speculative decoding requires setting --speculative-draft-model-path."),
        (["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/nonexistent/draft"],
         "OSError: Incorrect path_or_model_id: '/nonexistent/draft'. Please provide either the path to a local "
         "folder or the repo_id of a model on the Hub."),
        (["--enable-hierarchical-cache", "--disable-radix-cache"],
         "ValueError: The arguments enable-hierarchical-cache and disable-radix-cache are mutually exclusive and "
         "cannot be used at the same time. Please use only one of them."),
        (["--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "1"], "AssertionError"),
        (["--speculative-algorithm", "EAGLE", "--speculative-num-draft-tokens", "4"], "AssertionError"),
        (["--nnodes", "3", "--dist-init-addr", "127.0.0.1:5000"],
         "AssertionError: tp_size (8) must be divisible by nnodes (3)"),
    ],
)
def test_startup_checks_fail_with_a_traceback(
    launch: LaunchFn, model_dir: Path, extra: list[str], last_line: str
) -> None:
    server = launch(server_args(model_dir, free_port(), *extra))
    assert server.wait_exit() == 1
    check_fails(server.stderr, last_line)
    assert "sglang/srt/server_args.py" in server.stderr


def test_missing_model_directory(launch: LaunchFn, tmp_path: Path) -> None:
    server = launch(server_args(tmp_path / "absent", free_port()))
    assert server.wait_exit() == 1
    check_fails(server.stderr, f"OSError: Incorrect path_or_model_id: '{tmp_path / 'absent'}'. Please provide "
                               "either the path to a local folder or the repo_id of a model on the Hub.")


def test_model_directory_without_config(launch: LaunchFn, tmp_path: Path) -> None:
    server = launch(server_args(tmp_path, free_port()))
    assert server.wait_exit() == 1
    assert f"OSError: {tmp_path} does not appear to have a file named config.json." in server.stderr


def test_eagle3_with_a_draft_directory_starts(launch: LaunchFn, model_dir: Path, tmp_path: Path) -> None:
    draft = write_model(tmp_path / "draft", dict(kimi_config(), num_hidden_layers=1), shards=1)
    port = free_port()
    server = launch(server_args(model_dir, port, "--speculative-algorithm", "EAGLE3",
                                "--speculative-draft-model-path", str(draft), tp=1))
    server.wait_ready()
    logged = logged_server_args(server.stderr)
    assert (logged["speculative_num_steps"], logged["speculative_eagle_topk"],
            logged["speculative_num_draft_tokens"]) == (3, 1, 4)


def test_config_file_is_merged_under_the_command_line(launch: LaunchFn, model_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "sglang.yaml"
    # The flags' own spellings: SGLang 0.5.23's merger writes each key as --<key> verbatim.
    config.write_text(
        "# rendered by the deploy\n"
        f"model-path: {model_dir}\n"
        "tp-size: 2\n"
        "served-model-name: 'from-config'\n"
        "enable-metrics: true\n"
        "trust-remote-code: false\n"
        "kv-cache-dtype: fp8_e4m3  # twice the tokens\n"
        "mem-fraction-static: 0.83\n"
    )
    port = free_port()
    server = launch(["--config", str(config), "--port", str(port), "--served-model-name", "from-cli"])
    server.wait_ready()
    log = server.stderr
    logged = logged_server_args(log)
    assert (logged["tp_size"], logged["served_model_name"], logged["enable_metrics"]) == (2, "from-cli", True)
    assert "config" not in logged  # merged into the arguments, not a ServerArgs field
    assert "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 308743," in log


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # The deploy's secrets file before 2.x: the real server exits 2 and prints the key (issue 48).
        ("api_key: 'K-123'\n", "error: unrecognized arguments: --api_key K-123"),
        ("admin_api_key: K-9\n", "error: unrecognized arguments: --admin_api_key K-9"),
        ("tp_size: 2\n", "error: unrecognized arguments: --tp_size 2"),
        # A store_true key with a value that is not a boolean: --enable-metrics 3, and 3 is left over.
        ("enable-metrics: 3\n", "error: unrecognized arguments: 3"),
    ],
)
def test_a_config_key_is_a_flag_verbatim_so_an_underscore_key_exits_2(
        launch: LaunchFn, model_dir: Path, tmp_path: Path, text: str, message: str) -> None:
    """As SGLang 0.5.23's ConfigArgumentMerger (srt/utils/server_args_config_parser.py:164-210): each key becomes
    --<key> as written, so only a flag's own spelling is known to the parser."""
    config = tmp_path / "secrets.yaml"
    config.write_text(text)
    server = launch(server_args(model_dir, free_port(), "--config", str(config)))
    assert server.wait_exit() == 2
    assert message in server.stderr, server.stderr[-2000:]


def test_the_deploys_dashed_keys_are_taken(launch: LaunchFn, model_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "secrets.yaml"
    config.write_text('api-key: "K-1"\nadmin-api-key: "K-2"\n')
    server = launch(server_args(model_dir, free_port(), "--config", str(config), tp=1))
    server.wait_ready()
    logged = logged_server_args(server.stderr)
    assert (logged["api_key"], logged["admin_api_key"]) == ("K-1", "K-2")


@pytest.mark.parametrize(
    ("name", "text", "last_line"),
    [
        ("bad.json", "{}", "ValueError: Config file must be YAML format, got: .json"),
        ("optional.yaml", "enable-tf32-matmul: true\n",
         "ValueError: Unsupported config option 'enable_tf32_matmul' with action 'BooleanOptionalAction'"),
        ("nested.yaml", "model_path: /m\nextra:\n  key: value\n",
         "ValueError: line 3: nested mappings are not supported: key: value"),
    ],
)
def test_bad_config_files(launch: LaunchFn, tmp_path: Path, name: str, text: str, last_line: str) -> None:
    config = tmp_path / name
    config.write_text(text)
    server = launch(["--config", str(config), "--port", str(free_port())])
    assert server.wait_exit() == 1
    check_fails(server.stderr, last_line)
