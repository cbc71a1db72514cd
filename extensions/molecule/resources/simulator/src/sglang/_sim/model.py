"""What the simulator reads from a model directory: config.json and the shard list."""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import Any

from . import sglang_capacity as capacity  # the copy build_wheel.py puts next to this file

DEFAULT_SHARDS = 64
# A Kimi-K2.5 / DeepSeek-V3 style text config, used for a hub id that is not a local path.
DEFAULT_CONFIG: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "hidden_size": 7168,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "max_position_embeddings": 262144,
}


class ModelError(Exception):
    """The model path cannot be used; the message is the real exception line."""


@dataclass(frozen=True)
class ModelInfo:
    path: str
    config: dict[str, Any]
    shards: int

    @property
    def text_config(self) -> dict[str, Any]:
        inner = self.config.get("text_config")
        return inner if isinstance(inner, dict) else self.config

    @property
    def architecture(self) -> str:
        names = self.config.get("architectures") or ["LlamaForCausalLM"]
        return str(names[0])

    @property
    def is_mla(self) -> bool:
        return bool(self.text_config.get("kv_lora_rank"))

    @property
    def layers(self) -> int:
        return int(self.text_config.get("num_hidden_layers") or 32)

    @property
    def context_len(self) -> int:
        return int(self.text_config.get("max_position_embeddings") or 4096)

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type") or "llama")

    @property
    def quant_log(self) -> str:
        """ModelConfig.get_quantization_config_log_str (0.5.23 configs/model_config.py:1899-1919) and its ", ",
        as "Load weight end" prints it: "quant=compressed-tensors, " for a quantized checkpoint, else ""."""
        found = self.config.get("quantization_config") or self.config.get("compression_config")
        if not isinstance(found, dict):
            found = self.text_config.get("quantization_config")
        if not isinstance(found, dict) or not found:
            return ""
        text = "quant={}".format(found.get("quant_method", "quantized"))
        for key in ("bits", "quant_algo", "fmt", "requantization_method"):
            if key in found:
                text += f", {key}={found[key]}"
        return text + ", "


def looks_local(path: str) -> bool:
    return path.startswith(("/", "./", "../", "~")) or os.path.isdir(path)


def incorrect_path(path: str) -> ModelError:
    return ModelError(
        f"OSError: Incorrect path_or_model_id: '{path}'. Please provide either the path to a local "
        "folder or the repo_id of a model on the Hub."
    )


def count_shards(path: str) -> int:
    """Distinct files of the safetensors index, else *.safetensors files, else 64."""
    index = os.path.join(path, "model.safetensors.index.json")
    try:
        with open(index, encoding="utf-8") as handle:
            weight_map = json.load(handle).get("weight_map") or {}
        files = {str(name) for name in weight_map.values()}
        if files:
            return len(files)
    except (OSError, ValueError, AttributeError):
        pass
    found: list[str] = glob.glob(os.path.join(path, "*.safetensors"))
    return len(found) or DEFAULT_SHARDS


def load_model(path: str | None) -> ModelInfo:
    """Read a model the way ServerArgs/ModelConfig would, raising the real errors."""
    if not path:
        raise ModelError("TypeError: expected str, bytes or os.PathLike object, not NoneType")
    if not looks_local(path):
        return ModelInfo(path=path, config=dict(DEFAULT_CONFIG), shards=DEFAULT_SHARDS)
    local = os.path.expanduser(path)
    if not os.path.isdir(local):
        raise incorrect_path(path)
    try:
        with open(os.path.join(local, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except FileNotFoundError:
        raise ModelError(
            f"OSError: {path} does not appear to have a file named config.json. Checkout "
            f"'https://huggingface.co/{path}/tree/None' for available files."
        ) from None
    except (OSError, ValueError) as error:
        raise ModelError("OSError: It looks like the config file at '{}' is not a valid JSON "
                         "file. ({})".format(os.path.join(path, "config.json"), error)) from None
    if not isinstance(config, dict):
        raise ModelError(f"OSError: {path}/config.json is not a JSON object")
    return ModelInfo(path=path, config=config, shards=count_shards(local))


# Block-scaled KV formats the planner does not model: elements per byte, scales left out.
PACKED_DTYPE_BYTES = {"mxfp8": 1.0, "nvfp4": 0.5, "fp4_mx_block16": 0.5, "fp4_e2m1": 0.5}


def kv_bytes_per_token(model: ModelInfo, kv_cache_dtype: str | None, tp_size: int) -> int:
    """KV bytes per token on one rank, from the capacity planner (MLA latent KV is on every rank)."""
    try:
        shape = capacity.model_shape(model.config)
    except capacity.CapacityError:
        shape = capacity.model_shape(DEFAULT_CONFIG)  # a config the planner cannot read: Kimi-K2.5 sizes
    dtype = str(kv_cache_dtype or "auto")
    if dtype in PACKED_DTYPE_BYTES:
        return int(capacity.kv_bytes_per_token(shape, "auto", tp_size) * PACKED_DTYPE_BYTES[dtype] / 2)
    try:
        return capacity.kv_bytes_per_token(shape, dtype, tp_size)
    except capacity.CapacityError:
        return capacity.kv_bytes_per_token(shape, "auto", tp_size)
