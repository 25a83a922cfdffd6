#!/usr/bin/env python3
"""Tiny random GPT-OSS checkpoints and their Hugging Face float32 reference outputs.

For each model below this script
  1. draws random weights (BF16 for attention / router / norms / embeddings, MXFP4 experts in the
     checkpoint layout of ../shared/reference/gpt-oss.md §2.3: `*_blocks` [E, out, in/32, 16] U8
     with the low nibble first, `*_scales` [E, out, in/32] U8 E8M0, BF16 expert biases),
  2. writes a complete Hugging Face directory (config.json with quantization_config mxfp4,
     generation_config.json, model.safetensors) under tests/data/gpt_oss_golden/<name>/,
  3. loads it with transformers (CPU, dtype float32, attn_implementation="eager"; the MXFP4
     quantizer dequantizes the experts exactly on CPU), and records
       - `logits.npy`: float32 [T, vocab] logits of one forward pass over prompt + continuation,
       - `golden.json`: prompt ids, the 32-token greedy continuation (min_new_tokens=32, so no
         early stop), the smallest top-1/top-2 logit margin seen while decoding, versions.

Every model has more prompt tokens than its sliding window, at least two sliding and two full
layers, and at least 8 experts with top-4 routing (issue: GPT-OSS inference fidelity).

Usage: tools/.venv/bin/python tools/make_gpt_oss_golden.py   (versions pinned in requirements.txt)
"""
import json
import math
import os
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "gpt_oss_golden")

MODELS = [
    # name, seed, hidden, heads, kv heads, head_dim, layers, experts, top-k, intermediate,
    # window, vocab, prompt length, yarn factor
    dict(name="tiny_a", seed=11, hidden=64, heads=4, kv_heads=2, head_dim=16, layers=4, experts=8,
         top_k=4, intermediate=64, window=8, vocab=384, prompt=40, factor=32.0),
    dict(name="tiny_b", seed=22, hidden=96, heads=6, kv_heads=2, head_dim=32, layers=4, experts=12,
         top_k=4, intermediate=96, window=16, vocab=512, prompt=48, factor=8.0),
    dict(name="tiny_c", seed=33, hidden=64, heads=4, kv_heads=1, head_dim=64, layers=6, experts=8,
         top_k=4, intermediate=64, window=12, vocab=448, prompt=44, factor=32.0),
]
NEW_TOKENS = 32


def config_json(m):
    return {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "hidden_size": m["hidden"],
        "intermediate_size": m["intermediate"],
        "num_hidden_layers": m["layers"],
        "num_attention_heads": m["heads"],
        "num_key_value_heads": m["kv_heads"],
        "head_dim": m["head_dim"],
        "vocab_size": m["vocab"],
        "num_local_experts": m["experts"],
        "num_experts_per_tok": m["top_k"],
        "experts_per_token": m["top_k"],
        "sliding_window": m["window"],
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(m["layers"])],
        "rope_theta": 150000,
        "rope_scaling": {"rope_type": "yarn", "factor": m["factor"], "beta_fast": 32.0, "beta_slow": 1.0,
                         "original_max_position_embeddings": 4096, "truncate": False},
        "max_position_embeddings": int(4096 * m["factor"]),
        "initial_context_length": 4096,
        "swiglu_limit": 7.0,
        "rms_norm_eps": 1e-05,
        "attention_bias": True,
        "attention_dropout": 0.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "eos_token_id": m["vocab"] - 1,
        "pad_token_id": m["vocab"] - 2,
        "router_aux_loss_coef": 0.9,
        "output_router_logits": False,
        "initializer_range": 0.02,
        "use_cache": True,
        "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
    }


