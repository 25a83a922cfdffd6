"""Writes tests/data/rope/rope_golden.json: rotary-embedding goldens from transformers' own code.

For each config (at least three per rope type, plus the real gpt-oss-20b and DeepSeek-V3
settings) it records what transformers 4.57.1 computes:
  - inv_freq and the attention factor from ROPE_INIT_FUNCTIONS[rope_type] (for dynamic/longrope
    also at a sequence length past the original context, seq_len passed as a tensor as HF's
    dynamic_rope_update does);
  - cos/sin rows (first rotary_dim/2 columns; HF repeats them) for positions 0, 1, 7, 4095, 4096,
    131071, computed as the model rotary embeddings do (float32 inv_freq @ positions, cos/sin,
    times attention_scaling);
  - q and k rotated by apply_rotary_pos_emb (split-half; partial rotary rotates the first
    rotary_dim channels) or DeepSeek-V3's apply_rotary_pos_emb_interleave (un-permuted back to
    the interleaved layout tessera keeps);
  - for DeepSeek, the attention softmax scale of DeepseekV3Attention;
  - a sequence of calls through LlamaRotaryEmbedding with dynamic scaling (HF's stateful update).
Run: tools/.venv/bin/python tools/make_rope_golden.py
"""
import json
import math
import os
import types

import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds
from transformers.models.llama import modeling_llama as llama

assert transformers.__version__ == "4.57.1", transformers.__version__
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "rope", "rope_golden.json")
POSITIONS = [0, 1, 7, 4095, 4096, 131071]
ROTATE_POSITIONS = [7, 131071]
HEADS = 1


def f(xs):
    return [float("%.9g" % x) for x in xs]


def hf_config(cfg):
    """The attributes ROPE_INIT_FUNCTIONS reads, from a config.json dict."""
    ns = types.SimpleNamespace(**{k: v for k, v in cfg.items() if k not in ("rope_scaling",)})
    rs = dict(cfg.get("rope_scaling") or {})
    if "type" in rs and "rope_type" not in rs:
        rs["rope_type"] = rs["type"]
    ns.rope_scaling = rs or None
    if cfg.get("model_type") == "deepseek_v3":
        ns.head_dim = cfg["qk_rope_head_dim"]
    return ns


