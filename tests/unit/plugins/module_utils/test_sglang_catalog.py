"""The committed SGLang flag catalogs, the simulator's argparse double built from them, and the generator."""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_catalog as sc
from helpers import CATALOGS, ROOT, catalog_parser, load_script

WHEEL_DIR = ROOT / ".cache" / "wheels"
GENERATOR = ROOT / "tools" / "sglang_catalog.py"
NEWEST = "0.5.23"
OLDER = "0.5.12"  # the 0.5.9-0.5.12 line; still has a real --cuda-graph-max-bs


gen = load_script(GENERATOR, "sglang_catalog_tool")
parser_double = catalog_parser()

VERSIONS = sc.available_versions(str(CATALOGS))

KIMI_ARGV = [
    "--model-path", "/m", "--tp-size", "8",
    "--enable-hierarchical-cache", "--hicache-ratio", "2.0",
    "--hicache-write-policy", "write_through", "--hicache-io-backend", "kernel",
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
    "--mem-fraction-static", "0.85", "--host", "0.0.0.0", "--port", "30000",
]


def catalog(version: str) -> dict[str, Any]:
    return sc.load_catalog(version, str(CATALOGS))


def parse(version: str, argv: list[str]) -> argparse.Namespace:
    """Parse like ``launch_server``; --model-path is required by SGLang, so it is always given."""
    if "--model-path" not in argv:
        argv = ["--model-path", "/m", *argv]
    return parser_double.build_parser(catalog(version)).parse_args(argv)


def exit_code(version: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int | str | None, str]:
    with pytest.raises(SystemExit) as raised:
        parse(version, argv)
    return raised.value.code, capsys.readouterr().err


# --- committed catalogs ---------------------------------------------------------------------


def test_the_expected_catalogs_are_committed() -> None:
    assert {NEWEST, OLDER} <= set(VERSIONS)
    assert sorted(VERSIONS, key=sc.version_key) == VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
def test_catalog_is_well_formed(version: str) -> None:
    data = catalog(version)
    assert data["format"] == 1
    assert data["package"] == "sglang"
    assert data["version"] == version
    assert data["wheel"].startswith(f"sglang-{version}-")
    assert data["wheel"].endswith(".whl")
    assert len(data["wheel_sha256"]) == 64
    assert set(data["wheel_sha256"]) <= set("0123456789abcdef")
    assert isinstance(data["normalized"], dict)
    options = data["options"]
    assert len(options) > 300
    fields = {"dest", "flags", "action", "type", "nargs", "choices", "default", "const", "required", "help"}
    for option in options:
        assert fields <= set(option), option
        assert option["flags"]
        assert all(flag.startswith("-") for flag in option["flags"])


@pytest.mark.parametrize("version", VERSIONS)
def test_flags_are_unique_and_dests_repeat_only_for_deprecated_spellings(version: str) -> None:
    options = catalog(version)["options"]
    flags = [flag for option in options for flag in option["flags"]]
    assert len(flags) == len(set(flags))
    by_dest = collections.defaultdict(list)
    for option in options:
        by_dest[option["dest"]].append(option)
    for dest, sharing in by_dest.items():
        plain = [o for o in sharing if "extra" not in o]  # custom (deprecation) actions carry "extra"
        assert len(plain) <= 1, f"{dest} is set by several non-deprecated options: {sharing}"


@pytest.mark.parametrize("version", VERSIONS)
def test_catalog_holds_no_machine_specific_text(version: str) -> None:
    text = (CATALOGS / f"sglang-{version}.json").read_text(encoding="utf-8")
    for needle in ("/tmp/", "sglang-catalog-", "<stub", "/root", "/home/", "catalog-host", " at 0x"):
        assert needle not in text
    assert text.endswith("}\n")


def test_newest_catalog_matches_sglang_0_5_23_facts() -> None:
    data = catalog(NEWEST)
    assert len(data["options"]) == 532
    assert data["options"][0]["flags"] == ["-h", "--help"]
    assert sc.find_option(data, "--enable-hicache") is sc.find_option(data, "--enable-hierarchical-cache")
    assert sc.find_option(data, "--cuda-graph-max-bs") is None
    assert sc.find_option(data, "--cuda-graph-max-bs-decode")["type"] == "int"
    assert sc.find_option(data, "--hicache-io-backend")["choices"] == ["direct", "kernel", "kernel_ascend"]
    assert "trtllm_mla" in sc.find_option(data, "--attention-backend")["choices"]
    assert sc.find_option(data, "--hicache-ratio")["default"] is None


# --- the argparse double --------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_every_catalog_builds_a_parser(version: str) -> None:
    assert parse(version, []).model_path == "/m"


def test_model_path_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        parser_double.build_parser(catalog(NEWEST)).parse_args(["--tp-size", "8"])
    assert raised.value.code == 2
    assert "--model-path" in capsys.readouterr().err


def test_kimi_k25_argv_parses_on_the_newest_catalog() -> None:
    args = parse(NEWEST, KIMI_ARGV)
    assert args.model_path == "/m"
    assert args.tp_size == 8
    assert args.enable_hierarchical_cache is True
    assert args.hicache_ratio == 2.0
    assert args.hicache_write_policy == "write_through"
    assert args.hicache_io_backend == "kernel"
    assert args.speculative_algorithm == "EAGLE3"
    assert (args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens) == (3, 1, 4)
    assert args.mem_fraction_static == 0.85
    assert (args.host, args.port) == ("0.0.0.0", 30000)


