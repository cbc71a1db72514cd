#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check that a safetensors model directory is complete before a server loads it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_weights_verify
short_description: Verify a safetensors model directory (config, every shard, optional SHA-256 manifest)
author: sglang-deploy contributors (@sglang-deploy)
description:
  - Read-only check of a Hugging Face style model directory, meant to run before a server restart so
    that a half-copied checkpoint is found in seconds instead of ten minutes into a load.
  - C(config.json) must exist and hold a JSON object.
  - Every shard named in C(model.safetensors.index.json) (or the single C(model.safetensors)) must exist
    and be exactly as long as its safetensors header declares (8 bytes of header length, the JSON header,
    then the data up to the largest tensor end offset), so a truncated or padded shard is named. Every
    tensor the index maps to a shard must be in that shard's header.
  - With O(revision), config.json, the index and every shard must have been downloaded by the Hugging
    Face CLI (C(hf download --local-dir)) at that commit, as its per-file download records under
    C(.cache/huggingface/download/) say. The CLI exits 0 and keeps the files already there when the
    Hub cannot be reached, so its exit status alone proves nothing.
  - With O(manifest), every file it lists must exist and have that SHA-256. Hashes are cached in
    O(cache_file) by size and modification time, so unchanged files are not read again.
  - Fails with every problem listed, each naming its file. Never changes the model directory.
version_added: "1.0.0"
options:
  path:
    description: The model directory.
    type: path
    required: true
  manifest:
    description: Text of a C(sha256sum) manifest (C(<sha256>  <file>) lines, paths relative to O(path)).
    type: str
    default: ""
  revision:
    description: Commit every weight file must have been downloaded at (download mode); empty skips the check.
    type: str
    default: ""
  cache_file:
    description: JSON file caching SHA-256 results by size and mtime; not written in check mode.
    type: path
  workers:
    description: Files hashed in parallel.
    type: int
    default: 4
extends_documentation_fragment: [sglang.deploy.attributes, sglang.deploy.attributes.read_only]
attributes:
  check_mode:
    details: The model directory is only read; O(cache_file) is not written in check mode.
"""

EXAMPLES = r"""
- name: Verify the model before the service restarts
  sglang.deploy.sglang_weights_verify:
    path: /models/Kimi-K2.5
    manifest: "{{ lookup('ansible.builtin.file', 'manifests/kimi-k2.5.sha256') }}"
    cache_file: /var/lib/sglang-deploy/weights/models_Kimi-K2.5.json
"""

RETURN = r"""
shards:
  description: Safetensors files checked.
  type: int
  returned: always
  sample: 64
tensors:
  description: Tensors found in their headers.
  type: int
  returned: always
  sample: 2253
bytes:
  description: Total size of the shards.
  type: int
  returned: always
  sample: 547000000000
hashed:
  description: Files whose SHA-256 was checked against the manifest (from the cache or read now).
  type: int
  returned: always
  sample: 66
hashed_now:
  description: Of those, files read and hashed in this run.
  type: int
  returned: always
  sample: 0
notes:
  description: Oddities that do not stop a load (an index total_size that differs from the headers); also warnings.
  type: list
  elements: str
  returned: always
  sample: ["/m/model.safetensors.index.json: metadata.total_size 1029718614016 differs from the headers' 1029718613"]
errors:
  description: What is wrong, one line per problem, each naming its file.
  type: list
  elements: str
  returned: failure
  sample:
    - "/models/Kimi-K2.5/model-00007-of-00064.safetensors: short, 1000 bytes but its header declares 4096"
