#!/usr/bin/env python3
"""Tiny random DeepSeek-V2/V3 (MLA + DeepSeekMoE) checkpoints and their Hugging Face float32 reference outputs.

Spec: ../shared/reference/deepseek.md (§1 config keys, §2 MLA forward, §3 YaRN/mscale numbers and
the V2 mscale² pitfall, §4 weight absorption, §5 routers, §6 tensor names, §7 FP8 block format,
§9 tiny models). Style and file format follow tools/make_dense_golden.py.

For each model below this script
  1. writes a config.json by hand, spelled like the released V2-Lite / V3 files (`rope_scaling`
     with `"type": "yarn"` and integer factor/beta where those files have integers, `scoring_func`,
     `topk_method`, `moe_layer_freq`, `seq_aux`, ... which HF partly ignores, `torch_dtype`);
  2. builds the model with `AutoModelForCausalLM.from_config(cfg, dtype=torch.float32,
     attn_implementation="eager")` and replaces every parameter with seeded random values:
     embeddings N(0, 1), linear weights N(0, 1/in) (lm_head x2, router x3), every RMSNorm weight
     (also q_a_layernorm and kv_a_layernorm) 1 + 0.1 N(0, 1), and the V3 router buffer
     `e_score_correction_bias` 0.1 N(0, 1) (HF leaves it at zero, which would hide it);
  3. rounds every tensor to the stored dtype (BF16, or F32 for v3_b; `e_score_correction_bias`
     always F32 as in the released V3 files) and loads exactly those values back into the float32
     model; v3_fp8 stores its linear weights as F8_E4M3 with float32 `weight_scale_inv` blocks
     (§7) and the model is given the dequantized values;
  4. records, with transformers float32 eager on CPU:
       - `golden.json`: "prompt_ids" (random, no bos/eos id), "greedy_ids" (32 tokens from
         model.generate(do_sample=False, min_new_tokens=32, max_new_tokens=32), KV cache),
         "min_greedy_margin", the HF attention `scaling` actually used, the rope attention
         factor and inv_freq, the MoE layers, the smallest router gap, versions and notes;
       - `logits.npy`: float32 [T, vocab] of ONE forward pass (use_cache=False) over prompt +
         greedy continuation;
  5. cross-checks (any failure raises): (a) an independent float64 forward pass written from
     deepseek.md (`reference_forward`: reads the config.json as written; MLA in the ABSORBED form
     of §4 — q̃_h = W_UK_hᵀ q_nope_h, scores over the latent [c ‖ k_pe], output W_UV_h (Σ p c) —
     interleaved RoPE on the pairs (2i, 2i+1), YaRN inv_freq/attention factor, both routers with
     group selection, shared experts, first_k_dense_replace) agrees with transformers to
     1e-5 * max|logit|; (b) the greedy tokens of generate() (KV cache) equal the argmax of the
     single forward pass, and no greedy step picks eos; (c) `from_pretrained(dir)` reproduces the
     logits exactly (v3_fp8: its dequantized twin, written to a temporary directory, since
     transformers 4.57.1 refuses FP8 checkpoints without a GPU); (d) every "switch" (a deliberate
     misreading of one feature, e.g. no mscale² or split-half RoPE) moves the float64 logits by
     more than 1% of max|logit|, so the golden really exercises it.

THE V2 mscale² PATCH (deepseek.md §3). transformers 4.57.1's DeepseekV2Attention sets
`self.scaling = qk_head_dim ** -0.5` and never multiplies in the YaRN mscale², which DeepSeek's
own code, llama.cpp and HF's DeepseekV3Attention do (fixed upstream in transformers PR #47435).
The engine applies it for V2 as well, so for the deepseek_v2 goldens this script patches the HF
reference: after building (and after from_pretrained) every DeepseekV2Attention gets
`scaling = qk_head_dim ** -0.5 * mscale**2`, mscale = 0.1 * mscale_all_dim * ln(factor) + 1, when
rope_scaling is set and mscale_all_dim is truthy (exactly DeepseekV3Attention.__init__); eager
attention reads `module.scaling` through the `scaling=self.scaling` argument. v2_b has no
rope_scaling, so there the patch is a no-op. For v2_a the script checks that the patch changes the
logits at positions >= 1 (and not at position 0, where softmax over one key is scale-free).

Models (V 256, hidden 64, 3 layers (layer 0 dense, I 96; layers 1-2 MoE), 4 heads, kv_lora 32,
qk_nope 16, qk_rope 8, v_head 16, 8 routed experts of 32, 1 shared, top-2, bos 0, eos 1):
  v2_a    deepseek_v2, BF16. q_lora null (q_proj); topk_method greedy, softmax scores,
          routed_scaling_factor 1.0, norm_topk_prob false; yarn factor 40, original 4096,
          beta 32/1, mscale = mscale_all_dim = 0.707 (V2-Lite's numbers): cos/sin factor 1,
          softmax scale 24^-0.5 * 1.2608² (patched, see above). Prompt 40.
  v2_b    deepseek_v2, BF16. q_lora 24; group_limited_greedy, n_group 2, topk_group 1 (max of
          group), routed_scaling_factor 1.5; no rope_scaling (default rope, scale 24^-0.5);
          rms_norm_eps 1e-5 while q_a_layernorm/kv_a_layernorm keep 1e-6: q_a_proj and the
          latent rows of kv_a_proj_with_mqa are drawn 300x smaller (latent mean square ~1e-5) so
          the two eps values give visibly different logits. Prompt 40.
  v3_a    deepseek_v3, BF16. q_lora 24; noaux_tc, n_group 2, topk_group 1 (sum of top-2 biased
          scores per group, excluded experts masked with 0.0 as HF does), norm_topk_prob true,
          routed_scaling_factor 2.5, correction bias 0.1 N(0,1); yarn factor 40 / 4096, mscale
          1.0/1.0 (V3's numbers). Prompt 40.
  v3_b    deepseek_v3, F32. q_lora null; n_group 1, norm_topk_prob false, scale 1.0; yarn factor
          2.0, original 16, mscale 1.0, mscale_all_dim 0.707: cos/sin carry 1.01936 and the ramp
          moves inside the 8-dim rotary. Prompt 40.
  v3_fp8  v3_a's config and random draws with quantization_config fp8 e4m3, weight_block_size
          [16, 16] (several blocks and partial edge blocks: kv_a_proj_with_mqa 40 rows, q_b_proj
          24 columns). Every Linear of attention, the dense MLP, the experts and the shared expert
          is F8_E4M3 [out, in] plus `weight_scale_inv` F32 [ceil(out/16), ceil(in/16)], quantized
          like DeepSeek's weight_quant (s = max|block| / 448, q = fp8(clamp(x / s, ±448))).
          The reference is transformers float32 on W = float32(q) * s[i//16, j//16] (a float32
          multiply) with quantization_config removed. Prompt 40.
  v3_long deepseek_v3, BF16. q_lora 24; n_group 1; yarn factor 4, original 32, beta 32/1, mscale
          1.0/1.0; prompt 48, so the 80 positions run past original_max_position_embeddings.

Sizes: 345 KiB (v3_fp8) to 945 KiB (v3_b, F32), about 3.2 MiB in all; the shape is the one of
deepseek.md §9 with vocab 256, most of it the 2 x 8 experts.
transformers 4.57.1 warns, harmlessly: V2's config wants float factor/beta_fast/beta_slow (the
released integer spelling is kept; V3's config casts them), and max_position_embeddings /
original_max_position_embeddings != factor ("Using the explicit factor", which the float64
reference confirms). For v3_a and v3_fp8 masking the excluded group with -inf instead of HF's 0.0
does not change the logits (recorded), so those goldens hold for either choice.

Deterministic: every random draw comes from a per-model torch.Generator, torch runs on one
thread; running the script twice gives byte-identical files.

Usage: tools/.venv/bin/python tools/make_deepseek_golden.py [NAME ...]   (versions pinned in
requirements.txt; names restrict the run; DEEPSEEK_GOLDEN_OUT=dir writes elsewhere, e.g. to check
that a second run is byte-identical: `diff -r tests/data/deepseek_golden dir`).
"""
import copy
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch
import transformers

