#!/usr/bin/env python3
"""Writes the committed gpt-oss test manifests (tests/data/gpt_oss_{20b,120b}_manifest.json).

The manifests are an independent transcription of the real Hugging Face checkpoints, used by
tests/gpt_oss_weights_test.cpp to check tessera's one tensor description (src/model/tensor_specs.h)
and the synth presets. Nothing here is generated from tessera's C++ code.

Sources:
  - names, shapes and dtypes: ../shared/reference/gpt-oss.md §2.1 (table) and §2.3 (MXFP4 layout);
  - tensor order and the 20b shard of every tensor: the Hub's model.safetensors.index.json of
    openai/gpt-oss-20b, whose weight_map lists the tensors in the order the converter wrote them
    (the original checkpoint's sorted names: layers compared as strings, per layer attn.norm,
    attn.out, attn.qkv split into q/k/v biases then weights, sinks, mlp.gate, mlp1, mlp2, mlp.norm;
    then embedding, norm, unembedding), with shard 00001 starting at
    model.layers.18.self_attn.q_proj.weight and shard 00002 at
    model.layers.6.mlp.experts.gate_up_proj_blocks, and metadata.total_size 13761264768;
  - 120b: 15 shard files (model-00000-of-00014 .. model-00014-of-00014) and 65248815744 tensor
    bytes, as listed for openai/gpt-oss-120b.
The script asserts the byte totals computed from the table against those published totals.

It also writes tests/data/gpt_oss_120b_config.json (the transcribed 20b config.json with the 120b
layer and expert counts, gpt-oss.md §1.1) and tests/data/gpt_oss_generation_config.json (§1.3), in
HF's own format (json.dumps(indent=2, sort_keys=True) plus a newline).

Usage: tools/.venv/bin/python tools/make_gpt_oss_manifests.py   (writes into tests/data/)
"""
import json
import pathlib

H = 2880          # hidden_size
I = 2880          # intermediate_size (per expert)
Q = 64 * 64       # num_attention_heads * head_dim
KV = 8 * 64       # num_key_value_heads * head_dim
V = 201088        # vocab_size
HEADS = 64

DTYPE_BYTES = {"BF16": 2, "U8": 1}


def layer_tensors(layer, experts):
    """One decoder layer in checkpoint order (gpt-oss.md §2.1 shapes)."""
    p = f"model.layers.{layer}."
    e = p + "mlp.experts."
    return [
        (p + "input_layernorm.weight", "BF16", [H]),
        (p + "self_attn.o_proj.bias", "BF16", [H]),
        (p + "self_attn.o_proj.weight", "BF16", [H, Q]),
        (p + "self_attn.q_proj.bias", "BF16", [Q]),
        (p + "self_attn.k_proj.bias", "BF16", [KV]),
        (p + "self_attn.v_proj.bias", "BF16", [KV]),
        (p + "self_attn.q_proj.weight", "BF16", [Q, H]),
        (p + "self_attn.k_proj.weight", "BF16", [KV, H]),
        (p + "self_attn.v_proj.weight", "BF16", [KV, H]),
        (p + "self_attn.sinks", "BF16", [HEADS]),
        (p + "mlp.router.bias", "BF16", [experts]),
        (p + "mlp.router.weight", "BF16", [experts, H]),
        (e + "gate_up_proj_bias", "BF16", [experts, 2 * I]),
        (e + "gate_up_proj_blocks", "U8", [experts, 2 * I, H // 32, 16]),
        (e + "gate_up_proj_scales", "U8", [experts, 2 * I, H // 32]),
        (e + "down_proj_bias", "BF16", [experts, H]),
        (e + "down_proj_blocks", "U8", [experts, H, I // 32, 16]),
        (e + "down_proj_scales", "U8", [experts, H, I // 32]),
        (p + "post_attention_layernorm.weight", "BF16", [H]),
    ]


def checkpoint(layers, experts):
    tensors = []
    for layer in sorted(range(layers), key=str):
        tensors += layer_tensors(layer, experts)
    tensors += [
        ("model.embed_tokens.weight", "BF16", [V, H]),
        ("model.norm.weight", "BF16", [H]),
        ("lm_head.weight", "BF16", [V, H]),
    ]
    return tensors


def nbytes(t):
    n = DTYPE_BYTES[t[1]]
    for d in t[2]:
        n *= d
    return n


def write(path, header, rows):
    # One tensor per line keeps the committed file reviewable.
    lines = ["{"]
    for key, value in header.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},")
    lines.append('  "tensors": [')
    lines.append(",\n".join("    " + json.dumps(r) for r in rows))
    lines.append("  ]")
    lines.append("}")
    path.write_text("\n".join(lines) + "\n")


def main():
    data = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data"

    t20 = checkpoint(24, 32)
    assert len(t20) == 3 + 19 * 24 == 459
    total20 = sum(nbytes(t) for t in t20)
    assert total20 == 13761264768, total20
    names = [t[0] for t in t20]
    starts = [0, names.index("model.layers.18.self_attn.q_proj.weight"),
              names.index("model.layers.6.mlp.experts.gate_up_proj_blocks")]
    rows = []
    for i, (name, dtype, shape) in enumerate(t20):
        shard = sum(1 for s in starts if i >= s) - 1
        rows.append([name, dtype, shape, shard])
    write(data / "gpt_oss_20b_manifest.json",
          {"model": "openai/gpt-oss-20b",
           "source": "gpt-oss.md §2.1/§2.3; order and shards from the Hub model.safetensors.index.json",
           "row_format": "[name, dtype, shape, shard index]",
           "total_size": total20,
           "shards": [f"model-{i:05d}-of-00002.safetensors" for i in range(3)]},
          rows)

    t120 = checkpoint(36, 128)
    assert len(t120) == 3 + 19 * 36 == 687
    total120 = sum(nbytes(t) for t in t120)
    assert total120 == 65248815744, total120
    write(data / "gpt_oss_120b_manifest.json",
          {"model": "openai/gpt-oss-120b",
           "source": "gpt-oss.md §2.1/§2.3; 15 shards and total bytes as published on the Hub",
           "row_format": "[name, dtype, shape]",
           "total_size": total120,
           "shards": [f"model-{i:05d}-of-00014.safetensors" for i in range(15)]},
          [[n, d, s] for n, d, s in t120])

    # config.json of the 20b is transcribed by hand from the Hub file; the 120b differs only in
    # num_hidden_layers, num_local_experts and layer_types.
    config = json.loads((data / "gpt_oss_20b_config.json").read_text())
    config["num_hidden_layers"] = 36
    config["num_local_experts"] = 128
    config["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(36)]
    hf_json = lambda obj: json.dumps(obj, indent=2, sort_keys=True) + "\n"
    (data / "gpt_oss_120b_config.json").write_text(hf_json(config))
    generation = {"bos_token_id": 199998, "do_sample": True, "eos_token_id": [200002, 199999, 200012],
                  "pad_token_id": 199999, "transformers_version": "4.55.0.dev0"}
    (data / "gpt_oss_generation_config.json").write_text(hf_json(generation))


if __name__ == "__main__":
    main()