"""

import hashlib
import json
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ansible.module_utils.basic import AnsibleModule

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
MAX_HEADER = 100 * 1024 * 1024  # the safetensors format's own limit
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "U16": 2, "I16": 2, "F16": 2,
               "BF16": 2, "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8}


class ShardError(Exception):
    """A shard that a server could not load."""


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def shard_header(path: str) -> tuple[dict[str, Any], int]:
    """(tensors of the header, size the file must have)."""
    size = os.path.getsize(path)
    if size < 8:
        raise ShardError(f"{size} bytes, shorter than the 8-byte safetensors header length")
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > MAX_HEADER or 8 + length > size:
            raise ShardError(f"header length {length} does not fit in its {size} bytes (truncated or not safetensors)")
        try:
            header = json.loads(handle.read(length))
        except ValueError as error:
            raise ShardError(f"unreadable safetensors header ({error})") from error
    if not isinstance(header, dict):
        raise ShardError("the safetensors header is not a JSON object")
    tensors = {name: info for name, info in header.items() if name != "__metadata__"}
    try:
        end = max((int(info["data_offsets"][1]) for info in tensors.values()), default=0)
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise ShardError(f"a tensor without valid data_offsets ({error})") from error
    return tensors, 8 + length + end


def tensor_bytes(info: dict[str, Any]) -> int:
    count = 1
    for dim in info.get("shape", []):
        count *= int(dim)
    return count * DTYPE_BYTES.get(str(info.get("dtype")), 0)


def weight_files(path: str, errors: list[str]) -> dict[str, list[str]]:
    """Shard file -> tensors the index maps to it (empty list for a single-file model)."""
    index = os.path.join(path, INDEX)
    if os.path.isfile(index):
        try:
            weight_map = read_json(index).get("weight_map")
        except (OSError, ValueError, AttributeError) as error:
            errors.append(f"{index}: unreadable ({error})")
            return {}
        if not isinstance(weight_map, dict) or not weight_map:
            errors.append(f"{index}: no weight_map")
            return {}
        shards: dict[str, list[str]] = {}
        for tensor, shard in weight_map.items():
            shards.setdefault(str(shard), []).append(str(tensor))
        return shards
    if os.path.isfile(os.path.join(path, SINGLE)):
        return {SINGLE: []}
    errors.append(f"{path}: no weights (neither {INDEX} nor {SINGLE})")
    return {}


def check_shards(path: str, shards: dict[str, list[str]], errors: list[str]) -> dict[str, int]:
    totals = {"shards": 0, "tensors": 0, "bytes": 0, "tensor_bytes": 0}
    for shard, mapped in sorted(shards.items()):
        file = os.path.join(path, shard)
        if not os.path.isfile(file):
            errors.append(f"{file}: missing (named in {INDEX})")
            continue
        try:
            tensors, expected = shard_header(file)
        except (OSError, ShardError) as error:
            errors.append(f"{file}: {error}")
            continue
        size = os.path.getsize(file)
        if size < expected:
            errors.append(f"{file}: short, {size} bytes but its header declares {expected} (truncated copy?)")
        elif size > expected:
            errors.append(f"{file}: {size} bytes but its header declares {expected} (trailing data)")
        absent = sorted(set(mapped) - set(tensors))
        if absent:
            errors.append(f"{file}: lacks {len(absent)} tensor(s) the index maps to it, e.g. {absent[0]}")
        totals["shards"] += 1
        totals["tensors"] += len(tensors)
        totals["bytes"] += size
        totals["tensor_bytes"] += sum(tensor_bytes(info) for info in tensors.values())
    return totals


def check_revision(path: str, files: list[str], revision: str, errors: list[str]) -> None:
    """Each file's Hugging Face download record (first line: the commit) must name the revision."""
    for name in files:
        record = os.path.join(path, ".cache", "huggingface", "download", name + ".metadata")
        try:
            with open(record, encoding="utf-8") as handle:
                commit = handle.readline().strip()
        except OSError:
            errors.append(f"{os.path.join(path, name)}: not downloaded at revision {revision} (no download record)")
            continue
        if commit != revision:
            errors.append(f"{os.path.join(path, name)}: downloaded at revision {commit}, not {revision}")


def parse_manifest(text: str, errors: list[str]) -> dict[str, str]:
    entries = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        digest, _sep, name = line.partition(" ")
        name = name.strip().lstrip("*")
        if len(digest) != 64 or not name or any(c not in "0123456789abcdefABCDEF" for c in digest):
            errors.append(f"manifest line {number}: not '<sha256>  <file>': {line[:80]!r}")
            continue
        entries[name] = digest.lower()
    return entries


