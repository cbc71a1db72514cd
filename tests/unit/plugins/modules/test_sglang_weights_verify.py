"""sglang_weights_verify: a model directory is complete, or every problem is named with its file."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.sglang.deploy.plugins.modules import sglang_weights_verify as verify_module
from helpers import ROOT, load_script

MODELS = ROOT / "extensions/molecule/resources/models"

make_model = load_script(MODELS / "make_model.py", "make_model_under_test")


def staged(tmp_path: Path, name: str = "kimi-k2.5", shards: int = 4) -> Path:
    model = tmp_path / name
    model.mkdir()
    shutil.copy(MODELS / name / "config.json", model / "config.json")
    assert make_model.main(["make_model.py", str(model), str(shards)]) == 0
    return model


def manifest_of(model: Path) -> str:
    return "".join(f"{verify_module.sha256(str(p))}  {p.name}\n" for p in sorted(model.iterdir()) if p.is_file())


def run_module(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        verify_module.main()
    return json.loads(capsys.readouterr().out)


def test_a_complete_model_passes(tmp_path: Path) -> None:
    result = verify_module.verify(str(staged(tmp_path)))
    assert result["errors"] == [] and result["notes"] == []
    assert (result["shards"], result["tensors"]) == (4, 4)


def test_a_truncated_shard_is_named(tmp_path: Path) -> None:
    model = staged(tmp_path)
    shard = model / "model-00003-of-00004.safetensors"
    os.truncate(shard, shard.stat().st_size - 100)
    assert verify_module.verify(str(model))["errors"] == [
        f"{shard}: short, 4116 bytes but its header declares 4216 (truncated copy?)"]


def test_a_shard_cut_inside_its_header_is_named(tmp_path: Path) -> None:
    model = staged(tmp_path)
    shard = model / "model-00001-of-00004.safetensors"
    os.truncate(shard, 40)
    (error,) = verify_module.verify(str(model))["errors"]
    assert error.startswith(f"{shard}: header length") and "does not fit in its 40 bytes" in error


def test_missing_padded_and_empty_shards_are_named(tmp_path: Path) -> None:
    model = staged(tmp_path)
    (model / "model-00002-of-00004.safetensors").unlink()
    with (model / "model-00003-of-00004.safetensors").open("ab") as handle:
        handle.write(b"x")
    (model / "model-00004-of-00004.safetensors").write_bytes(b"")
    errors = verify_module.verify(str(model))["errors"]
    assert errors == [
        f"{model}/model-00002-of-00004.safetensors: missing (named in model.safetensors.index.json)",
        f"{model}/model-00003-of-00004.safetensors: 4217 bytes but its header declares 4216 (trailing data)",
        f"{model}/model-00004-of-00004.safetensors: 0 bytes, shorter than the 8-byte safetensors header length"]


def test_config_must_be_a_json_object(tmp_path: Path) -> None:
    model = staged(tmp_path)
    (model / "config.json").write_text("[1, 2]")
    assert verify_module.verify(str(model))["errors"] == [f"{model}/config.json: not a JSON object"]
    (model / "config.json").unlink()
    assert verify_module.verify(str(model))["errors"] == [f"{model}/config.json: missing"]


def test_a_tensor_the_index_maps_to_a_shard_must_be_in_it(tmp_path: Path) -> None:
    model = staged(tmp_path)
    index = json.loads((model / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.layers.99.weight"] = "model-00001-of-00004.safetensors"
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    (error,) = verify_module.verify(str(model))["errors"]
    assert "model-00001-of-00004.safetensors: lacks 1 tensor(s)" in error and "model.layers.99.weight" in error


def test_a_single_file_model_and_a_directory_without_weights(tmp_path: Path) -> None:
    model = staged(tmp_path, shards=1)
    (model / "model.safetensors.index.json").unlink()
    (model / "model-00001-of-00001.safetensors").rename(model / "model.safetensors")
    assert verify_module.verify(str(model))["errors"] == []
    (model / "model.safetensors").unlink()
    assert verify_module.verify(str(model))["errors"] == [
        f"{model}: no weights (neither model.safetensors.index.json nor model.safetensors)"]
    assert verify_module.verify(str(tmp_path / "absent"))["errors"] == [f"{tmp_path}/absent: not a directory"]


def test_an_index_total_size_that_differs_is_only_a_note(tmp_path: Path) -> None:
    model = staged(tmp_path)
    index = json.loads((model / "model.safetensors.index.json").read_text())
    index["metadata"]["total_size"] += 1
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    result = verify_module.verify(str(model))
    assert result["errors"] == [] and "metadata.total_size 16385 differs" in result["notes"][0]


def test_manifest_hashes_are_checked_and_cached(tmp_path: Path) -> None:
    model = staged(tmp_path)
    manifest = manifest_of(model)
    cache: dict[str, Any] = {}
    first = verify_module.verify(str(model), manifest, cache)
    assert first["errors"] == [] and first["hashed"] == first["hashed_now"] == 6
    again = verify_module.verify(str(model), manifest, cache)
    assert again["errors"] == [] and (again["hashed"], again["hashed_now"]) == (6, 0)  # from the cache
    shard = model / "model-00002-of-00004.safetensors"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes: a corrupted copy the headers cannot see
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))
    (error,) = verify_module.verify(str(model), manifest, cache)["errors"]
    assert error.startswith(f"{shard}: SHA-256 ") and "is not the manifest's" in error


def test_manifest_entries_must_exist_and_parse(tmp_path: Path) -> None:
    model = staged(tmp_path)
    manifest = manifest_of(model) + f"{'0' * 64}  extra.bin\nnot a line\n"
    errors = verify_module.verify(str(model), manifest)["errors"]
    assert errors == ["manifest line 8: not '<sha256>  <file>': 'not a line'",
                      f"{model}/extra.bin: missing (listed in the SHA-256 manifest)"]


@pytest.mark.parametrize(("name", "shards"), [("kimi-k2.5", 64), ("kimi-k2.5-eagle3", 1)])
def test_the_sandbox_manifests_match_what_make_model_stages(tmp_path: Path, name: str, shards: int) -> None:
    model = staged(tmp_path, name, shards)
    result = verify_module.verify(str(model), (MODELS / f"{name}.sha256").read_text())
    assert result["errors"] == [] and result["hashed"] == shards + 2


def test_module_fails_naming_the_file_and_writes_no_cache_in_check_mode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = staged(tmp_path)
    cache = tmp_path / "state" / "cache.json"
    ok = run_module({"path": str(model), "manifest": manifest_of(model), "cache_file": str(cache),
                     "_ansible_check_mode": True}, capsys)
    assert ok["changed"] is False and ok["hashed"] == 6 and not cache.exists()
    ok = run_module({"path": str(model), "manifest": manifest_of(model), "cache_file": str(cache)}, capsys)
    assert ok["hashed_now"] == 6 and len(json.loads(cache.read_text())) == 6
    shard = model / "model-00004-of-00004.safetensors"
    os.truncate(shard, 100)
    failed = run_module({"path": str(model)}, capsys)
    assert failed["failed"] is True
    assert failed["msg"] == (f"{model} is not a complete model:\n- {shard}: header length "
                             f"{struct.unpack('<Q', shard.read_bytes()[:8])[0]} does not fit in its 100 bytes "
                             "(truncated or not safetensors)")


def record_download(model: Path, commit: str, skip: str = "") -> None:
    """What `hf download --local-dir` leaves: .cache/huggingface/download/<file>.metadata, commit first."""
    records = model / ".cache" / "huggingface" / "download"
    records.mkdir(parents=True, exist_ok=True)
    for path in model.iterdir():
        if path.is_file() and path.name != skip:
            (records / f"{path.name}.metadata").write_text(f"{commit}\n{'e' * 40}\n1712656091.123\n")


def test_download_mode_needs_every_file_from_the_pinned_commit(tmp_path: Path) -> None:
    model = staged(tmp_path, shards=2)
    pinned, other = "a" * 40, "b" * 40
    errors = verify_module.verify(str(model), revision=pinned)["errors"]
    assert errors[0] == f"{model}/config.json: not downloaded at revision {pinned} (no download record)"
    assert len(errors) == 4  # config, index, two shards: pre-staged files, or hf kept them when offline
    record_download(model, pinned)
    assert verify_module.verify(str(model), revision=pinned)["errors"] == []
    record_download(model, other)
    (model / ".cache/huggingface/download/config.json.metadata").write_text(f"{pinned}\n")
    errors = verify_module.verify(str(model), revision=pinned)["errors"]
    assert errors[0] == f"{model}/model.safetensors.index.json: downloaded at revision {other}, not {pinned}"
    assert len(errors) == 3
    assert verify_module.verify(str(model))["errors"] == []  # prestaged mode: no revision check