def mxfp4(gen, experts, rows, cols):
    """Random E2M1 codes and E8M0 scales; decoded weights have magnitudes around 2^-6..2^-4."""
    blocks = torch.randint(0, 256, (experts, rows, cols // 32, 16), generator=gen, dtype=torch.int32)
    scales = torch.randint(127 - 8, 127 - 5, (experts, rows, cols // 32), generator=gen, dtype=torch.int32)
    return blocks.to(torch.uint8), scales.to(torch.uint8)


def make_weights(m):
    gen = torch.Generator().manual_seed(m["seed"])
    H, D, E, I = m["hidden"], m["head_dim"], m["experts"], m["intermediate"]
    q_out, kv_out = m["heads"] * D, m["kv_heads"] * D

    def normal(*shape, std):
        return (torch.randn(*shape, generator=gen) * std).to(torch.bfloat16)

    def norm_weight():
        return (1.0 + 0.1 * torch.randn(H, generator=gen)).to(torch.bfloat16)

    w = {
        "model.embed_tokens.weight": normal(m["vocab"], H, std=1.0),
        "model.norm.weight": norm_weight(),
        "lm_head.weight": normal(m["vocab"], H, std=H ** -0.5),
    }
    for L in range(m["layers"]):
        p = f"model.layers.{L}."
        w[p + "input_layernorm.weight"] = norm_weight()
        w[p + "post_attention_layernorm.weight"] = norm_weight()
        w[p + "self_attn.q_proj.weight"] = normal(q_out, H, std=H ** -0.5)
        w[p + "self_attn.q_proj.bias"] = normal(q_out, std=0.1)
        w[p + "self_attn.k_proj.weight"] = normal(kv_out, H, std=H ** -0.5)
        w[p + "self_attn.k_proj.bias"] = normal(kv_out, std=0.1)
        w[p + "self_attn.v_proj.weight"] = normal(kv_out, H, std=H ** -0.5)
        w[p + "self_attn.v_proj.bias"] = normal(kv_out, std=0.1)
        w[p + "self_attn.o_proj.weight"] = normal(H, q_out, std=q_out ** -0.5 * 0.5)
        w[p + "self_attn.o_proj.bias"] = normal(H, std=0.05)
        # Sinks of both signs and sizeable magnitude so they visibly change the softmax.
        w[p + "self_attn.sinks"] = normal(m["heads"], std=2.0)
        w[p + "mlp.router.weight"] = normal(E, H, std=H ** -0.5 * 2.0)
        w[p + "mlp.router.bias"] = normal(E, std=0.2)
        gu_blocks, gu_scales = mxfp4(gen, E, 2 * I, H)
        w[p + "mlp.experts.gate_up_proj_blocks"] = gu_blocks
        w[p + "mlp.experts.gate_up_proj_scales"] = gu_scales
        w[p + "mlp.experts.gate_up_proj_bias"] = normal(E, 2 * I, std=0.5)
        dn_blocks, dn_scales = mxfp4(gen, E, H, I)
        w[p + "mlp.experts.down_proj_blocks"] = dn_blocks
        w[p + "mlp.experts.down_proj_scales"] = dn_scales
        w[p + "mlp.experts.down_proj_bias"] = normal(E, H, std=0.05)
    return w, gen


FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def decode_mxfp4(blocks, scales):
    """Independent decode per gpt-oss.md §2.3: [E, out, G, 16] codes -> [E, out, 32 G] floats."""
    lut = torch.tensor(FP4_VALUES, dtype=torch.float64)
    lo = lut[(blocks & 0x0F).long()]
    hi = lut[(blocks >> 4).long()]
    vals = torch.stack([lo, hi], dim=-1).reshape(*blocks.shape[:-1], 32)  # low nibble first
    vals = vals * torch.pow(2.0, scales.double() - 127.0)[..., None]
    return vals.reshape(blocks.shape[0], blocks.shape[1], -1)


def check_dequantized_experts(model, weights, m):
    """HF's experts hold W transposed ([E, in, out]); compare with our own decode bit for bit."""
    for L in range(m["layers"]):
        experts = model.model.layers[L].mlp.experts
        p = f"model.layers.{L}.mlp.experts."
        for name, param in (("gate_up_proj", experts.gate_up_proj), ("down_proj", experts.down_proj)):
            want = decode_mxfp4(weights[p + name + "_blocks"], weights[p + name + "_scales"])
            got = param.detach().double().transpose(1, 2)
            assert torch.equal(want, got), f"layer {L} {name}: HF dequantization differs from the reference decode"


def rms(x, w): return w * (x / torch.sqrt((x*x).mean(-1, keepdim=True) + 1e-5))
def yarn_inv_freq(dim, base, factor, L0, bf, bs):
    pos = base ** (torch.arange(0, dim, 2, dtype=torch.float64)/dim)
    extrap = 1/pos; interp = 1/(factor*pos)
    cd = lambda b: dim*math.log(L0/(b*2*math.pi))/(2*math.log(base))
    low, high = max(cd(bf),0), min(cd(bs), dim-1)
    if low == high: high += 0.001
    ramp = ((torch.arange(dim//2, dtype=torch.float64)-low)/(high-low)).clamp(0,1)
    # HF: inv_freq = interp*(1-extrap_factor)+extrap*extrap_factor with extrap_factor = 1-ramp
    return interp*ramp + extrap*(1-ramp), 0.1*math.log(factor)+1
def reference_forward(m, weights, ids):
    """Independent float64 forward pass written from gpt-oss.md §3 (no transformers code)."""
    W = {k: (v.double() if v.dtype == torch.bfloat16 else v) for k, v in weights.items()}
    T = ids.shape[0]; H=m['hidden']; D=m['head_dim']; nh=m['heads']; nkv=m['kv_heads']
    x = W['model.embed_tokens.weight'][ids]
    inv, att = yarn_inv_freq(D, 150000.0, m['factor'], 4096, 32.0, 1.0)
    ang = torch.arange(T, dtype=torch.float64)[:,None]*inv[None]
    cos, sin = torch.cos(ang)*att, torch.sin(ang)*att
    def rope(v):  # v [T, heads, D]
        a, b = v[..., :D//2], v[..., D//2:]
        c, s = cos[:,None], sin[:,None]
        return torch.cat([a*c-b*s, b*c+a*s], -1)
    for L in range(m['layers']):
        p=f'model.layers.{L}.'
        h = rms(x, W[p+'input_layernorm.weight'])
        q = (h@W[p+'self_attn.q_proj.weight'].T + W[p+'self_attn.q_proj.bias']).view(T,nh,D)
        k = (h@W[p+'self_attn.k_proj.weight'].T + W[p+'self_attn.k_proj.bias']).view(T,nkv,D)
        v = (h@W[p+'self_attn.v_proj.weight'].T + W[p+'self_attn.v_proj.bias']).view(T,nkv,D)
        q, k = rope(q), rope(k)
        out = torch.zeros(T, nh, D, dtype=torch.float64)
        for hh in range(nh):
            kv = hh // (nh//nkv)
            S = (q[:,hh] @ k[:,kv].T) / math.sqrt(D)
            qi = torch.arange(T)[:,None]; ki = torch.arange(T)[None]
            vis = ki <= qi
            if L % 2 == 0: vis &= ki > qi - m['window']
            S = S.masked_fill(~vis, float('-inf'))
            z = torch.cat([S, W[p+'self_attn.sinks'][hh].expand(T,1)], -1)
            P = torch.softmax(z, -1)[:, :-1]
            out[:,hh] = P @ v[:,kv]
        x = x + out.reshape(T,-1) @ W[p+'self_attn.o_proj.weight'].T + W[p+'self_attn.o_proj.bias']
        h = rms(x, W[p+'post_attention_layernorm.weight'])
        logits = h@W[p+'mlp.router.weight'].T + W[p+'mlp.router.bias']
        tv, ti = torch.topk(logits, m['top_k'], -1)
        tw = torch.softmax(tv, -1)
        gu_w = decode_mxfp4(weights[p+'mlp.experts.gate_up_proj_blocks'], weights[p+'mlp.experts.gate_up_proj_scales'])
        dn_w = decode_mxfp4(weights[p+'mlp.experts.down_proj_blocks'], weights[p+'mlp.experts.down_proj_scales'])
        moe = torch.zeros_like(x)
        for t in range(T):
            for j in range(m['top_k']):
                e = ti[t,j]
                gu = gu_w[e] @ h[t] + W[p+'mlp.experts.gate_up_proj_bias'][e]
                gt, up = gu[0::2].clamp(max=7.0), gu[1::2].clamp(-7.0, 7.0)
                a = gt*torch.sigmoid(1.702*gt)*(up+1)
                moe[t] += tw[t,j]*(dn_w[e] @ a + W[p+'mlp.experts.down_proj_bias'][e])
        x = x + moe
    return rms(x, W['model.norm.weight']) @ W['lm_head.weight'].T

def build(m):
    out_dir = os.path.join(OUT, m["name"])
    os.makedirs(out_dir, exist_ok=True)
    weights, gen = make_weights(m)
    save_file(weights, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config_json(m), f, indent=2)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [m["vocab"] - 1], "pad_token_id": m["vocab"] - 2, "do_sample": False}, f, indent=2)

    model = transformers.GptOssForCausalLM.from_pretrained(
        out_dir, dtype=torch.float32, attn_implementation="eager")
    # On CPU the MXFP4 quantizer dequantizes the experts to BF16 whatever dtype was asked for.
    # E2M1 values times powers of two are exact in BF16, so widening to FP32 loses nothing.
    model = model.float().eval()
    check_dequantized_experts(model, weights, m)

    prompt = torch.randint(0, m["vocab"], (1, m["prompt"]), generator=gen)
    # Greedy decoding by repeated full forward passes. transformers 4.57.1's generate() is not
    # used: with its sliding-window cache the prefill of a prompt longer than the window gives
    # logits that differ (by ~0.3 here) from the plain forward pass and from the independent
    # reference below, which agree with each other to ~1e-6.
    seq = prompt
    margins = []
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            last = model(seq, use_cache=False).logits[0, -1]
            top2 = torch.topk(last, 2).values
            margins.append(float(top2[0] - top2[1]))
            seq = torch.cat([seq, last.argmax().view(1, 1)], dim=1)
        logits = model(seq, use_cache=False).logits[0].float().numpy()
        greedy = logits[m["prompt"] - 1:-1].argmax(-1)
        assert (greedy == seq[0, m["prompt"]:].numpy()).all()
        ref = reference_forward(m, weights, seq[0]).numpy()
        ref_err = float(np.abs(ref - logits).max())
        assert ref_err <= 1e-5 * np.abs(ref).max(), f"HF and the independent reference differ by {ref_err}"

    np.save(os.path.join(out_dir, "logits.npy"), logits.astype(np.float32))
    golden = {
        "prompt_ids": prompt[0].tolist(),
        "greedy_ids": seq[0, m["prompt"]:].tolist(),
        "min_greedy_margin": min(margins),
        "max_abs_error_vs_float64_reference": ref_err,
        "max_abs_logit": float(np.abs(logits).max()),
        "generator": {"transformers": transformers.__version__, "torch": torch.__version__,
                      "dtype": "float32", "attn_implementation": "eager"},
        "spec": m,
    }
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    print(f"{m['name']}: T={seq.shape[1]} vocab={m['vocab']} max|logit|={golden['max_abs_logit']:.3f} "
          f"min greedy margin={golden['min_greedy_margin']:.4f} greedy={golden['greedy_ids'][:8]}...")
    # Tests allow 1e-4 * max|logit| of error; a margin below twice that could flip a greedy choice.
    if golden["min_greedy_margin"] < 2e-4 * golden["max_abs_logit"]:
        print(f"  warning: near-tie in greedy decoding; pick another seed", file=sys.stderr)


if __name__ == "__main__":
    torch.manual_seed(0)
    for m in MODELS:
        build(m)
