#!/usr/bin/env python3
"""Writes the safetensors interop fixtures under tests/data/io/ with the reference writer.

Run from the repository root with the tools venv (safetensors==0.7.0, numpy):

    tools/.venv/bin/python tools/make_io_fixtures.py

The files are committed; the C++ tests never run Python. tests/safetensors_test.cpp reads them
with tessera's reader and also rewrites the same tensors with tessera's writer, expecting the
exact same bytes (so files tessera writes are what the reference implementation writes).

Fixtures:
  interop.safetensors        every dtype tessera holds, a scalar, a zero-size tensor,
                             __metadata__ {"format": "pt"}
  sharded/                   model-0000k-of-00001.safetensors + model.safetensors.index.json,
                             laid out like transformers' save_pretrained (gpt-oss.md §1.4 names)
  f4.safetensors             a sub-byte F4 tensor, which tessera must reject by name
  c64.safetensors            a complex64 tensor, likewise
  configs/<model>/           config.json (and generation_config.json) of gpt-oss-20b/-120b
                             (gpt-oss.md §1.1, §1.3), gpt-oss-20b in transformers v5 spelling
                             (rope_parameters, rope.md), Llama 3.1 (rope.md §8), DeepSeek-V3
                             (rope.md §7) and Qwen3, written like transformers' to_json_file
                             (indent 2, sorted keys)
"""

import json
import os
import struct

import numpy as np
from safetensors import serialize_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "io")

# Python safetensors dtype names -> safetensors header names (the header is what tests check).
ELEMENT_SIZE = {
    "bool": 1, "uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "uint32": 4, "int32": 4,
    "uint64": 8, "int64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e8m0fnu": 1,
}


def pattern(nbytes, seed):
    """Deterministic bytes: byte i is (i * 7 + seed) mod 256 (PatternByte in the C++ test)."""
    return bytes((i * 7 + seed) & 0xFF for i in range(nbytes))


def raw(dtype, shape, data):
    numel = int(np.prod(shape)) if shape else 1
    assert len(data) == numel * ELEMENT_SIZE[dtype], (dtype, shape, len(data))
    return {"dtype": dtype, "shape": list(shape), "data": data}


def bf16_bytes(values):
    # Truncation is exact for these values (all representable in BF16).
    f32 = np.asarray(values, dtype=np.float32).view(np.uint32)
    assert np.all(f32 & 0xFFFF == 0)
    return (f32 >> 16).astype("<u2").tobytes()


def interop_tensors():
    t = {}
    # Tensors with values the test decodes.
    t["values.f32"] = raw("float32", [2, 3], np.array([1.0, -2.5, 3.25, 0.0, 1e-3, 100.0], "<f4").tobytes())
    t["values.bf16"] = raw("bfloat16", [4], bf16_bytes([1.0, -2.0, 0.5, 3.0]))
    t["values.f16"] = raw("float16", [3], np.array([1.0, -0.5, 65504.0], "<f2").tobytes())
    t["values.i64"] = raw("int64", [2], np.array([-1, 1 << 40], "<i8").tobytes())
    t["values.f8"] = raw("float8_e4m3fn", [2], bytes([0x38, 0x7E]))  # 1.0 and 448.0
    t["scalar"] = raw("float32", [], np.array([7.5], "<f4").tobytes())
    t["empty"] = raw("bfloat16", [0, 4], b"")
    # One tensor per remaining dtype, filled with pattern bytes.
    seed = 1
    for dtype, shape in [("bool", [3]), ("uint8", [2, 5]), ("int8", [7]), ("uint16", [3]), ("int16", [2, 2]),
                         ("uint32", [3]), ("int32", [5]), ("uint64", [1]), ("float64", [2]),
                         ("float8_e5m2", [4]), ("float8_e8m0fnu", [6])]:
        n = int(np.prod(shape)) * ELEMENT_SIZE[dtype]
        data = pattern(n, seed)
        if dtype == "bool":
            data = bytes(b & 1 for b in data)  # booleans must be 0 or 1
        t["pattern." + dtype] = raw(dtype, shape, data)
        seed += 1
    return t


def write_sharded(directory):
    """Two shards the way transformers' save_pretrained lays them out: shard files written by
    safetensors with {"format": "pt"}, the index as json.dumps(indent=2, sort_keys=True) + "\\n"."""
    os.makedirs(directory, exist_ok=True)
    shards = [
        {"model.embed_tokens.weight": raw("bfloat16", [8, 4], pattern(64, 11)),
         "model.layers.0.input_layernorm.weight": raw("bfloat16", [4], pattern(8, 12))},
        {"model.layers.0.mlp.experts.gate_up_proj_blocks": raw("uint8", [2, 4, 1, 16], pattern(128, 13)),
         "model.layers.0.mlp.experts.gate_up_proj_scales": raw("uint8", [2, 4, 1], pattern(8, 14))},
    ]
    weight_map = {}
    total = 0
    for i, tensors in enumerate(shards):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))  # as save_pretrained names them
        serialize_file(tensors, os.path.join(directory, name), metadata={"format": "pt"})
        for key, value in tensors.items():
            weight_map[key] = name
            total += len(value["data"])
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")