from golden_generation import check_reference, golden_fields, greedy_and_logits
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM

assert transformers.__version__ == "4.57.1", transformers.__version__
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("DEEPSEEK_GOLDEN_OUT") or os.path.join(ROOT, "tests", "data", "deepseek_golden")
NEW_TOKENS = 32
BOS, EOS = 0, 1
FP8_BLOCK = 16
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def base(model_type, q_lora, eps=1e-6):
    """The common tiny shape (deepseek.md §9), keys in the order of the released files."""
    v2 = model_type == "deepseek_v2"
    return {
        "architectures": ["DeepseekV2ForCausalLM" if v2 else "DeepseekV3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "aux_loss_alpha": 0.001,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "first_k_dense_replace": 1,
        "hidden_act": "silu",
        "hidden_size": 64,
        "initializer_range": 0.02,
        "intermediate_size": 96,
        "kv_lora_rank": 32,
        "max_position_embeddings": 256,
        "model_type": model_type,
        "moe_intermediate_size": 32,
        "moe_layer_freq": 1,
        "n_group": 1,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "norm_topk_prob": False,
        "num_attention_heads": 4,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 3,
        "num_key_value_heads": 4,
        **({} if v2 else {"num_nextn_predict_layers": 0}),
        "pretraining_tp": 1,
        "q_lora_rank": q_lora,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 8,
        "rms_norm_eps": eps,
        "rope_scaling": None,
        "rope_theta": 10000,
        "routed_scaling_factor": 1.0,
        "scoring_func": "softmax" if v2 else "sigmoid",
        "seq_aux": True,
        "tie_word_embeddings": False,
        "topk_group": 1,
        "topk_method": "greedy" if v2 else "noaux_tc",
        "use_cache": True,
        "v_head_dim": 16,
        "vocab_size": 256,
    }


def yarn(factor, original, mscale, mscale_all_dim):
    return {"beta_fast": 32, "beta_slow": 1, "factor": factor, "mscale": mscale,
            "mscale_all_dim": mscale_all_dim, "original_max_position_embeddings": original,
            "type": "yarn"}


def v2_a():
    c = base("deepseek_v2", None)
    c.update(rope_scaling=yarn(40, 4096, 0.707, 0.707))
    return dict(name="v2_a", seed=7103, dtype="bfloat16", prompt=40, config=c,
                switches={"no mscale² (HF 4.57.1 V2 as shipped)": {"mscale2": False},
                          "split-half rope pairs (i, i+4)": {"rope_pairs": "half"},
                          "no rope_scaling (default rope)": {"rope": None}},
                notes="q_lora null (q_proj); greedy top-2 of softmax scores, routed_scaling_factor 1.0, "
                      "norm_topk_prob false; yarn factor 40 / original 4096 / mscale 0.707 = mscale_all_dim "
                      "(V2-Lite's numbers); softmax scale includes mscale² via the V2 patch")


def v2_b():
    c = base("deepseek_v2", 24, eps=1e-5)
    c.update(topk_method="group_limited_greedy", n_group=2, topk_group=1, routed_scaling_factor=1.5)
    return dict(name="v2_b", seed=7215, dtype="bfloat16", prompt=40, config=c, small_latent=True,
                switches={"latent norms use rms_norm_eps 1e-5": {"latent_eps": 1e-5},
                          "greedy instead of group_limited_greedy": {"topk_method": "greedy"},
                          "routed_scaling_factor ignored": {"route_scale": 1.0}},
                notes="q_lora 24; group_limited_greedy (n_group 2, topk_group 1, group score = max), "
                      "routed_scaling_factor 1.5; no rope_scaling; rms_norm_eps 1e-5 but q_a_layernorm/"
                      "kv_a_layernorm eps 1e-6 with latents of mean square ~1e-5 (q_a_proj and the latent "
                      "rows of kv_a_proj_with_mqa drawn 300x smaller)")


def v3_a(name="v3_a", fp8=False):
    c = base("deepseek_v3", 24)
    c.update(n_group=2, topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5,
             rope_scaling=yarn(40, 4096, 1.0, 1.0))
    m = dict(name=name, seed=7303, dtype="bfloat16", prompt=40, config=c,
             switches={"no mscale²": {"mscale2": False},
                       "correction bias ignored": {"use_bias": False},
                       "weights gathered from biased scores": {"biased_weights": True},
                       "norm_topk_prob ignored": {"norm_topk": False},
                       "split-half rope pairs (i, i+4)": {"rope_pairs": "half"}},
             info_switches={"excluded groups masked with -inf instead of 0.0": {"group_fill": float("-inf")}},
             notes="q_lora 24; noaux_tc with n_group 2 / topk_group 1 (group score = sum of top-2 biased "
                   "scores; excluded experts masked with 0.0 as HF 4.57.1 does), non-zero "
                   "e_score_correction_bias (choice only), norm_topk_prob true, routed_scaling_factor 2.5; "
                   "yarn factor 40 / original 4096 / mscale 1.0 = mscale_all_dim (V3's numbers)")
    if fp8:
        m["config"] = dict(c, quantization_config={"activation_scheme": "dynamic", "fmt": "e4m3",
                                                   "quant_method": "fp8",
                                                   "weight_block_size": [FP8_BLOCK, FP8_BLOCK]})
        m["fp8"] = True
        m["notes"] = ("v3_a's config and random draws, linear weights stored F8_E4M3 with F32 "
                      "weight_scale_inv blocks of 16x16 (edge blocks partial). REFERENCE USED DEQUANTIZED "
                      "WEIGHTS W[i,j] = float32(q[i,j]) * weight_scale_inv[i//16, j//16] (float32 multiply) "
                      "in a float32 DeepseekV3ForCausalLM without quantization_config. " + m["notes"])
    return m


def v3_b():
    c = base("deepseek_v3", None)
    c.update(rope_scaling=yarn(2.0, 16, 1.0, 0.707))
    return dict(name="v3_b", seed=7404, dtype="float32", prompt=40, config=c,
                switches={"cos/sin attention factor 1": {"attn_factor": 1.0},
                          "norm_topk_prob true": {"norm_topk": True},
                          "no rope_scaling (default rope)": {"rope": None}},
                notes="F32 weights; q_lora null; n_group 1, norm_topk_prob false, routed_scaling_factor 1.0; "
                      "yarn factor 2 / original 16 / mscale 1.0 / mscale_all_dim 0.707: cos and sin carry "
                      "the ratio factor and the ramp lies inside the 8-dim rotary")


def v3_long():
    c = base("deepseek_v3", 24)
    c.update(norm_topk_prob=True, routed_scaling_factor=2.5, rope_scaling=yarn(4.0, 32, 1.0, 1.0))
    return dict(name="v3_long", seed=7606, dtype="bfloat16", prompt=48, config=c,
                switches={"no rope_scaling (default rope)": {"rope": None},
                          "no mscale²": {"mscale2": False}},
                notes="q_lora 24; n_group 1, norm_topk_prob true, routed_scaling_factor 2.5; yarn factor 4 / "
                      "original 32 / mscale 1.0 = mscale_all_dim; prompt 48 + 32 = 80 positions > 32")


MODELS = [v2_a(), v2_b(), v3_a(), v3_b(), v3_a("v3_fp8", fp8=True), v3_long()]


# ----------------------------------------------------------------------------------------------
# Weights

def is_linear(name):
    """The Linear weights DeepSeek stores as FP8 (§7): attention, dense MLP, experts, shared."""
    return name.endswith("_proj.weight") or name.endswith("_proj_with_mqa.weight")


def fp8_quantize(x, B=FP8_BLOCK):
    """DeepSeek's weight_quant per [B, B] block: s = max|block| / 448, q = fp8(x / s)."""
    out, inn = x.shape
    q = torch.empty(out, inn, dtype=torch.float8_e4m3fn)
    s = torch.empty(-(-out // B), -(-inn // B), dtype=torch.float32)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            blk = x[i * B:(i + 1) * B, j * B:(j + 1) * B]
            s[i, j] = blk.abs().max() / 448.0
            q[i * B:(i + 1) * B, j * B:(j + 1) * B] = (blk / s[i, j]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q, s


def fp8_dequantize(q, s, B=FP8_BLOCK):
    """weight_dequant: W[i, j] = float32(q[i, j]) * s[i // B, j // B]."""
    full = s.repeat_interleave(B, 0).repeat_interleave(B, 1)[:q.shape[0], :q.shape[1]]
    return q.to(torch.float32) * full


def make_weights(m, model):
    """Seeded replacement of every parameter and buffer of the state dict (see the docstring).

    Returns (stored tensors as written to model.safetensors, float32 values the model gets, gen)."""
    gen = torch.Generator().manual_seed(m["seed"])
    c = m["config"]
    H, C = c["hidden_size"], c["kv_lora_rank"]
    sd = model.state_dict()
    store = DTYPES[m["dtype"]]
    stored, values = {}, {}
    for name in sorted(sd):
        shape = sd[name].shape
        n = torch.randn(*shape, generator=gen, dtype=torch.float32)
        if name.endswith("e_score_correction_bias"):  # V3 router buffer, F32 in the released files
            stored[name] = values[name] = (0.1 * n).contiguous()
            continue
        if name.endswith("norm.weight"):  # input/post_attention/final, q_a_layernorm, kv_a_layernorm
            t = 1.0 + 0.1 * n
        elif name == "model.embed_tokens.weight":
            t = n
        elif name == "lm_head.weight":
            t = n * (2.0 / math.sqrt(H))
        elif name.endswith("mlp.gate.weight"):  # router [E, H]
            t = n * (3.0 / math.sqrt(H))
        else:
            assert is_linear(name) and len(shape) == 2, name
            t = n / math.sqrt(shape[1])
            if m.get("small_latent"):  # latent mean square ~1e-5, so the latent norm eps matters
                if name.endswith("q_a_proj.weight"):
                    t = t / 300.0
                elif name.endswith("kv_a_proj_with_mqa.weight"):
                    t = torch.cat([t[:C] / 300.0, t[C:]])
        if m.get("fp8") and is_linear(name):
            q, s = fp8_quantize(t)
            stored[name], stored[name + "_scale_inv"] = q, s
            values[name] = fp8_dequantize(q, s)
        else:
            stored[name] = t.to(store).contiguous()
            values[name] = stored[name].float()
    return stored, values, gen


def load_weights(model, values):
    missing, unexpected = model.load_state_dict(values, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    for k, v in model.state_dict().items():  # the model holds exactly these values
        assert torch.equal(v, values[k]), k


def safetensors_dtypes(path):
    """{tensor name: dtype string} from the safetensors header."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}


# ----------------------------------------------------------------------------------------------
# Independent float64 reference, from deepseek.md §2-§5 and the config.json as written

def get_mscale(s, m=1.0):
    return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0


def parse_config(c):
    """Everything the forward pass needs (§1 loading rules; v4 or v5 rope spelling)."""
    if "rope_parameters" in c:
        rp = dict(c["rope_parameters"])
        theta = rp.pop("rope_theta")
        rope = None if rp.get("rope_type", rp.get("type", "default")) == "default" else rp
    else:
        theta, rope = c["rope_theta"], c.get("rope_scaling")
    if rope is not None:
        rope = dict(rope)
        rope.setdefault("rope_type", rope.get("type"))
        assert rope["rope_type"] == "yarn", rope
    v2 = c["model_type"] == "deepseek_v2"
    L, kd, freq = c["num_hidden_layers"], c["first_k_dense_replace"], c.get("moe_layer_freq", 1)
    return dict(
        v2=v2, H=c["hidden_size"], nh=c["num_attention_heads"], L=L, q_lora=c.get("q_lora_rank"),
        C=c["kv_lora_rank"], P=c["qk_nope_head_dim"], R=c["qk_rope_head_dim"], V=c["v_head_dim"],
        theta=float(theta), rope=rope, eps=c["rms_norm_eps"], latent_eps=1e-6,
        mscale2=True,  # V2 too: the engine's (and DeepSeek's) semantics, see the docstring
        rope_pairs="interleaved" if c.get("rope_interleave", True) else "half", attn_factor=None,
        E=c["n_routed_experts"], k=c["num_experts_per_tok"], n_group=c.get("n_group") or 1,
        topk_group=c.get("topk_group") or 1, route_scale=c["routed_scaling_factor"],
        # HF V2's gate ignores norm_topk_prob (§5); V3 is always sigmoid + noaux_tc
        norm_topk=(not v2) and bool(c["norm_topk_prob"]),
        topk_method=c.get("topk_method", "greedy") if v2 else "noaux_tc",
        use_bias=not v2, biased_weights=False, group_fill=0.0,
        moe=[i >= kd and i % freq == 0 for i in range(L)])


def rope_tables(p):
    """(inv_freq [R/2], cos/sin attention factor) in float64 (§3; rope.md §5)."""
    d, b, r = p["R"], p["theta"], p["rope"]
    pos_freq = b ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    if r is None:
        return 1.0 / pos_freq, 1.0
    s, L0 = float(r["factor"]), r["original_max_position_embeddings"]
    bf, bs = r.get("beta_fast") or 32, r.get("beta_slow") or 1

    def corr_dim(beta):
        return d * math.log(L0 / (beta * 2 * math.pi)) / (2 * math.log(b))

    low, high = max(math.floor(corr_dim(bf)), 0), min(math.ceil(corr_dim(bs)), d - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    inv = (1.0 / (s * pos_freq)) * ramp + (1.0 / pos_freq) * (1 - ramp)
    if r.get("attention_factor"):
        af = r["attention_factor"]
    elif r.get("mscale") and r.get("mscale_all_dim"):
        af = get_mscale(s, r["mscale"]) / get_mscale(s, r["mscale_all_dim"])
    else:
        af = get_mscale(s)
    return inv, af


def softmax_scale(p):
    """qk_head_dim^-0.5, times mscale² (mscale_all_dim) when rope_scaling is set (§2.6, §3)."""
    scale = (p["P"] + p["R"]) ** -0.5
    r = p["rope"]
    if p["mscale2"] and r is not None and r.get("mscale_all_dim"):
        scale *= get_mscale(float(r["factor"]), r["mscale_all_dim"]) ** 2
    return scale


def route(p, logits):
    """(expert ids [T, k], weights [T, k], smallest selection gap) for one MoE layer (§5)."""
    k, E, G, TG = p["k"], p["E"], p["n_group"], p["topk_group"]
    T = logits.shape[0]
    gaps = []
    if p["v2"]:
        scores = torch.softmax(logits, -1)
        choice = scores
        group = scores.view(T, G, E // G).max(-1).values
        grouped = p["topk_method"] == "group_limited_greedy"
    else:
        scores = torch.sigmoid(logits)
        choice = scores + (p["bias"] if p["use_bias"] else 0.0)
        group = choice.view(T, G, E // G).topk(2, -1).values.sum(-1)
        grouped = True
    if grouped and TG < G:
        srt = group.sort(-1, descending=True).values
        gaps.append(float((srt[:, TG - 1] - srt[:, TG]).min()))
        keep = torch.zeros(T, G, dtype=torch.bool)
        keep.scatter_(1, group.topk(TG, -1).indices, True)
        choice = choice.masked_fill(~keep.repeat_interleave(E // G, 1), p["group_fill"])
    srt = choice.sort(-1, descending=True).values
    gaps.append(float((srt[:, k - 1] - srt[:, k]).min()))
    idx = choice.topk(k, -1).indices
    w = (choice if p["biased_weights"] else scores).gather(1, idx)
    if p["norm_topk"]:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return idx, w * p["route_scale"], min(gaps)


def reference_forward(c, weights, ids, override=None):
    """Returns (logits [T, V] float64, smallest router selection gap).

    `override` replaces parsed settings (a deliberately wrong reading, to show the golden
    depends on it)."""
    p = parse_config(c)
    p.update(override or {})
    W = {k: v.double() for k, v in weights.items()}
    T, nh, C, P, R, V = ids.shape[0], p["nh"], p["C"], p["P"], p["R"], p["V"]

    def rms(x, w, eps):
        return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))

    def lin(x, name):
        return x @ W[name + ".weight"].T

    def mlp(x, pre):
        return lin(torch.nn.functional.silu(lin(x, pre + "gate_proj")) * lin(x, pre + "up_proj"), pre + "down_proj")

    inv, af = rope_tables(p)
    if p["attn_factor"] is not None:
        af = p["attn_factor"]
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
    cos, sin = torch.cos(ang) * af, torch.sin(ang) * af  # [T, R/2]

    def rope(x):  # [T, R] or [T, heads, R]; pairs (2i, 2i+1), or (i, i + R/2) when misread
        cs, sn = (cos, sin) if x.dim() == 2 else (cos[:, None], sin[:, None])
        if p["rope_pairs"] == "interleaved":
            a, b = x[..., 0::2], x[..., 1::2]
            return torch.stack([a * cs - b * sn, a * sn + b * cs], -1).flatten(-2)
        a, b = x[..., :R // 2], x[..., R // 2:]
        return torch.cat([a * cs - b * sn, a * sn + b * cs], -1)

    scale = softmax_scale(p)
    causal = torch.arange(T)[None, :] <= torch.arange(T)[:, None]  # [query, key]
    gap = math.inf
    x = W["model.embed_tokens.weight"][ids]
    for li in range(p["L"]):
        pre = f"model.layers.{li}."
        a = pre + "self_attn."
        h = rms(x, W[pre + "input_layernorm.weight"], p["eps"])
        if p["q_lora"] is None:
            q = lin(h, a + "q_proj")
        else:
            q = lin(rms(lin(h, a + "q_a_proj"), W[a + "q_a_layernorm.weight"], p["latent_eps"]), a + "q_b_proj")
        q = q.view(T, nh, P + R)
        q_nope, q_pe = q[..., :P], rope(q[..., P:])
        ckv = lin(h, a + "kv_a_proj_with_mqa")
        lat = rms(ckv[:, :C], W[a + "kv_a_layernorm.weight"], p["latent_eps"])  # c [T, C]
        k_pe = rope(ckv[:, C:])  # [T, R], shared by all heads, not normalized
        kvb = W[a + "kv_b_proj.weight"].view(nh, P + V, C)
        w_uk, w_uv = kvb[:, :P], kvb[:, P:]  # [nh, P, C], [nh, V, C]
        # Absorbed MLA (§4): attend over the latent [c ‖ k_pe], never forming per-head K or V.
        q_lat = torch.einsum("thp,hpc->thc", q_nope, w_uk)
        s = scale * (torch.einsum("thc,sc->hts", q_lat, lat) + torch.einsum("thr,sr->hts", q_pe, k_pe))
        prob = torch.softmax(s.masked_fill(~causal, float("-inf")), -1)
        o = torch.einsum("thc,hvc->thv", torch.einsum("hts,sc->thc", prob, lat), w_uv)
        x = x + lin(o.reshape(T, nh * V), a + "o_proj")
        h = rms(x, W[pre + "post_attention_layernorm.weight"], p["eps"])
        if p["moe"][li]:
            p["bias"] = W.get(pre + "mlp.gate.e_score_correction_bias")
            idx, w, g = route(p, h @ W[pre + "mlp.gate.weight"].T)
            gap = min(gap, g)
            y = torch.zeros_like(x)
            for e in range(p["E"]):
                tok, slot = (idx == e).nonzero(as_tuple=True)
                if len(tok):
                    y[tok] += w[tok, slot, None] * mlp(h[tok], pre + f"mlp.experts.{e}.")
            x = x + y + mlp(h, pre + "mlp.shared_experts.")
        else:
            x = x + mlp(h, pre + "mlp.")
    return rms(x, W["model.norm.weight"], p["eps"]) @ W["lm_head.weight"].T, gap


# ----------------------------------------------------------------------------------------------
# transformers side

def hf_config(c):
    kw = copy.deepcopy(c)
    kw.pop("quantization_config", None)  # v3_fp8: the in-memory model is the dequantized twin
    return AutoConfig.for_model(kw.pop("model_type"), **kw)


def attention_modules(model):
    return [layer.self_attn for layer in model.model.layers]


def patch_v2_scaling(model):
    """The V2 mscale² patch (see the docstring); returns (patched, unpatched) scaling."""
    cfg = model.config
    attn = attention_modules(model)
    unpatched = attn[0].scaling
    assert unpatched == attn[0].qk_head_dim ** -0.5, unpatched
    scaling = attn[0].qk_head_dim ** (-0.5)  # the statements of DeepseekV3Attention.__init__
    r = cfg.rope_scaling
    if r is not None and r.get("mscale_all_dim", 0):
        mscale = get_mscale(r["factor"], r["mscale_all_dim"])
        scaling = scaling * mscale * mscale
    for mod in attn:
        mod.scaling = scaling
    return scaling, unpatched


def disk_config(m):
    c = dict(m["config"])
    c["torch_dtype"] = m["dtype"]
    c["transformers_version"] = transformers.__version__
    return dict(sorted(c.items()))


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def load_hf(path, v2):
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager").eval()
    if v2:
        patch_v2_scaling(model)
    return model


def build(m):
    out_dir = os.path.join(OUT, m["name"])
    os.makedirs(out_dir, exist_ok=True)
    disk = disk_config(m)
    v2 = m["config"]["model_type"] == "deepseek_v2"
    cfg = hf_config(m["config"])
    torch.manual_seed(m["seed"])
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="eager").eval()
    assert type(model).__name__ == m["config"]["architectures"][0]
    stored, values, gen = make_weights(m, model)
    load_weights(model, values)
    scaling, unpatched = patch_v2_scaling(model) if v2 else (attention_modules(model)[0].scaling, None)
    assert all(a.scaling == scaling for a in attention_modules(model))

    st_path = os.path.join(out_dir, "model.safetensors")
    save_file(stored, st_path, metadata={"format": "pt"})
    write_json(os.path.join(out_dir, "config.json"), disk)
    write_json(os.path.join(out_dir, "generation_config.json"),
               {"bos_token_id": BOS, "eos_token_id": EOS, "do_sample": False})
    dtypes = safetensors_dtypes(st_path)
    back = load_file(st_path)
    for k, v in stored.items():  # round trip, byte for byte (FP8 included)
        assert back[k].dtype == v.dtype and torch.equal(back[k].view(torch.uint8), v.view(torch.uint8)), k

    V, P = m["config"]["vocab_size"], m["prompt"]
    prompt = torch.randint(2, V, (1, P), generator=gen)  # no bos (0) or eos (1) in the prompt
    with torch.no_grad():
        seq, greedy, logits, cache_err, margins = greedy_and_logits(model, prompt, NEW_TOKENS, {EOS}, BOS, m["name"])
        # the V2 patch must matter from position 1 on and not at position 0
        patch_effect = None
        if v2:
            for a in attention_modules(model):
                a.scaling = unpatched
            plain = model(seq, use_cache=False).logits[0].float()
            for a in attention_modules(model):
                a.scaling = scaling
            patch_effect = {"position_0": float((plain[0] - logits[0]).abs().max()),
                            "positions_ge_1": float((plain[1:] - logits[1:]).abs().max())}
            print(f"  {m['name']}: unpatched HF V2 vs patched: max|dlogit| position 0 = "
                  f"{patch_effect['position_0']:.3e}, positions >= 1 = {patch_effect['positions_ge_1']:.3e}")
            assert patch_effect["position_0"] <= 1e-5 * float(logits.abs().max())
            if m["config"]["rope_scaling"] is not None:
                assert patch_effect["positions_ge_1"] > 1e-2 * float(logits.abs().max()), patch_effect
            else:
                assert patch_effect["positions_ge_1"] == 0.0
        logits = logits.numpy()

        # (a) independent float64 reference (absorbed MLA) from the config.json as written
        ref, router_gap = reference_forward(disk, values, seq[0])
        ref = ref.numpy()
        ref_err, scale = check_reference(ref, logits, m["name"])
        p = parse_config(disk)
        inv_ref, af_ref = rope_tables(p)
        rot = model.model.rotary_emb
        hf_af = float(rot.attention_scaling)
        assert abs(hf_af - af_ref) <= 1e-6, (hf_af, af_ref)
        assert torch.allclose(rot.inv_freq.double(), inv_ref, rtol=1e-6, atol=0), (rot.inv_freq, inv_ref)
        assert abs(scaling - softmax_scale(p)) <= 1e-12 * scaling, (scaling, softmax_scale(p))
        hf_moe = [hasattr(layer.mlp, "experts") for layer in model.model.layers]
        assert hf_moe == p["moe"], hf_moe

        # (d) each switch the model is meant to exercise visibly changes the logits
        sensitivity = {}
        for what, override in list(m.get("switches", {}).items()) + list(m.get("info_switches", {}).items()):
            wrong, _ = reference_forward(disk, values, seq[0], override)
            sensitivity[what] = float(np.abs(wrong.numpy() - ref).max())
            if what in m.get("switches", {}):
                assert sensitivity[what] > 1e-2 * scale, f"{m['name']}: '{what}' hardly matters ({sensitivity[what]})"

        # (c) the directory alone means the same model to transformers
        fp8_note = None
        if m.get("fp8"):
            try:
                AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32)
                fp8_note = "from_pretrained of the FP8 directory worked on this machine"
            except Exception as e:  # expected on CPU: 'No GPU or XPU found ...'
                fp8_note = f"from_pretrained(FP8 dir) refused: {type(e).__name__}: {e}"
            print(f"  {m['name']}: {fp8_note}")
            with tempfile.TemporaryDirectory() as twin:
                tc = {k: v for k, v in disk.items() if k != "quantization_config"}
                tc["torch_dtype"] = "float32"
                write_json(os.path.join(twin, "config.json"), tc)
                save_file(values, os.path.join(twin, "model.safetensors"), metadata={"format": "pt"})
                again = load_hf(twin, v2)(seq, use_cache=False).logits[0].float().numpy()
        else:
            loaded = load_hf(out_dir, v2)
            for key in ("q_lora_rank", "kv_lora_rank", "n_group", "topk_group", "topk_method", "norm_topk_prob",
                        "routed_scaling_factor", "first_k_dense_replace", "rope_scaling", "rms_norm_eps"):
                assert getattr(loaded.config, key, None) == getattr(model.config, key, None), key
            again = loaded(seq, use_cache=False).logits[0].float().numpy()
        assert np.array_equal(again, logits), f"{m['name']}: from_pretrained gives other logits"

    np.save(os.path.join(out_dir, "logits.npy"), logits.astype(np.float32))
    golden = {
        **golden_fields(prompt, greedy, margins, ref_err, cache_err, logits),
        "model_type": m["config"]["model_type"],
        "architecture": m["config"]["architectures"][0],
        "weights_dtype": "float8_e4m3fn (linear) + bfloat16" if m.get("fp8") else m["dtype"],
        "notes": m["notes"],
        "hf_attention_scaling": scaling,
        "rope_attention_factor": hf_af,
        "rope_inv_freq": [float(f) for f in rot.inv_freq],
        "moe_layers": [i for i, s in enumerate(p["moe"]) if s],
        "min_router_topk_gap": router_gap,
        "max_abs_logit_change_if_misread": sensitivity,
        "safetensors_dtypes": sorted(set(dtypes.values())),
        "generator": {"transformers": transformers.__version__, "torch": torch.__version__,
                      "dtype": "float32", "attn_implementation": "eager",
                      "greedy": "model.generate(do_sample=False, min_new_tokens=32, max_new_tokens=32)",
                      "logits": "one forward pass over prompt + greedy_ids, use_cache=False"},
    }
    if v2:
        golden["hf_attention_scaling_unpatched_4_57_1"] = unpatched
        golden["v2_mscale2_patch"] = (
            "transformers 4.57.1 DeepseekV2Attention.scaling = qk_head_dim^-0.5 without the YaRN mscale^2; "
            "the reference was patched to qk_head_dim^-0.5 * (0.1*mscale_all_dim*ln(factor)+1)^2 like "
            "DeepseekV3Attention (transformers PR #47435); no-op without rope_scaling")
        golden["max_abs_logit_change_unpatched_vs_patched"] = patch_effect
    if m.get("fp8"):
        golden["reference_weights"] = ("dequantized: W[i,j] = float32(q[i,j]) * weight_scale_inv[i//16, j//16] "
                                       "(float32 multiply), quantization_config removed, float32 model")
        golden["fp8_block"] = [FP8_BLOCK, FP8_BLOCK]
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(out_dir, n)) for n in os.listdir(out_dir))
    print(f"{m['name']}: {golden['weights_dtype']} T={seq.shape[1]} {size / 1024:.0f} KiB "
          f"max|logit|={golden['max_abs_logit']:.3f} ref err={ref_err:.2e} cache err={cache_err:.2e} "
          f"min margin={golden['min_greedy_margin']:.4f} router gap={router_gap:.2e} scaling={scaling:.9g} "
          f"rope factor={hf_af:.9g}")
    for what, d in sensitivity.items():
        print(f"    misread '{what}': max|dlogit| {d:.3e}")
    # Tests allow ~1e-4 * max|logit|; a margin below twice that could flip a greedy choice.
    if golden["min_greedy_margin"] < max(1e-3, 2e-4 * golden["max_abs_logit"]):
        print("  warning: near-tie in greedy decoding; pick another seed", file=sys.stderr)
    if router_gap < 1e-4:
        print("  warning: near-tie in routing; pick another seed", file=sys.stderr)
    return size


if __name__ == "__main__":
    only = set(sys.argv[1:])
    total = sum(build(m) for m in MODELS if not only or m["name"] in only)
    print(f"total {total / 1024:.0f} KiB")
