"""Model configs the capacity tests share: the KV-relevant keys of real public config.json files, with
their published values, and the example's Kimi-K2.5 and its EAGLE-3 draft."""

from __future__ import annotations

import json
from typing import Any

from helpers import ROOT

# deepseek-ai/DeepSeek-V3 config.json
DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "num_nextn_predict_layers": 1, "n_routed_experts": 256, "vocab_size": 129280,
    "max_position_embeddings": 163840, "torch_dtype": "bfloat16",
}
# moonshotai/Kimi-K2-Instruct config.json
KIMI_K2: dict[str, Any] = dict(
    DEEPSEEK_V3, model_type="kimi_k2", num_attention_heads=64, num_key_value_heads=64, n_routed_experts=384,
    num_nextn_predict_layers=0, vocab_size=163840, max_position_embeddings=131072)
# meta-llama/Llama-3.3-70B-Instruct config.json
LLAMA3_70B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 28672,
    "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}
# Qwen/Qwen3-235B-A22B config.json (head_dim 128 is NOT hidden_size / heads = 64)
QWEN3_235B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 4096,
    "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
    "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 1536, "vocab_size": 151936,
    "max_position_embeddings": 40960, "use_sliding_window": False, "sliding_window": None,
    "max_window_layers": 94, "torch_dtype": "bfloat16",
}
KIMI_K25 = json.loads((ROOT / "extensions/molecule/resources/models/kimi-k2.5/config.json").read_text())
EAGLE3 = json.loads((ROOT / "extensions/molecule/resources/models/kimi-k2.5-eagle3/config.json").read_text())