# ---- configs ---------------------------------------------------------------------------------

ROPE_GPT_OSS = {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                "rope_type": "yarn", "truncate": False}


def gpt_oss_config(layers, experts):
    """gpt-oss.md §1.1: the HF config.json of gpt-oss-20b (24 layers, 32 experts) and -120b
    (36 layers, 128 experts); layer_types alternate starting with sliding_attention."""
    return {
        "architectures": ["GptOssForCausalLM"],
        "attention_bias": True,
        "attention_dropout": 0.0,
        "eos_token_id": 200002,
        "experts_per_token": 4,
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": 2880,
        "initial_context_length": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 2880,
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)],
        "max_position_embeddings": 131072,
        "model_type": "gpt_oss",
        "num_attention_heads": 64,
        "num_experts_per_tok": 4,
        "num_hidden_layers": layers,
        "num_key_value_heads": 8,
        "num_local_experts": experts,
        "output_router_logits": False,
        "pad_token_id": 199999,
        "quantization_config": {
            "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                       "model.embed_tokens", "lm_head"],
            "quant_method": "mxfp4",
        },
        "rms_norm_eps": 1e-05,
        "rope_scaling": dict(ROPE_GPT_OSS),
        "rope_theta": 150000,
        "router_aux_loss_coef": 0.9,
        "sliding_window": 128,
        "swiglu_limit": 7.0,
        "tie_word_embeddings": False,
        "transformers_version": "4.55.0.dev0",
        "use_cache": True,
        "vocab_size": 201088,
    }


def gpt_oss_v5_config():
    """The same 20b config as transformers v5 writes it: rope_parameters, with rope_theta inside."""
    c = gpt_oss_config(24, 32)
    del c["rope_scaling"]
    c["rope_parameters"] = dict(ROPE_GPT_OSS, rope_theta=c.pop("rope_theta"))
    return c


# gpt-oss.md §1.3.
GPT_OSS_GENERATION = {"bos_token_id": 199998, "do_sample": True, "eos_token_id": [200002, 199999, 200012],
                      "pad_token_id": 199999, "transformers_version": "4.55.0.dev0"}

# meta-llama/Llama-3.1-8B-Instruct (public config; rope_scaling as in rope.md §8). No head_dim:
# it is hidden_size / num_attention_heads = 128.
LLAMA31_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0", "use_cache": True, "vocab_size": 128256,
}

# deepseek-ai/DeepSeek-V3 (public config; rope values as rope.md §7 lists them, legacy "type"
# spelling, n_routed_experts for the expert count, FP8 block quantization).
DEEPSEEK_V3_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3,
    "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": False,
    "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "transformers_version": "4.33.1",
    "use_cache": True, "v_head_dim": 128, "vocab_size": 129280,
}

# Qwen/Qwen3-8B (public config): explicit head_dim, null rope_scaling and sliding_window.
QWEN3_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
    "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
    "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


def write_configs(directory):
    write_json(os.path.join(directory, "gpt-oss-20b", "config.json"), gpt_oss_config(24, 32))
    write_json(os.path.join(directory, "gpt-oss-20b", "generation_config.json"), GPT_OSS_GENERATION)
    write_json(os.path.join(directory, "gpt-oss-120b", "config.json"), gpt_oss_config(36, 128))
    write_json(os.path.join(directory, "gpt-oss-120b", "generation_config.json"), GPT_OSS_GENERATION)
    write_json(os.path.join(directory, "gpt-oss-20b-v5", "config.json"), gpt_oss_v5_config())
    write_json(os.path.join(directory, "llama-3.1-8b", "config.json"), LLAMA31_CONFIG)
    write_json(os.path.join(directory, "deepseek-v3", "config.json"), DEEPSEEK_V3_CONFIG)
    write_json(os.path.join(directory, "qwen3-8b", "config.json"), QWEN3_CONFIG)


def main():
    os.makedirs(ROOT, exist_ok=True)
    serialize_file(interop_tensors(), os.path.join(ROOT, "interop.safetensors"), metadata={"format": "pt"})
    write_sharded(os.path.join(ROOT, "sharded"))
    # F4 packs two values per byte; torch's float4_e2m1fn_x2 shape [2] is header shape [4] (2 bytes).
    serialize_file({"packed": {"dtype": "float4_e2m1fn_x2", "shape": [2], "data": b"\x12\x34"}},
                   os.path.join(ROOT, "f4.safetensors"))
    serialize_file({"z": {"dtype": "complex64", "shape": [1], "data": struct.pack("<ff", 1.0, -1.0)}},
                   os.path.join(ROOT, "c64.safetensors"))
    write_configs(os.path.join(ROOT, "configs"))


if __name__ == "__main__":
    main()