def cos_sin(inv_freq, scaling, positions):
    # As LlamaRotaryEmbedding.forward / DeepseekV3RotaryEmbedding.forward (float32).
    pos = torch.tensor([positions], dtype=torch.int64)
    inv = inv_freq[None, :, None].float().expand(1, -1, 1)
    freqs = (inv.float() @ pos[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * scaling, emb.sin() * scaling


def rotate(cfg, inv_freq, scaling, head_dim, rotary_dim, interleaved, gen):
    q = torch.randn(1, HEADS, len(ROTATE_POSITIONS), head_dim, generator=gen)
    k = torch.randn(1, 1, len(ROTATE_POSITIONS), head_dim, generator=gen)
    cos, sin = cos_sin(inv_freq, scaling, ROTATE_POSITIONS)
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    if interleaved:
        qe, ke = ds.apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin)
        half = rotary_dim // 2
        # HF leaves [a0 a1 ... | b0 b1 ...]; put each pair back at (2i, 2i + 1).
        unperm = lambda x: torch.stack((x[..., :half], x[..., half:]), dim=-1).reshape(x.shape)
        qe, ke = unperm(qe), unperm(ke)
    else:
        qe, ke = llama.apply_rotary_pos_emb(q_rot, k_rot, cos, sin)
    qe = torch.cat((qe, q_pass), dim=-1)
    ke = torch.cat((ke, k_pass), dim=-1)
    # [token, head, head_dim] row-major, as tessera lays q and k out.
    tok = lambda x: x[0].transpose(0, 1).reshape(-1).tolist()
    return {"q_in": f(tok(q)), "q_out": f(tok(qe)), "k_in": f(tok(k)), "k_out": f(tok(ke))}


def case(name, cfg, seq_lens=(None,), gen=None):
    hc = hf_config(cfg)
    rope_type = (hc.rope_scaling or {}).get("rope_type", "default")
    head_dim = hc.head_dim
    rotary_dim = int(head_dim * getattr(hc, "partial_rotary_factor", 1.0))
    interleaved = cfg.get("rope_interleave", cfg.get("model_type") == "deepseek_v3")
    out = {"name": name, "config": cfg, "rope_type": rope_type, "rotary_dim": rotary_dim,
           "interleaved": bool(interleaved), "frequencies": []}
    for seq_len in seq_lens:
        arg = None if seq_len is None else torch.tensor(seq_len)
        inv_freq, scaling = ROPE_INIT_FUNCTIONS[rope_type](hc, "cpu", seq_len=arg)
        assert inv_freq.dtype == torch.float32
        cos, sin = cos_sin(inv_freq, scaling, POSITIONS)
        half = rotary_dim // 2
        entry = {"seq_len": 0 if seq_len is None else seq_len, "inv_freq": f(inv_freq.tolist()),
                 "attention_factor": float(scaling), "positions": POSITIONS,
                 "cos": [f(r[:half]) for r in cos[0].tolist()], "sin": [f(r[:half]) for r in sin[0].tolist()]}
        entry.update(rotate(cfg, inv_freq, scaling, head_dim, rotary_dim, interleaved, gen))
        out["frequencies"].append(entry)
    if cfg.get("model_type") == "deepseek_v3":
        dcfg = transformers.DeepseekV3Config(**{k: v for k, v in cfg.items() if k != "model_type"})
        out["attention_scale"] = ds.DeepseekV3Attention(dcfg, 0).scaling
    else:
        out["attention_scale"] = head_dim ** -0.5
    return out


def base(**kw):
    cfg = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
           "num_hidden_layers": 1, "intermediate_size": 256, "vocab_size": 256,
           "max_position_embeddings": 4096, "rope_theta": 10000.0, "head_dim": 64}
    cfg.update(kw)
    return cfg


