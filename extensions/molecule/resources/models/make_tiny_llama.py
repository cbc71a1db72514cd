"""Build the `engine` scenario's tiny Llama: a model the real SGLang server loads and serves on a CPU.

    make_tiny_llama.py DEST_DIR [--max-position-embeddings N] [--architecture NAME]

Writes, with the standard library only (no torch, no transformers, no download):
- config.json: LlamaForCausalLM, hidden size 64, 2 layers, 4 attention heads, 2 KV heads (head dim 16),
  intermediate size 128, vocabulary 512, bf16;
- model.safetensors: its 139,584 parameters, random (normal, sigma 0.02, seed fixed) and in bf16;
- tokenizer.json: a byte-level BPE (the 256 byte symbols of GPT-2's byte-to-unicode map, 253 merges of
  letter pairs, 3 special tokens: 512 tokens, the configured vocabulary);
- tokenizer_config.json (PreTrainedTokenizerFast, a trivial chat template) and generation_config.json.

The bytes depend on nothing but the arguments, so a SHA-256 manifest of the directory can be committed and
the weights role verify it. `--architecture` writes a config that names another architecture: a model
directory SGLang cannot load (the refused-start drill). Its answers are gibberish, as random weights give.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE, VOCAB = 64, 2, 4, 2, 16, 128, 512
SPECIALS = ["<s>", "</s>", "<pad>"]
LETTERS = "etaoinshrdlucmfw"
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def byte_symbols() -> list[str]:
    """GPT-2's byte-to-unicode map (what the ByteLevel pre-tokenizer turns each byte into), in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    symbols, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            symbols[byte] = chr(byte)
        else:
            symbols[byte] = chr(256 + extra)
            extra += 1
    return [symbols[byte] for byte in range(256)]


def tokenizer() -> dict[str, object]:
    vocab = {token: index for index, token in enumerate(SPECIALS)}
    for symbol in byte_symbols():
        vocab[symbol] = len(vocab)
    merges = []
    for first in LETTERS:
        for second in LETTERS:
            if len(vocab) == VOCAB:
                break
            merges.append(f"{first} {second}")
            vocab[first + second] = len(vocab)
    added = [{"id": index, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for index, token in enumerate(SPECIALS)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": byte_level, "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def shapes() -> dict[str, list[int]]:
    result = {"model.embed_tokens.weight": [VOCAB, HIDDEN]}
    for layer in range(LAYERS):
        prefix = f"model.layers.{layer}."
        result.update({
            prefix + "input_layernorm.weight": [HIDDEN],
            prefix + "self_attn.q_proj.weight": [HEADS * HEAD_DIM, HIDDEN],
            prefix + "self_attn.k_proj.weight": [KV_HEADS * HEAD_DIM, HIDDEN],
            prefix + "self_attn.v_proj.weight": [KV_HEADS * HEAD_DIM, HIDDEN],
            prefix + "self_attn.o_proj.weight": [HIDDEN, HEADS * HEAD_DIM],
            prefix + "post_attention_layernorm.weight": [HIDDEN],
            prefix + "mlp.gate_proj.weight": [INTERMEDIATE, HIDDEN],
            prefix + "mlp.up_proj.weight": [INTERMEDIATE, HIDDEN],
            prefix + "mlp.down_proj.weight": [HIDDEN, INTERMEDIATE],
        })
    result["model.norm.weight"] = [HIDDEN]
    result["lm_head.weight"] = [VOCAB, HIDDEN]
    return result


def bf16(values: list[float]) -> bytes:
    """The upper half of each float32: bf16 by truncation."""
    packed = struct.pack(f"<{len(values)}f", *values)
    return b"".join(packed[offset + 2:offset + 4] for offset in range(0, len(packed), 4))


def safetensors() -> bytes:
    rng = random.Random(20261204)
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    payload = bytearray()
    for name, shape in shapes().items():
        count = 1
        for size in shape:
            count *= size
        values = [1.0] * count if name.endswith("norm.weight") else [rng.gauss(0.0, 0.02) for _index in range(count)]
        data = bf16(values)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [len(payload), len(payload) + len(data)]}
        payload += data
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes(payload)


def config(max_position_embeddings: int, architecture: str) -> dict[str, object]:
    return {
        "architectures": [architecture], "model_type": "llama", "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": VOCAB, "hidden_act": "silu",
        "max_position_embeddings": max_position_embeddings, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "bos_token_id": 0, "eos_token_id": 1,
        "pad_token_id": 2,
    }


def files(max_position_embeddings: int, architecture: str) -> dict[str, bytes]:
    def doc(value: object) -> bytes:
        return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()

    return {
        "config.json": doc(config(max_position_embeddings, architecture)),
        "generation_config.json": doc({"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2}),
        "tokenizer.json": doc(tokenizer()),
        "tokenizer_config.json": doc({
            "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
            "pad_token": "<pad>", "model_max_length": max_position_embeddings, "chat_template": CHAT_TEMPLATE}),
        "model.safetensors": safetensors(),
    }


def write_if_changed(path: str, data: bytes) -> None:
    if os.path.exists(path):
        with open(path, "rb") as handle:
            if handle.read() == data:
                return
    with open(path, "wb") as handle:
        handle.write(data)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("dest")
    parser.add_argument("--max-position-embeddings", type=int, default=4096)
    parser.add_argument("--architecture", default="LlamaForCausalLM")
    args = parser.parse_args(argv)
    os.makedirs(args.dest, exist_ok=True)
    for name, data in files(args.max_position_embeddings, args.architecture).items():
        write_if_changed(os.path.join(args.dest, name), data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