@pytest.mark.parametrize("version", VERSIONS)
def test_kimi_k25_argv_parses_on_every_catalog(version: str) -> None:
    args = vars(parse(version, KIMI_ARGV))
    assert args["hicache_io_backend"] == "kernel"


def test_unknown_flag_is_rejected_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = exit_code(NEWEST, [*KIMI_ARGV, "--no-such-flag"], capsys)
    assert code == 2
    assert "unrecognized arguments: --no-such-flag" in err


def test_bad_choice_and_bad_type_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(NEWEST, ["--hicache-io-backend", "turbo"], capsys)[0] == 2
    assert exit_code(NEWEST, ["--tp-size", "eight"], capsys)[0] == 2


def test_cuda_graph_max_bs_is_gone_from_the_newest(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = exit_code(NEWEST, ["--cuda-graph-max-bs", "8"], capsys)
    assert code == 2
    assert "ambiguous option: --cuda-graph-max-bs" in err


def test_cuda_graph_max_bs_is_accepted_on_the_older_catalog() -> None:
    assert sc.find_option(catalog(OLDER), "--cuda-graph-max-bs")["action"] == "store"
    assert parse(OLDER, ["--cuda-graph-max-bs", "8"]).cuda_graph_max_bs == 8


@pytest.mark.parametrize("version", ["0.5.14", "0.5.19"])
def test_cuda_graph_max_bs_is_a_deprecated_alias_in_between(version: str) -> None:
    if version not in VERSIONS:
        pytest.skip(f"no catalog for {version}")
    option = sc.find_option(catalog(version), "--cuda-graph-max-bs")
    assert option["action"] == "DeprecatedAliasStoreAction"
    assert option["extra"]["new_flag"] == "--cuda-graph-max-bs-decode"
    assert parse(version, ["--cuda-graph-max-bs", "8"]).cuda_graph_max_bs_decode == 8


def test_deprecated_actions_behave_like_sglang(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse(NEWEST, ["--monokernel-backend", "amd"]).enable_amd_monokernel is True
    assert parse(NEWEST, ["--enable-dp-attention"]).enable_dp_attention is True
    if "0.5.19" in VERSIONS:
        code, err = exit_code("0.5.19", ["--enable-expert-distribution-metrics"], capsys)
        assert code == 2
        assert "--expert-balancedness-report-mode" in err


def test_boolean_optional_flags_have_both_spellings_only() -> None:
    data = catalog(NEWEST)
    option = next(o for o in data["options"] if o["action"] == "boolean_optional")
    positive, negative = option["flags"]
    assert getattr(parse(NEWEST, [positive]), option["dest"]) is True
    assert getattr(parse(NEWEST, [negative]), option["dest"]) is False
    assert "--no-" + negative[2:] not in parser_double.build_parser(data)._option_string_actions


def test_suggest_proposes_the_close_flag() -> None:
    assert sc.suggest(catalog(NEWEST), "--hicache-ration")[0] == "--hicache-ratio"


def test_missing_catalog_names_the_known_versions() -> None:
    with pytest.raises(sc.CatalogError, match=NEWEST):
        sc.load_catalog("0.0.1", str(CATALOGS))


# --- the generator --------------------------------------------------------------------------


def test_json_values_are_typed_or_repr() -> None:
    assert gen._json_value((1, "a", None)) == [1, "a", None]
    assert gen._json_value(float("inf")) == "inf"
    assert gen._json_value({"b", "a"}) == ["a", "b"]
    assert gen._json_value(argparse.SUPPRESS) == "==SUPPRESS=="
    assert gen._json_value(Path("/x")) == repr(Path("/x"))


def test_merge_runs_normalizes_values_that_vary() -> None:
    base = {"dest": "d", "flags": ["--d"], "help": "h", "choices": ["a", "b"], "default": "/nonexistent/home-a/x"}
    other = dict(base, choices=["b", "a"], default="/nonexistent/home-b/x")
    normalized: dict[str, str] = {}
    merged = gen.merge_runs([base], [other], normalized)
    assert merged[0]["choices"] == ["a", "b"]
    assert merged[0]["default"] == gen.MACHINE_SPECIFIC
    assert "HOME" in normalized["d"]
    assert "choices" in normalized["d"]


@pytest.mark.network
def test_regeneration_is_byte_for_byte_reproducible(tmp_path: Path) -> None:
    """Reads the real wheel (cached in .cache/wheels, downloaded from PyPI when absent)."""
    result = subprocess.run(
        [sys.executable, str(GENERATOR), NEWEST, "--out", str(tmp_path), "--wheel-dir", str(WHEEL_DIR)],
        capture_output=True, text=True, check=False, timeout=900,
    )
    assert result.returncode == 0, result.stderr
    generated = (tmp_path / f"sglang-{NEWEST}.json").read_bytes()
    committed = (CATALOGS / f"sglang-{NEWEST}.json").read_bytes()
    assert generated == committed
    assert json.loads(generated)["version"] == NEWEST