def dynamic_sequence():
    cfg = llama.LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=64, max_position_embeddings=4096,
                            rope_theta=10000.0, rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    emb = llama.LlamaRotaryEmbedding(cfg)
    x = torch.zeros(1)
    steps = []
    for seq_len in [10, 5000, 3000, 4096, 9000, 6000, 100, 4097]:
        emb(x, torch.arange(seq_len)[None, :])
        steps.append({"seq_len": seq_len, "inv_freq": f(emb.inv_freq.tolist())})
    return {"config": base(rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "steps": steps}


def main():
    gen = torch.Generator().manual_seed(1234)
    with open(os.path.join(ROOT, "tests", "data", "gpt_oss_20b_config.json")) as fh:
        gpt_oss = json.load(fh)
    deepseek_v3 = {
        "model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128,
        "num_hidden_layers": 61, "intermediate_size": 18432, "vocab_size": 129280,
        "max_position_embeddings": 163840, "rope_theta": 10000, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
        "v_head_dim": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                         "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}}
    ds_small = dict(deepseek_v3, hidden_size=256, num_attention_heads=4, num_key_value_heads=4, qk_rope_head_dim=32,
                    qk_nope_head_dim=16,
                    rope_scaling={"type": "yarn", "factor": 8, "mscale": 0.707, "mscale_all_dim": 0.5,
                                  "original_max_position_embeddings": 2048})
    ds_plain = dict(deepseek_v3, qk_rope_head_dim=16, qk_nope_head_dim=48, rope_interleave=False, rope_theta=50000,
                    rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096,
                                  "beta_fast": 16, "beta_slow": 2})
    long_short = [1.0 + 0.05 * i for i in range(16)]
    long_long = [1.0 + 0.9 * i for i in range(16)]
    cases = [
        case("default_llama2", base(), gen=gen),
        case("default_theta500k_dim128", base(head_dim=128, rope_theta=500000.0), gen=gen),
        case("default_partial_neox", base(head_dim=80, partial_rotary_factor=0.4), gen=gen),
        case("default_interleaved", base(head_dim=32, rope_interleave=True), gen=gen),
        case("linear_f2", base(rope_scaling={"rope_type": "linear", "factor": 2.0}), gen=gen),
        case("linear_f4_dim128", base(head_dim=128, rope_scaling={"rope_type": "linear", "factor": 4.0}), gen=gen),
        case("linear_f1p5_partial", base(head_dim=96, partial_rotary_factor=0.5, rope_theta=25000.0,
                                         rope_scaling={"rope_type": "linear", "factor": 1.5}), gen=gen),
        case("dynamic_f2_dim128", base(head_dim=128, rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
             seq_lens=(None, 8192, 131072), gen=gen),
        case("dynamic_f4", base(rope_scaling={"rope_type": "dynamic", "factor": 4.0}), seq_lens=(None, 5000), gen=gen),
        case("dynamic_f1p7_mpe3000", base(max_position_embeddings=3000, head_dim=32,
                                          rope_scaling={"rope_type": "dynamic", "factor": 1.7}),
             seq_lens=(None, 3001, 100000), gen=gen),
        case("yarn_gpt_oss_20b", gpt_oss, gen=gen),
        case("yarn_qwen_f4_truncate", base(head_dim=128, rope_theta=1000000.0,
                                          rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                        "original_max_position_embeddings": 32768}), gen=gen),
        case("yarn_attention_factor", base(rope_scaling={"rope_type": "yarn", "factor": 16.0, "beta_fast": 64.0,
                                                         "beta_slow": 2.0, "attention_factor": 0.8,
                                                         "original_max_position_embeddings": 2048}), gen=gen),
        case("yarn_mscale_pair", base(head_dim=48, rope_scaling={"rope_type": "yarn", "factor": 8.0, "mscale": 1.2,
                                                                "mscale_all_dim": 0.6, "truncate": False,
                                                                "original_max_position_embeddings": 1024}), gen=gen),
        case("deepseek_v3", deepseek_v3, gen=gen),
        case("deepseek_small_mscale", ds_small, gen=gen),
        case("deepseek_split_no_mscale", ds_plain, gen=gen),
        case("llama3_1_8b", base(head_dim=128, rope_theta=500000.0, max_position_embeddings=131072,
                                 rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
             gen=gen),
        case("llama3_2_f32", base(head_dim=64, rope_theta=500000.0,
                                  rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
             gen=gen),
        case("llama3_custom", base(head_dim=64, rope_theta=100000.0,
                                   rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 2.0,
                                                 "high_freq_factor": 8.0, "original_max_position_embeddings": 2048}),
             gen=gen),
        case("longrope_phi3_style", base(head_dim=32, max_position_embeddings=131072,
                                         original_max_position_embeddings=4096,
                                         rope_scaling={"rope_type": "longrope", "short_factor": long_short,
                                                       "long_factor": long_long}),
             seq_lens=(None, 4097), gen=gen),
        case("longrope_factor_attention", base(head_dim=32, rope_scaling={"rope_type": "longrope", "factor": 8.0,
                                                                          "short_factor": long_short,
                                                                          "long_factor": long_long}),
             seq_lens=(None, 5000), gen=gen),
        case("longrope_partial_af", base(head_dim=64, partial_rotary_factor=0.5, max_position_embeddings=16384,
                                         original_max_position_embeddings=2048,
                                         rope_scaling={"rope_type": "longrope", "attention_factor": 1.1,
                                                       "short_factor": long_short[::-1],
                                                       "long_factor": long_long[::-1]}),
             seq_lens=(None, 2049), gen=gen),
    ]
    golden = {"transformers": transformers.__version__, "torch": torch.__version__, "cases": cases,
              "dynamic_sequence": dynamic_sequence()}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as fh:
        json.dump(golden, fh, separators=(",", ":"))
    print(OUT, os.path.getsize(OUT), "bytes,", len(cases), "cases")


if __name__ == "__main__":
    main()
