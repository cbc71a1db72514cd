"""Stage a tiny model directory with a real config.json for sandbox hosts.

    make_model.py DEST_DIR SHARDS [SHARD_BYTES]

Next to DEST_DIR/config.json (copied there first), writes SHARDS safetensors files named like a real checkpoint
(model-00001-of-00064.safetensors ...) each with a valid safetensors header and SHARD_BYTES of
payload, and model.safetensors.index.json mapping one tensor per shard. Idempotent: files that
already have the right content are left alone.
"""

from __future__ import annotations

import json
import os
import struct
import sys


def shard_bytes(index: int, payload: int) -> bytes:
    name = f"model.layers.{index}.weight"
    header = {name: {"dtype": "U8", "shape": [payload], "data_offsets": [0, payload]},
              "__metadata__": {"format": "pt"}}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes([index % 251]) * payload


def write_if_changed(path: str, data: bytes) -> None:
    if os.path.exists(path):
        with open(path, "rb") as handle:
            if handle.read() == data:
                return
    with open(path, "wb") as handle:
        handle.write(data)


def main(argv: list[str]) -> int:
    dest, shards = argv[1], int(argv[2])
    payload = int(argv[3]) if len(argv) > 3 else 4096
    if not os.path.exists(os.path.join(dest, "config.json")):
        sys.stderr.write(f"{dest}/config.json is missing\n")
        return 1
    weight_map, total = {}, 0
    for index in range(shards):
        name = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        data = shard_bytes(index, payload)
        write_if_changed(os.path.join(dest, name), data)
        weight_map[f"model.layers.{index}.weight"] = name
        total += payload
    index_doc = {"metadata": {"total_size": total}, "weight_map": weight_map}
    write_if_changed(os.path.join(dest, "model.safetensors.index.json"),
                     (json.dumps(index_doc, indent=2, sort_keys=True) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