def sha256(file: str) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        for block in iter(lambda: handle.read(8 * 1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def load_cache(cache_file: str | None) -> dict[str, Any]:
    if not cache_file:
        return {}
    try:
        cache = read_json(cache_file)
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def check_manifest(path: str, entries: dict[str, str], cache: dict[str, Any], workers: int,
                   errors: list[str]) -> tuple[int, int]:
    """(files checked, files hashed now); updates cache in place."""
    todo = []
    checked = 0
    for name, expected in sorted(entries.items()):
        file = os.path.join(path, name)
        try:
            stat = os.stat(file)
        except OSError:
            errors.append(f"{file}: missing (listed in the SHA-256 manifest)")
            continue
        key = os.path.abspath(file)
        hit = cache.get(key)
        if hit and hit.get("size") == stat.st_size and hit.get("mtime_ns") == stat.st_mtime_ns:
            checked += 1
            if hit.get("sha256") != expected:
                errors.append(f"{file}: SHA-256 {hit.get('sha256')} is not the manifest's {expected}")
            continue
        todo.append((file, key, expected, stat))
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        digests = list(pool.map(lambda item: sha256(item[0]), todo))
    for (file, key, expected, stat), digest in zip(todo, digests, strict=True):
        checked += 1
        cache[key] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}
        if digest != expected:
            errors.append(f"{file}: SHA-256 {digest} is not the manifest's {expected}")
    return checked, len(todo)


def verify(path: str, manifest: str = "", cache: dict[str, Any] | None = None, workers: int = 4,
           revision: str = "") -> dict[str, Any]:
    """Everything wrong with the model directory (errors) and what was checked."""
    errors: list[str] = []
    notes: list[str] = []
    result: dict[str, Any] = {"errors": errors, "notes": notes, "shards": 0, "tensors": 0, "bytes": 0,
                              "hashed": 0, "hashed_now": 0}
    if not os.path.isdir(path):
        errors.append(f"{path}: not a directory")
        return result
    config = os.path.join(path, "config.json")
    try:
        if not isinstance(read_json(config), dict):
            errors.append(f"{config}: not a JSON object")
    except FileNotFoundError:
        errors.append(f"{config}: missing")
    except (OSError, ValueError) as error:
        errors.append(f"{config}: unreadable ({error})")
    shards = weight_files(path, errors)
    totals = check_shards(path, shards, errors)
    result.update({key: totals[key] for key in ("shards", "tensors", "bytes")})
    index = os.path.join(path, INDEX)
    if revision and shards:
        names = ["config.json"] + ([INDEX] if os.path.isfile(index) else []) + sorted(shards)
        check_revision(path, names, revision, errors)
    if os.path.isfile(index) and not errors:
        declared = (read_json(index).get("metadata") or {}).get("total_size")
        if isinstance(declared, int) and declared != totals["tensor_bytes"]:
            notes.append(f"{index}: metadata.total_size {declared} differs from the headers' "
                         f"{totals['tensor_bytes']}")
    if manifest.strip():
        entries = parse_manifest(manifest, errors)
        result["hashed"], result["hashed_now"] = check_manifest(path, entries, cache if cache is not None else {},
                                                                workers, errors)
    return result


def save_cache(cache_file: str, cache: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(cache_file) or ".", exist_ok=True)
    tmp = cache_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(cache, handle, indent=1, sort_keys=True)
    os.replace(tmp, cache_file)


def checked(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    """verify() with the hash cache of O(cache_file), which is saved when it changed (not in check mode)."""
    cache = load_cache(params["cache_file"])
    before = json.dumps(cache, sort_keys=True)
    result = verify(params["path"], params["manifest"], cache, params["workers"], params["revision"])
    if params["cache_file"] and not check_mode and json.dumps(cache, sort_keys=True) != before:
        save_cache(params["cache_file"], cache)
    return result


def failure_message(path: str, errors: list[str]) -> str:
    shown = errors[:20] + ([f"... and {len(errors) - 20} more"] if len(errors) > 20 else [])
    return f"{path} is not a complete model:\n- " + "\n- ".join(shown)


ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "path": {"type": "path", "required": True},
    "manifest": {"type": "str", "default": ""},
    "cache_file": {"type": "path"},
    "workers": {"type": "int", "default": 4},
    "revision": {"type": "str", "default": ""},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = checked(module.params, module.check_mode)
    for note in result["notes"]:
        module.warn(note)
    if result["errors"]:
        module.fail_json(msg=failure_message(module.params["path"], result["errors"]), **result)
    del result["errors"]
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
