#!/usr/bin/env python3
"""Tiny random dense (and Qwen3-MoE, Gemma 2/3) checkpoints and their Hugging Face float32 reference outputs.

Spec: ../shared/reference/dense-decoders.md (§1 forward pass, §2 family differences, §3 RoPE,
§5 tensor names, §6 config loading rules, §9 offline test models); for Gemma
../shared/reference/families-2026.md ("Gemma 3", "Gemma 2") and transformers 4.57.1's
models/gemma3/modeling_gemma3.py and models/gemma2/modeling_gemma2.py.

For each model below this script
  1. writes a Hub-style config.json by hand (v4 spelling: `rope_theta`/`rope_scaling`,
     `torch_dtype`; qwen3_b in the transformers v5 spelling: `rope_parameters` with `rope_theta`
     inside, `dtype`). It is hand-written rather than `save_pretrained`'s dump so that it looks
     like the released files: no derived `layer_types`, and Qwen2's `sliding_window` survives
     even where `use_sliding_window` is false (the decoy of §2.3);
  2. builds the model with `AutoModelForCausalLM.from_config(cfg, dtype=torch.float32,
     attn_implementation="eager")` from the v4 form of that config, and replaces every parameter
     with seeded random values: embeddings N(0, 1) (std 0.25 when tied), linear weights N(0, 1/in) (lm_head x2,
     router x3), every RMSNorm weight (incl. q_norm/k_norm) 1 + 0.1 N(0, 1), every bias
     0.1 N(0, 1) (q/k/v) or 0.05 N(0, 1) (o, MLP) — HF init leaves norms at 1 and biases at 0,
     which would let a missing norm or bias pass. Gemma differs: its RMSNorm multiplies by (1 + w),
     so every Gemma norm weight w (incl. q/k, pre/post feed-forward norms) is 0.1 N(0, 1), the final
     norm's 3 + 0.1 N(0, 1) (19 + 0.1 N(0, 1) for gemma2_a) so that the logits are not tiny with
     the small tied embedding (N(0, 0.03^2), 0.05 for gemma2_a: larger ones make greedy repeat
     the input token); gemma2_a's q/k_proj are x3.5 in layers 2-3 so that attention scores reach
     the soft-cap (x3.5 in all four layers puts transformers' float32 error, which grows with
     the scores, above the 1e-5 bar of (a));
  3. rounds every tensor to the stored dtype (BF16, or F32 for llama_b, F16 for mistral_b) and
     loads exactly those values back into the float32 model, so the reference sees what is stored;
     writes model.safetensors (HF names of §5; no lm_head.weight when tied; Qwen3-MoE experts under
     the per-expert names `mlp.experts.{e}.{gate,up,down}_proj.weight`, as save_pretrained writes)
     and generation_config.json (bos/eos; eos a list for llama_a and qwen3_a);
  4. records, with transformers float32 eager on CPU:
       - `golden.json`: "prompt_ids" (random, longer than every sliding window), "greedy_ids" (32
         tokens from model.generate(do_sample=False, min_new_tokens=32, max_new_tokens=32)),
         "min_greedy_margin" (smallest top-1/top-2 logit gap over the 32 greedy steps), the
         derived layer types / sparse layers, versions, family and notes;
       - `logits.npy`: float32 [T, vocab] of ONE forward pass (use_cache=False) over prompt +
         greedy continuation;
  5. cross-checks: (a) an independent float64 forward pass written from the spec (below,
     `reference_forward`, which reads the config.json as written, i.e. also the v5 spelling and
     the sliding-window rules) agrees with transformers' logits to 1e-5 * max|logit|; (b) the
     greedy tokens of generate() (KV cache, sliding-window cache) equal the argmax of the
     single forward pass, and no greedy step picks an eos id; (c) for the v4 directories
     `from_pretrained(dir)` reproduces the logits exactly (so config.json + model.safetensors
     alone mean the same model to transformers); for qwen3_b the v5 config converted back to v4
     by `v5_to_v4` must equal the config the model was built from.

Models (V vocab, H hidden, nh/nkv heads, D head_dim, L layers, I intermediate, P prompt length;
T = P + 32 logit rows; every directory 241-354 KiB but gemma3_a's 759 KiB, about 4.2 MiB in all):
  llama_a     Llama, BF16, untied. V 256, H 64, 4/2 heads, D 16 (implicit), L 2, I 64, P 44.
              rope_scaling llama3 (factor 8, low 1, high 4, original_max_position_embeddings
              48 < T = 76), theta 5e5: frequency 0 kept, 1 blended, 2..7 divided by 8.
              eos a list in config.json and generation_config.json.
  llama_b     Llama, F32, tied. V 256, H 64, 4/1 heads, D 16 (explicit), L 2, I 32 < H, P 40.
              attention_bias (q/k/v/o biases) and mlp_bias (gate/up/down biases); theta 1e4, eps 1e-6.
  mistral_a   Mistral, BF16, untied. V 288, H 64, 4/2 heads, `head_dim: null` (-> 16), L 2, I 64,
              P 40. sliding_window 8 on every layer.
  mistral_b   Mistral, F16, untied. V 256, H 64, 4/1 heads, head_dim 32 != H/nh (q_proj 128 x 64),
              L 2, I 48, P 42. sliding_window null (full attention).
  qwen2_a     Qwen2, BF16, untied. V 256, H 64, 4/2 heads, D 16, L 3, I 32, P 40. q/k/v biases, no
              o bias; use_sliding_window true, sliding_window 8, max_window_layers 1: layer 0 full,
              layers 1-2 sliding.
  qwen2_b     Qwen2, BF16, tied. V 256, H 96, 6/2 heads, D 16, L 2, I 32, P 40. use_sliding_window
              false with sliding_window 16 and max_window_layers 1 present (the decoy: all full).
  qwen3_a     Qwen3, BF16, untied. V 256, H 64, 4/2 heads, head_dim 24 != H/nh 16, L 2, I 48, P 42.
              q/k norm; generation_config eos a list.
  qwen3_b     Qwen3, BF16, tied. V 256, H 96, 4/1 heads, head_dim 16 != H/nh 24, L 2, I 64, P 40.
              q/k norm; config.json in the v5 spelling (rope_parameters {rope_type, rope_theta}, dtype).
  qwen3_moe_a Qwen3-MoE, BF16, tied. V 256, H 64, 4/1 heads, head_dim 24, L 3, P 40. 8 experts,
              top-2, moe_intermediate 8, norm_topk_prob true, mlp_only_layers [1]: layers 0 and 2
              sparse, layer 1 a dense MLP (I 32).
  qwen3_moe_b Qwen3-MoE, BF16, untied. V 256, H 64, 2/1 heads, head_dim 24 < H/nh 32, L 3, P 40.
              10 experts, top-3, moe_intermediate 12, norm_topk_prob false (weights sum < 1),
              decoder_sparse_step 2: layer 1 sparse, layers 0 and 2 dense (I 32).
  gemma3_a    Gemma3ForCausalLM (gemma3_text), BF16, tied. V 256, H 80 (sqrt 80 is no bfloat16),
              4/2 heads, head_dim 32 != H/nh 20, query_pre_attn_scalar 24 != 32, L 6, I 96, P 40.
              config.json as gemma-3-1b-it's: sliding_window_pattern 6, no layer_types (5 sliding,
              layer 5 full), sliding_window 8; rope_theta 1e6 with rope_scaling linear x8 (full layer),
              rope_local_base_freq 1e4 unscaled (sliding layers); q/k norms; no soft-capping.
  gemma3_b    Gemma3ForCausalLM, F32, tied. V 300, H 48, 2/1 heads, head_dim 16 = query_pre_attn_scalar,
              L 3, I 64, P 42. explicit layer_types [full, sliding, full] beside a decoy
              "_sliding_window_pattern": 6 (as gemma-3-270m's config.json has both); rope_scaling null.
  gemma2_a    Gemma2ForCausalLM, BF16, tied. V 256, H 64, 4/2 heads, head_dim 16, query_pre_attn_scalar
              24, L 4 (sliding, full, sliding, full: derived), I 96, P 40, sliding_window 8;
              attn_logit_softcapping 50 and final_logit_softcapping 30, both biting (golden.json:
              max |pre-cap score| and |pre-cap logit| of the float64 reference, asserted >= cap / 2);
              no q/k norm; hidden_act and hidden_activation both present, as in gemma-2-2b's config.
  gemma3_mm   Gemma3ForConditionalGeneration (model_type gemma3), BF16, laid out as gemma-3-4b-it:
              text_config (gemma3_text) names only V 300, H 48, 2/1 heads, head_dim 16, L 7, I 64,
              rope_scaling linear x8, sliding_window 8, so the rest is Gemma3TextConfig's defaults
              (query_pre_attn_scalar 256, rope 1e6 / 1e4, eps 1e-6, tied, pattern 6: layer 5 full);
              a tiny siglip vision_config; model.safetensors with the language model under
              language_model.model.* and a tiny vision_tower.* / multi_modal_projector.* to ignore.
              The goldens are those of the Gemma3ForCausalLM built from text_config on those
              tensors; (c) loads the directory as Gemma3ForConditionalGeneration and gets the same
              logits, bit for bit, for the text-only input. P 40, prompt below the image ids 297-299.
Both MoE checkpoints use the per-expert names. golden.json also records, per model, how much the
float64 logits move when one switch is misread on purpose ("max_abs_logit_change_if_misread",
each asserted > 1% of max|logit|), the derived layer types, and for MoE the sparse layers and the
smallest gap between the k-th and (k+1)-th router probability ("min_router_topk_gap").
For Gemma golden.json also has "embed_scale" (sqrt(H) as transformers multiplies by it: cast to the
weights' compute dtype, float32 here — a bfloat16 run would use "embed_scale_if_run_in_bfloat16"),
the attention scale, rope theta and linear factor per layer, the soft-caps, the max |pre-cap|
attention score and logit, and "max_abs_logit_change_small_misreads" (not asserted: gelu erf
instead of tanh, the bfloat16-rounded embed scale).

Deterministic: every random draw comes from a per-model torch.Generator, torch runs on one
thread; running the script twice gives byte-identical files.

Usage: tools/.venv/bin/python tools/make_dense_golden.py [NAME ...]   (versions pinned in
requirements.txt; names restrict the run; DENSE_GOLDEN_OUT=dir writes elsewhere, e.g. to check
that a second run is byte-identical: `diff -r tests/data/dense_golden dir`). Takes ~15 s on CPU.
"""
import copy
import json
import math
import os
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

from golden_generation import check_reference, golden_fields, greedy_and_logits

assert transformers.__version__ == "4.57.1", transformers.__version__
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("DENSE_GOLDEN_OUT") or os.path.join(ROOT, "tests", "data", "dense_golden")
NEW_TOKENS = 32
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def base(arch, model_type, V, H, nh, nkv, L, I, eps, theta, tied, bos, eos, max_pos):
    return {
        "architectures": [arch],
        "model_type": model_type,
        "vocab_size": V,
        "hidden_size": H,
        "intermediate_size": I,
        "num_hidden_layers": L,
        "num_attention_heads": nh,
        "num_key_value_heads": nkv,
        "hidden_act": "silu",
        "max_position_embeddings": max_pos,
        "rms_norm_eps": eps,
        "rope_theta": theta,
        "tie_word_embeddings": tied,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "initializer_range": 0.02,
        "attention_dropout": 0.0,
        "use_cache": True,
    }


def llama_a():
    c = base("LlamaForCausalLM", "llama", 256, 64, 4, 2, 2, 64, 1e-5, 500000.0, False,
             252, [253, 254, 255], 4096)
    c.update({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 48},
              "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1})
    return dict(name="llama_a", family="llama", seed=1102, dtype="bfloat16", prompt=44, config=c,
                generation={"bos_token_id": 252, "eos_token_id": [253, 254, 255]},
                switches={"rope_scaling ignored": {"rope": None}},
                notes="GQA 4/2; untied; llama3 rope_scaling (factor 8, low 1, high 4, original_max_position_embeddings 48 < T); eos lists")


def llama_b():
    c = base("LlamaForCausalLM", "llama", 256, 64, 4, 1, 2, 32, 1e-6, 10000.0, True, 0, 1, 2048)
    c.update({"head_dim": 16, "rope_scaling": None, "attention_bias": True, "mlp_bias": True,
              "pretraining_tp": 1})
    return dict(name="llama_b", family="llama", seed=1203, dtype="float32", prompt=40, config=c,
                generation={"bos_token_id": 0, "eos_token_id": 1},
                switches={"no q/k/v bias": {"qkv_bias": False}, "no o bias": {"o_bias": False},
                          "no mlp bias": {"mlp_bias": False}},
                notes="F32 weights; tied embeddings; GQA 4/1; attention_bias (q/k/v/o) and mlp_bias (gate/up/down); intermediate < hidden; default rope theta 1e4")


def mistral_a():
    c = base("MistralForCausalLM", "mistral", 288, 64, 4, 2, 2, 64, 1e-5, 1000000.0, False, 1, 2, 4096)
    c.update({"head_dim": None, "sliding_window": 8})
    return dict(name="mistral_a", family="mistral", seed=2102, dtype="bfloat16", prompt=40, config=c,
                generation={"bos_token_id": 1, "eos_token_id": 2},
                switches={"sliding_window ignored": {"sliding": [False, False]}},
                notes="sliding_window 8 on every layer, prompt 40; head_dim null (= hidden/heads); GQA 4/2")


def mistral_b():
    c = base("MistralForCausalLM", "mistral", 256, 64, 4, 1, 2, 48, 1e-5, 1000000.0, False, 1, 2, 4096)
    c.update({"head_dim": 32, "sliding_window": None})
    return dict(name="mistral_b", family="mistral", seed=2203, dtype="float16", prompt=42, config=c,
                generation={"bos_token_id": 1, "eos_token_id": 2},
                notes="F16 weights; sliding_window null (full attention); head_dim 32 != hidden/heads 16; GQA 4/1")


def qwen2_a():
    c = base("Qwen2ForCausalLM", "qwen2", 256, 64, 4, 2, 3, 32, 1e-6, 1000000.0, False, 253, 254, 4096)
    c.update({"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1})
    return dict(name="qwen2_a", family="qwen2", seed=3101, dtype="bfloat16", prompt=40, config=c,
                generation={"bos_token_id": 253, "eos_token_id": 254},
                switches={"no sliding": {"sliding": [False] * 3}, "all layers sliding": {"sliding": [True] * 3},
                          "no q/k/v bias": {"qkv_bias": False}},
                notes="q/k/v biases, no o bias; use_sliding_window true, sliding_window 8, max_window_layers 1: layer 0 full, layers 1-2 sliding")


def qwen2_b():
    c = base("Qwen2ForCausalLM", "qwen2", 256, 96, 6, 2, 2, 32, 1e-6, 1000000.0, True, 253, 254, 4096)
    c.update({"use_sliding_window": False, "sliding_window": 16, "max_window_layers": 1})
    return dict(name="qwen2_b", family="qwen2", seed=3202, dtype="bfloat16", prompt=40, config=c,
                generation={"bos_token_id": 253, "eos_token_id": 254},
                switches={"decoy sliding_window honoured": {"sliding": [False, True]},
                          "no q/k/v bias": {"qkv_bias": False}},
                notes="tied; use_sliding_window false with sliding_window 16 and max_window_layers 1 present (decoy: all layers full attention); GQA 6/2")


def qwen3_a():
    c = base("Qwen3ForCausalLM", "qwen3", 256, 64, 4, 2, 2, 48, 1e-6, 1000000.0, False, 253, 254, 4096)
    c.update({"head_dim": 24, "rope_scaling": None, "attention_bias": False,
              "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2})
    return dict(name="qwen3_a", family="qwen3", seed=4101, dtype="bfloat16", prompt=42, config=c,
                generation={"bos_token_id": 253, "eos_token_id": [254, 253]},
                switches={"no q/k norm": {"qk_norm": False}},
                notes="q/k norm; head_dim 24 != hidden/heads 16; untied; generation eos a list")


def qwen3_b():
    c = base("Qwen3ForCausalLM", "qwen3", 256, 96, 4, 1, 2, 64, 1e-6, 1000000.0, True, 253, 254, 4096)
    c.update({"head_dim": 16, "rope_scaling": None, "attention_bias": False,
              "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2})
    return dict(name="qwen3_b", family="qwen3", seed=4202, dtype="bfloat16", prompt=40, config=c,
                config_style="v5", generation={"bos_token_id": 253, "eos_token_id": 254},
                switches={"rope_parameters.rope_theta ignored (10000)": {"theta": 10000.0},
                          "no q/k norm": {"qk_norm": False}},
                notes="q/k norm; head_dim 16 != hidden/heads 24; tied; GQA 4/1; config.json in the transformers v5 spelling (rope_parameters, dtype)")


def qwen3_moe_a():
    c = base("Qwen3MoeForCausalLM", "qwen3_moe", 256, 64, 4, 1, 3, 32, 1e-6, 1000000.0, True, 253, 254, 4096)
    c.update({"head_dim": 24, "rope_scaling": None, "attention_bias": False,
              "use_sliding_window": False, "sliding_window": None, "max_window_layers": 3,
              "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
              "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [1],
              "output_router_logits": False, "router_aux_loss_coef": 0.001})
    return dict(name="qwen3_moe_a", family="qwen3_moe", seed=5106, dtype="bfloat16", prompt=40, config=c,
                generation={"bos_token_id": 253, "eos_token_id": 254},
                switches={"norm_topk_prob false": {"norm_topk": False},
                          "no q/k norm": {"qk_norm": False}},
                notes="8 experts top-2, norm_topk_prob true, mlp_only_layers [1] (layers 0 and 2 sparse, 1 dense); q/k norm; head_dim 24 != 16; GQA 4/1; tied; per-expert tensor names")


def qwen3_moe_b():
    c = base("Qwen3MoeForCausalLM", "qwen3_moe", 256, 64, 2, 1, 3, 32, 1e-6, 1000000.0, False, 253, 254, 4096)
    c.update({"head_dim": 24, "rope_scaling": None, "attention_bias": False,
              "use_sliding_window": False, "sliding_window": None, "max_window_layers": 3,
              "num_experts": 10, "num_experts_per_tok": 3, "moe_intermediate_size": 12,
              "norm_topk_prob": False, "decoder_sparse_step": 2, "mlp_only_layers": [],
              "output_router_logits": False, "router_aux_loss_coef": 0.001})
    return dict(name="qwen3_moe_b", family="qwen3_moe", seed=5205, dtype="bfloat16", prompt=40, config=c,
                generation={"bos_token_id": 253, "eos_token_id": 254},
                switches={"norm_topk_prob true": {"norm_topk": True},
                          "top-2 instead of top-3": {"k": 2}},
                notes="10 experts top-3, norm_topk_prob false (weights sum < 1), decoder_sparse_step 2 (layer 1 sparse, 0 and 2 dense); head_dim 24 != hidden/heads 32; GQA 2/1; per-expert tensor names")


# Gemma (families-2026.md "Gemma 3", "Gemma 2"). Key order as in the Hub's config.json files (sorted).
# Gemma always ties lm_head to the embedding and the Hub files leave tie_word_embeddings out.

def gemma3_a():
    c = {"architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
         "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid",
         "eos_token_id": [1, 106], "final_logit_softcapping": None, "head_dim": 32,
         "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 80, "initializer_range": 0.02,
         "intermediate_size": 96, "max_position_embeddings": 32768, "model_type": "gemma3_text",
         "num_attention_heads": 4, "num_hidden_layers": 6, "num_key_value_heads": 2, "pad_token_id": 0,
         "query_pre_attn_scalar": 24, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0,
         "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "rope_theta": 1000000.0, "sliding_window": 8,
         "sliding_window_pattern": 6, "use_cache": True, "vocab_size": 256}
    return dict(name="gemma3_a", family="gemma3", seed=6101, dtype="bfloat16", prompt=40, config=c,
                embed_std=0.03, final_norm_offset=3.0, generation={"bos_token_id": 2, "eos_token_id": [1, 106]},
                switches={"attention scale head_dim**-0.5 (32) instead of query_pre_attn_scalar**-0.5 (24)": {"scale": 32 ** -0.5},
                          "norm weight w instead of (1 + w)": {"one_plus": False},
                          "no embedding scale": {"embed_scale": 1.0},
                          "rope_scaling (linear 8) ignored on the full layer": {"factors": [1.0] * 6},
                          "rope_scaling also applied on the sliding layers": {"factors": [8.0] * 6},
                          "sliding layers with rope_theta instead of rope_local_base_freq": {"thetas": [1e6] * 6},
                          "sliding_window ignored": {"sliding": [False] * 6},
                          "no q/k norm": {"qk_norm": False},
                          "no post_attention / post_feedforward norms": {"sandwich": False}},
                small_switches={"gelu (erf) instead of gelu_pytorch_tanh": {"gelu": "erf"},
                                "embed scale rounded to bfloat16 (8.9375)": {"embed_scale": 8.9375}},
                notes="Gemma3ForCausalLM; hidden 80 (sqrt 8.94427 is not a bfloat16: 8.9375); head_dim 32 != hidden/heads 20; "
                      "query_pre_attn_scalar 24 != head_dim; 6 layers from sliding_window_pattern 6 (5 sliding, layer 5 full), "
                      "window 8; global rope_theta 1e6 with linear x8, local base 1e4 unscaled; q/k norms; tied")


def gemma3_b():
    types = ["full_attention", "sliding_attention", "full_attention"]
    c = {"_sliding_window_pattern": 6, "architectures": ["Gemma3ForCausalLM"], "attention_bias": False,
         "attention_dropout": 0.0, "attn_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": 1,
         "final_logit_softcapping": None, "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh",
         "hidden_size": 48, "initializer_range": 0.02, "intermediate_size": 64, "layer_types": types,
         "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 2,
         "num_hidden_layers": 3, "num_key_value_heads": 1, "pad_token_id": 0, "query_pre_attn_scalar": 16,
         "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0, "rope_scaling": None, "rope_theta": 1000000.0,
         "sliding_window": 8, "use_bidirectional_attention": False, "use_cache": True, "vocab_size": 300}
    return dict(name="gemma3_b", family="gemma3", seed=6204, dtype="float32", prompt=42, config=c,
                embed_std=0.03, final_norm_offset=3.0, generation={"bos_token_id": 2, "eos_token_id": [1, 106]},
                switches={"layer_types ignored (_sliding_window_pattern 6: all sliding)": {"sliding": [True] * 3},
                          "norm weight w instead of (1 + w)": {"one_plus": False},
                          "sliding_window ignored": {"sliding": [False] * 3},
                          "sliding layer with rope_theta instead of rope_local_base_freq": {"thetas": [1e6] * 3},
                          "no q/k norm": {"qk_norm": False}},
                notes="F32 weights; explicit layer_types [full, sliding, full] beside a decoy _sliding_window_pattern 6 "
                      "(as gemma-3-270m's config.json writes both); rope_scaling null; head_dim 16 = query_pre_attn_scalar; "
                      "GQA 2/1; hidden 48; vocab 300; tied")


def gemma2_a():
    c = {"architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
         "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid",
         "eos_token_id": [1, 107], "final_logit_softcapping": 30.0, "head_dim": 16,
         "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 64,
         "initializer_range": 0.02, "intermediate_size": 96, "max_position_embeddings": 8192,
         "model_type": "gemma2", "num_attention_heads": 4, "num_hidden_layers": 4, "num_key_value_heads": 2,
         "pad_token_id": 0, "query_pre_attn_scalar": 24, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
         "sliding_window": 8, "use_cache": True, "vocab_size": 256}
    return dict(name="gemma2_a", family="gemma2", seed=7105, dtype="bfloat16", prompt=40, config=c,
                embed_std=0.05, qk_gain={2: 3.5, 3: 3.5}, final_norm_offset=19.0,
                generation={"bos_token_id": 2, "eos_token_id": [1, 107]},
                switches={"no attention soft-capping": {"attn_cap": None},
                          "no final logit soft-capping": {"final_cap": None},
                          "attention scale head_dim**-0.5 (16) instead of query_pre_attn_scalar**-0.5 (24)": {"scale": 0.25},
                          "sliding_window ignored": {"sliding": [False] * 4},
                          "layer types swapped (full first)": {"sliding": [False, True, False, True]},
                          "norm weight w instead of (1 + w)": {"one_plus": False},
                          "no post_attention / post_feedforward norms": {"sandwich": False}},
                small_switches={"gelu (erf) instead of gelu_pytorch_tanh": {"gelu": "erf"}},
                notes="Gemma2ForCausalLM; 4 layers alternating sliding/full (layer 0 sliding), window 8; attn_logit_softcapping 50 "
                      "and final_logit_softcapping 30, both biting (q/k_proj x3.5 in layers 2-3, final norm weight 19 + 0.1 N(0,1)); "
                      "query_pre_attn_scalar 24 != head_dim 16; no q/k norm; sandwich norms; tied")


def gemma3_mm():
    c = {"architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 297, "eoi_token_index": 298,
         "eos_token_id": [1, 106], "image_token_index": 299, "initializer_range": 0.02, "mm_tokens_per_image": 4,
         "model_type": "gemma3",
         "text_config": {"head_dim": 16, "hidden_size": 48, "intermediate_size": 64, "model_type": "gemma3_text",
                         "num_attention_heads": 2, "num_hidden_layers": 7, "num_key_value_heads": 1,
                         "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 8,
                         "vocab_size": 300},
         "vision_config": {"hidden_size": 16, "image_size": 16, "intermediate_size": 32,
                           "model_type": "siglip_vision_model", "num_attention_heads": 2, "num_hidden_layers": 1,
                           "patch_size": 4, "vision_use_head": False}}
    return dict(name="gemma3_mm", family="gemma3", seed=6307, dtype="bfloat16", prompt=40, config=c,
                embed_std=0.03, final_norm_offset=3.0, generation={"bos_token_id": 2, "eos_token_id": [1, 106]},
                switches={"query_pre_attn_scalar read as head_dim (16) instead of the default 256": {"scale": 0.25},
                          "rope_scaling (linear 8) ignored on the full layer": {"factors": [1.0] * 7},
                          "sliding_window ignored": {"sliding": [False] * 7},
                          "norm weight w instead of (1 + w)": {"one_plus": False}},
                small_switches={"embed scale rounded to bfloat16 (6.9375)": {"embed_scale": 6.9375}},
                notes="Gemma3ForConditionalGeneration layout (model_type gemma3) as google/gemma-3-4b-it: text_config names only "
                      "what differs from Gemma3TextConfig's defaults (so query_pre_attn_scalar 256 != head_dim 16, rope_theta 1e6, "
                      "rope_local_base_freq 1e4, eps 1e-6, tied, sliding_window_pattern 6: 7 layers, layer 5 full); "
                      "rope_scaling linear 8; language model under language_model.model.*, plus a tiny SigLIP vision_tower.* "
                      "and multi_modal_projector.* that a text engine ignores; goldens are the text model's")


MODELS = [llama_a(), llama_b(), mistral_a(), mistral_b(), qwen2_a(), qwen2_b(), qwen3_a(), qwen3_b(),
          qwen3_moe_a(), qwen3_moe_b(), gemma3_a(), gemma3_b(), gemma2_a(), gemma3_mm()]


# ----------------------------------------------------------------------------------------------
# config.json spellings (§3, §6)

def v4_to_v5(c, dtype):
    """transformers v5 spelling: rope_parameters with rope_theta inside, `dtype`."""
    out = {k: v for k, v in c.items() if k not in ("rope_theta", "rope_scaling")}
    rp = dict(c.get("rope_scaling") or {"rope_type": "default"})
    rp["rope_theta"] = c["rope_theta"]
    out["rope_parameters"] = rp
    out["dtype"] = dtype
    out["transformers_version"] = "5.0.0"
    return out


def v5_to_v4(c):
    out = {k: v for k, v in c.items() if k not in ("rope_parameters", "dtype", "transformers_version")}
    rp = dict(c["rope_parameters"])
    out["rope_theta"] = rp.pop("rope_theta")
    out["rope_scaling"] = None if rp.get("rope_type", "default") == "default" else rp
    return out


def disk_config(m):
    if m.get("config_style") == "v5":
        return v4_to_v5(m["config"], m["dtype"])
    c = dict(m["config"])
    c["torch_dtype"] = m["dtype"]
    c["transformers_version"] = transformers.__version__
    if m["family"] in GEMMA:  # the Hub's Gemma files list their keys sorted
        c = dict(sorted(c.items()))
    return c


GEMMA = ("gemma2", "gemma3")


def text_config(c):
    """The language model's config: Gemma3ForConditionalGeneration (model_type gemma3) nests it."""
    return c["text_config"] if c["model_type"] == "gemma3" else c


def is_tied(m):
    return text_config(m["config"]).get("tie_word_embeddings", m["family"] in GEMMA)


# ----------------------------------------------------------------------------------------------
# Weights

def make_weights(m, model):
    """Seeded replacement of every parameter, rounded to the stored dtype (see the docstring)."""
    gen = torch.Generator().manual_seed(m["seed"])
    tied = is_tied(m)
    gemma = m["family"] in GEMMA
    H = text_config(m["config"])["hidden_size"]
    sd = model.state_dict()
    store = DTYPES[m["dtype"]]
    w = {}
    for name in sorted(sd):
        if name == "lm_head.weight" and tied:
            continue
        shape = sd[name].shape
        n = torch.randn(*shape, generator=gen, dtype=torch.float32)
        if name.endswith("norm.weight") and gemma:  # Gemma norms multiply by (1 + w)
            t = 0.1 * n + (m.get("final_norm_offset", 0.0) if name == "model.norm.weight" else 0.0)
        elif name.endswith("norm.weight"):  # input/post_attention/final norms, q_norm, k_norm
            t = 1.0 + 0.1 * n
        elif name.endswith(".bias"):
            t = n * (0.1 if any(s in name for s in ("q_proj", "k_proj", "v_proj")) else 0.05)
        elif name == "model.embed_tokens.weight" and gemma:
            t = n * m["embed_std"]
        elif name == "model.embed_tokens.weight":  # tied: it is also lm_head, keep logits moderate
            t = n * (0.25 if tied else 1.0)
        elif name == "lm_head.weight":
            t = n * (2.0 / math.sqrt(H))
        elif name.endswith("mlp.gate.weight"):  # Qwen3-MoE router [E, H]
            t = n * (3.0 / math.sqrt(H))
        else:
            assert name.endswith(".weight") and len(shape) == 2, name
            t = n / math.sqrt(shape[1])
            if name.endswith(("q_proj.weight", "k_proj.weight")):  # gemma2_a: large scores, so that the soft-cap bites
                layer = int(name.split(".")[2])
                t = t * m.get("qk_gain", {}).get(layer, 1.0)
        w[name] = t.to(store).contiguous()
    return w, gen


def multimodal_checkpoint(m, text_weights, gen):
    """gemma3_mm: the tensors as google/gemma-3-4b-it's model.safetensors names them (the layout before
    transformers 4.52: language_model.model.*, vision_tower.*, multi_modal_projector.*; no lm_head, tied),
    with seeded values for the tiny SigLIP tower and projector, which a text engine must ignore."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration
    cfg = Gemma3Config(**{k: v for k, v in m["config"].items() if k != "model_type"})
    with torch.device("meta"):
        full = Gemma3ForConditionalGeneration(cfg)
    store = DTYPES[m["dtype"]]
    out = {"language_model." + k: v for k, v in text_weights.items()}
    for name, t in sorted(full.state_dict().items()):
        if name.startswith("model.language_model.") or name == "lm_head.weight":
            key = "language_model.model." + name[len("model.language_model."):] if name != "lm_head.weight" else None
            assert key is None or key in out, name
            continue
        assert name.startswith(("model.vision_tower.", "model.multi_modal_projector.")), name
        n = torch.randn(*t.shape, generator=gen, dtype=torch.float32)
        if name.endswith("mm_soft_emb_norm.weight"):  # a Gemma RMSNorm: 1 + w
            v = 0.1 * n
        elif name.endswith(("layer_norm1.weight", "layer_norm2.weight", "post_layernorm.weight")):
            v = 1.0 + 0.1 * n
        else:
            v = 0.05 * n
        out[name[len("model."):]] = v.to(store).contiguous()
    return out


def load_weights(model, w, tied):
    sd = {k: v.float() for k, v in w.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    assert missing == (["lm_head.weight"] if tied else []), missing
    if tied:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    for k, v in model.state_dict().items():  # the model holds exactly the stored values
        ref = w["model.embed_tokens.weight"] if (tied and k == "lm_head.weight") else w[k]
        assert torch.equal(v, ref.float()), k


# ----------------------------------------------------------------------------------------------
# Independent float64 reference, from dense-decoders.md §1-§3 and the config.json as written

def parse_config(c):
    """Everything the forward pass needs, by the loading rules of §2/§3/§6 (both spellings)."""
    mt = c["model_type"]
    H, nh, nkv, L = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["num_hidden_layers"]
    head_dim = c.get("head_dim")
    if head_dim is None:
        head_dim = 128 if mt == "qwen3" else H // nh
    if "rope_parameters" in c:
        rp = dict(c["rope_parameters"])
        theta = rp.pop("rope_theta")
        rope = None if rp.get("rope_type", "default") == "default" else rp
    else:
        theta = c["rope_theta"]
        rope = c.get("rope_scaling")
    if rope is not None:
        rope = dict(rope)
        rope.setdefault("rope_type", rope.get("type"))
    if mt == "mistral":
        sliding = [c.get("sliding_window") is not None] * L
    elif mt in ("qwen2", "qwen3"):
        sliding = [bool(c.get("use_sliding_window")) and i >= c["max_window_layers"] for i in range(L)]
    elif mt == "qwen3_moe":  # HF4: sliding_window (if enabled) applies to all layers
        sliding = [bool(c.get("use_sliding_window")) and c.get("sliding_window") is not None] * L
    else:
        sliding = [False] * L
    attn_bias = bool(c.get("attention_bias", False))
    p = dict(H=H, nh=nh, nkv=nkv, L=L, D=head_dim, theta=theta, rope=rope, eps=c["rms_norm_eps"],
             window=c.get("sliding_window"), sliding=sliding, tied=c["tie_word_embeddings"],
             qkv_bias=(mt == "qwen2") or (mt != "mistral" and attn_bias),
             o_bias=(mt not in ("qwen2", "mistral")) and attn_bias,
             mlp_bias=(mt == "llama") and bool(c.get("mlp_bias", False)),
             qk_norm=mt in ("qwen3", "qwen3_moe"), sparse=[False] * L)
    if mt == "qwen3_moe":
        E = c.get("num_experts", c.get("num_local_experts"))
        p.update(E=E, k=c["num_experts_per_tok"], norm_topk=bool(c["norm_topk_prob"]))
        p["sparse"] = [i not in (c.get("mlp_only_layers") or []) and E > 0
                       and (i + 1) % c["decoder_sparse_step"] == 0 for i in range(L)]
    return p


def inv_freq_ref(p):
    D = p["D"]
    inv = 1.0 / p["theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    r = p["rope"]
    if r is None:
        return inv
    assert r["rope_type"] == "llama3", r
    f, lo, hi, L0 = r["factor"], r["low_freq_factor"], r["high_freq_factor"], r["original_max_position_embeddings"]
    wl = 2 * math.pi / inv
    out = torch.where(wl > L0 / lo, inv / f, inv)
    smooth = (L0 / wl - lo) / (hi - lo)
    blend = (1 - smooth) * inv / f + smooth * inv
    mid = (wl >= L0 / hi) & (wl <= L0 / lo)
    return torch.where(mid, blend, out)


def reference_forward(c, weights, ids, override=None):
    """Returns (logits [T, V] float64, smallest router gap p_(k) - p_(k+1) or None).

    `override` replaces parsed settings (a deliberately wrong reading of the config, to show the
    golden depends on that switch)."""
    p = parse_config(c)
    p.update(override or {})
    W = {k: v.double() for k, v in weights.items()}
    T, H, D, nh, nkv, eps = ids.shape[0], p["H"], p["D"], p["nh"], p["nkv"], p["eps"]

    def rms(x, w):
        return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))

    def lin(x, name, bias):
        y = x @ W[name + ".weight"].T
        return y + W[name + ".bias"] if bias else y

    def mlp(x, pre, bias):
        return lin(torch.nn.functional.silu(lin(x, pre + "gate_proj", bias)) * lin(x, pre + "up_proj", bias),
                   pre + "down_proj", bias)

    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq_ref(p)[None]
    cos, sin = torch.cos(ang)[:, None], torch.sin(ang)[:, None]

    def rope(v):  # [T, heads, D], split-half
        a, b = v[..., :D // 2], v[..., D // 2:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)

    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None]
    router_gap = None
    x = W["model.embed_tokens.weight"][ids]
    for li in range(p["L"]):
        pre = f"model.layers.{li}."
        h = rms(x, W[pre + "input_layernorm.weight"])
        q = lin(h, pre + "self_attn.q_proj", p["qkv_bias"]).view(T, nh, D)
        k = lin(h, pre + "self_attn.k_proj", p["qkv_bias"]).view(T, nkv, D)
        v = lin(h, pre + "self_attn.v_proj", p["qkv_bias"]).view(T, nkv, D)
        if p["qk_norm"]:
            q = rms(q, W[pre + "self_attn.q_norm.weight"])
            k = rms(k, W[pre + "self_attn.k_norm.weight"])
        q, k = rope(q), rope(k)
        vis = ki <= qi
        if p["sliding"][li]:
            vis = vis & (ki > qi - p["window"])
        out = torch.empty(T, nh, D, dtype=torch.float64)
        for hh in range(nh):
            g = hh // (nh // nkv)
            s = (q[:, hh] @ k[:, g].T) / math.sqrt(D)
            out[:, hh] = torch.softmax(s.masked_fill(~vis, float("-inf")), -1) @ v[:, g]
        x = x + lin(out.reshape(T, nh * D), pre + "self_attn.o_proj", p["o_bias"])
        h = rms(x, W[pre + "post_attention_layernorm.weight"])
        if p["sparse"][li]:
            prob = torch.softmax(h @ W[pre + "mlp.gate.weight"].T, -1)  # over all E experts
            srt = torch.sort(prob, -1, descending=True).values
            gap = float((srt[:, p["k"] - 1] - srt[:, p["k"]]).min())
            router_gap = gap if router_gap is None else min(router_gap, gap)
            tw, ti = torch.topk(prob, p["k"], -1)
            if p["norm_topk"]:
                tw = tw / tw.sum(-1, keepdim=True)
            y = torch.zeros_like(x)
            for t in range(T):
                for j in range(p["k"]):
                    y[t] += tw[t, j] * mlp(h[t], pre + f"mlp.experts.{int(ti[t, j])}.", False)
            x = x + y
        else:
            x = x + mlp(h, pre + "mlp.", p["mlp_bias"])
    head = W["model.embed_tokens.weight"] if p["tied"] else W["lm_head.weight"]
    return rms(x, W["model.norm.weight"]) @ head.T, router_gap


# ----------------------------------------------------------------------------------------------
# Independent float64 Gemma 2 / Gemma 3 reference, from families-2026.md ("Gemma 3", "Gemma 2") and
# the config.json as written; keys a config leaves out take the config classes' defaults below.

GEMMA3_TEXT_DEFAULTS = {  # Gemma3TextConfig (transformers 4.57.1)
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6, "rope_theta": 1e6,
    "rope_local_base_freq": 1e4, "rope_scaling": None, "query_pre_attn_scalar": 256, "sliding_window": 4096,
    "layer_types": None, "final_logit_softcapping": None, "attn_logit_softcapping": None,
    "tie_word_embeddings": True, "attention_bias": False, "use_bidirectional_attention": False}
GEMMA2_DEFAULTS = {  # Gemma2Config (transformers 4.57.1)
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6, "rope_theta": 1e4,
    "rope_scaling": None, "query_pre_attn_scalar": 256, "sliding_window": 4096, "layer_types": None,
    "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0, "tie_word_embeddings": True,
    "attention_bias": False}


def parse_gemma_config(c):
    if c["model_type"] == "gemma3":  # Gemma3ForConditionalGeneration: the text model under text_config
        t, prefix = c["text_config"], "language_model.model."
    else:
        t, prefix = c, "model."
    gemma2 = t.get("model_type") == "gemma2"
    dflt = GEMMA2_DEFAULTS if gemma2 else GEMMA3_TEXT_DEFAULTS

    def g(k):  # an explicit null stays null
        return t[k] if k in t else dflt[k]

    L = t["num_hidden_layers"]
    types = g("layer_types")
    if types is None:
        # Gemma 2 alternates (layer 0 sliding); Gemma 3 reads the integer "sliding_window_pattern" (default
        # 6; the "_sliding_window_pattern" that newer files write beside layer_types is not read).
        period = 2 if gemma2 else t.get("sliding_window_pattern", 6)
        types = ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(L)]
    sliding = [x == "sliding_attention" for x in types]
    rope = g("rope_scaling")
    factor = 1.0
    if rope is not None:
        rt = rope.get("rope_type", rope.get("type"))
        assert rt in ("linear", "default"), rope
        factor = rope["factor"] if rt == "linear" else 1.0
    # Gemma 3: sliding layers rotate with rope_local_base_freq, unscaled; full layers with rope_theta and
    # rope_scaling. Gemma 2: one rope for all layers.
    local = not gemma2
    thetas = [g("rope_local_base_freq") if (local and s) else g("rope_theta") for s in sliding]
    factors = [1.0 if (local and s) else factor for s in sliding]
    assert g("hidden_activation") == "gelu_pytorch_tanh" and not g("attention_bias")
    assert gemma2 or not g("use_bidirectional_attention")
    H = t["hidden_size"]
    return dict(H=H, nh=t["num_attention_heads"], nkv=t["num_key_value_heads"], L=L, D=g("head_dim"),
                eps=g("rms_norm_eps"), window=g("sliding_window"), sliding=sliding, thetas=thetas, factors=factors,
                scale=g("query_pre_attn_scalar") ** -0.5, attn_cap=g("attn_logit_softcapping"),
                final_cap=g("final_logit_softcapping"), qk_norm=not gemma2, tied=g("tie_word_embeddings"),
                prefix=prefix, query_pre_attn_scalar=g("query_pre_attn_scalar"),
                # sqrt(hidden) held in the compute dtype (float32 here; bfloat16 when run in bfloat16)
                embed_scale=float(np.float32(math.sqrt(H))),
                one_plus=True, sandwich=True, gelu="tanh")


def gemma_reference_forward(c, weights, ids, override=None):
    """Returns (logits [T, V] float64, {"max_abs_pre_cap_attention_score", "max_abs_pre_cap_logit"})."""
    p = parse_gemma_config(c)
    p.update(override or {})
    W = {k: v.double() for k, v in weights.items()}
    T, D, nh, nkv, eps, pre0 = ids.shape[0], p["D"], p["nh"], p["nkv"], p["eps"], p["prefix"]

    def rms(x, w):  # Gemma: x / rms(x) * (1 + w)
        return (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)) * ((1.0 + w) if p["one_plus"] else w)

    def gelu(x):
        if p["gelu"] == "erf":
            return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    def cap(x, c):
        return x if c is None else c * torch.tanh(x / c)

    def rope(v, theta, factor):  # [T, heads, D], rotate-half
        inv = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D) / factor
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
        cos, sin = torch.cos(ang)[:, None], torch.sin(ang)[:, None]
        a, b = v[..., :D // 2], v[..., D // 2:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)

    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None]
    max_score = 0.0
    E = W[pre0 + "embed_tokens.weight"]
    x = E[ids] * p["embed_scale"]
    for li in range(p["L"]):
        pre = f"{pre0}layers.{li}."
        h = rms(x, W[pre + "input_layernorm.weight"])
        q = (h @ W[pre + "self_attn.q_proj.weight"].T).view(T, nh, D)
        k = (h @ W[pre + "self_attn.k_proj.weight"].T).view(T, nkv, D)
        v = (h @ W[pre + "self_attn.v_proj.weight"].T).view(T, nkv, D)
        if p["qk_norm"]:
            q = rms(q, W[pre + "self_attn.q_norm.weight"])
            k = rms(k, W[pre + "self_attn.k_norm.weight"])
        q, k = rope(q, p["thetas"][li], p["factors"][li]), rope(k, p["thetas"][li], p["factors"][li])
        vis = ki <= qi
        if p["sliding"][li]:
            vis = vis & (ki > qi - p["window"])
        out = torch.empty(T, nh, D, dtype=torch.float64)
        for hh in range(nh):
            g = hh // (nh // nkv)
            s = (q[:, hh] @ k[:, g].T) * p["scale"]
            max_score = max(max_score, float(s[vis].abs().max()))
            s = cap(s, p["attn_cap"])  # soft-cap, then the mask
            out[:, hh] = torch.softmax(s.masked_fill(~vis, float("-inf")), -1) @ v[:, g]
        a = out.reshape(T, nh * D) @ W[pre + "self_attn.o_proj.weight"].T
        x = x + (rms(a, W[pre + "post_attention_layernorm.weight"]) if p["sandwich"] else a)
        h = rms(x, W[pre + "pre_feedforward_layernorm.weight"])
        f = (gelu(h @ W[pre + "mlp.gate_proj.weight"].T) * (h @ W[pre + "mlp.up_proj.weight"].T)) @ W[pre + "mlp.down_proj.weight"].T
        x = x + (rms(f, W[pre + "post_feedforward_layernorm.weight"]) if p["sandwich"] else f)
    head = E if p["tied"] else W["lm_head.weight"]
    logits = rms(x, W[pre0 + "norm.weight"]) @ head.T
    stats = {"max_abs_pre_cap_attention_score": max_score, "max_abs_pre_cap_logit": float(logits.abs().max())}
    return cap(logits, p["final_cap"]), stats


# ----------------------------------------------------------------------------------------------

def hf_config(v4):
    kw = copy.deepcopy(v4)
    return AutoConfig.for_model(kw.pop("model_type"), **kw)


def eos_set(m):
    e = m["generation"]["eos_token_id"]
    return set(e if isinstance(e, list) else [e])


def build(m):
    out_dir = os.path.join(OUT, m["name"])
    os.makedirs(out_dir, exist_ok=True)
    gemma = m["family"] in GEMMA
    mm = m["config"]["model_type"] == "gemma3"
    disk = disk_config(m)
    v4 = v5_to_v4(disk) if m.get("config_style") == "v5" else m["config"]
    if m.get("config_style") == "v5":
        assert v4 == m["config"], "v5 config does not convert back to the build config"
    # gemma3_mm: the golden model is the Gemma3ForCausalLM of text_config (what a text engine runs)
    cfg = hf_config(dict(v4["text_config"], architectures=["Gemma3ForCausalLM"]) if mm else v4)
    torch.manual_seed(m["seed"])
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="eager").eval()
    assert type(model).__name__ == ("Gemma3ForCausalLM" if mm else m["config"]["architectures"][0])
    tied = is_tied(m)
    weights, gen = make_weights(m, model)
    load_weights(model, weights, tied)
    stored = multimodal_checkpoint(m, weights, gen) if mm else weights

    save_file(stored, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(disk, f, indent=2)
        f.write("\n")
    gcfg = dict(m["generation"], do_sample=False)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gcfg, f, indent=2)
        f.write("\n")

    V, P = text_config(m["config"])["vocab_size"], m["prompt"]
    # gemma3_mm: a text-only prompt, below the image ids (boi/eoi/image_token_index 297-299)
    image_ids = {m["config"][k] for k in ("boi_token_index", "eoi_token_index", "image_token_index")} if mm else set()
    prompt = torch.randint(0, min(image_ids | {V}), (1, P), generator=gen)
    eos = eos_set(m)
    forward = gemma_reference_forward if gemma else reference_forward
    with torch.no_grad():
        seq, greedy, logits, cache_err, margins = greedy_and_logits(model, prompt, NEW_TOKENS, eos, m["generation"]["bos_token_id"], m["name"])
        logits = logits.numpy()
        # (a) independent float64 reference from the config.json and the tensors as written
        ref, extra = forward(disk, stored, seq[0])
        router_gap = None if gemma else extra
        assert not (set(greedy.tolist()) & image_ids), f"{m['name']}: the continuation picks an image token"
        ref = ref.numpy()
        ref_err, scale = check_reference(ref, logits, m["name"])
        # Each switch the model is meant to exercise must visibly change the logits.
        sensitivity = {}
        for what, override in m.get("switches", {}).items():
            wrong, _ = forward(disk, stored, seq[0], override)
            sensitivity[what] = float(np.abs(wrong.numpy() - ref).max())
            assert sensitivity[what] > 1e-2 * scale, f"{m['name']}: '{what}' hardly matters ({sensitivity[what]})"
        small = {}  # recorded, not asserted: near-misses an engine could make
        for what, override in m.get("small_switches", {}).items():
            wrong, _ = forward(disk, stored, seq[0], override)
            small[what] = float(np.abs(wrong.numpy() - ref).max())
        # (c) the directory alone means the same model to transformers
        if m.get("config_style") != "v5":
            loaded, info = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager",
                                                                output_loading_info=True)
            loaded.eval()
            assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")), info
            assert type(loaded).__name__ == m["config"]["architectures"][0], type(loaded).__name__
            lcfg = loaded.config.text_config if mm else loaded.config
            for key in ("layer_types", "sliding_window", "head_dim", "norm_topk_prob", "mlp_only_layers",
                        "decoder_sparse_step", "use_sliding_window", "tie_word_embeddings", "query_pre_attn_scalar",
                        "rope_theta", "rope_scaling", "rope_local_base_freq", "attn_logit_softcapping",
                        "final_logit_softcapping", "rms_norm_eps"):
                assert getattr(lcfg, key, None) == getattr(model.config, key, None), key
            # text-only input; for gemma3_mm this is Gemma3ForConditionalGeneration on the 4b-style layout
            again = loaded(seq, use_cache=False).logits[0].float().numpy()
            assert np.array_equal(again, logits), \
                f"{m['name']}: from_pretrained gives other logits ({np.abs(again - logits).max()})"

    p = parse_gemma_config(disk) if gemma else parse_config(disk)
    hf_types = getattr(model.config, "layer_types", None)
    if hf_types is not None:
        assert hf_types == ["sliding_attention" if s else "full_attention" for s in p["sliding"]], hf_types
    if m["family"] == "qwen3_moe":
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock
        hf_sparse = [isinstance(layer.mlp, Qwen3MoeSparseMoeBlock) for layer in model.model.layers]
        assert hf_sparse == p["sparse"], hf_sparse
    if gemma:
        # the scale transformers multiplied by: sqrt(hidden) held in the weights' compute dtype (float32 here)
        hf_scale = (model.model.embed_tokens.embed_scale.to(model.model.embed_tokens.weight.dtype) if m["family"] == "gemma3"
                    else torch.tensor(cfg.hidden_size ** 0.5, dtype=torch.float32))
        assert float(hf_scale) == p["embed_scale"], (float(hf_scale), p["embed_scale"])
        for cap_key, stat in (("attn_cap", "max_abs_pre_cap_attention_score"), ("final_cap", "max_abs_pre_cap_logit")):
            if p[cap_key] is not None:
                assert extra[stat] >= 0.5 * p[cap_key], f"{m['name']}: the soft-cap does not bite ({stat} {extra[stat]})"

    np.save(os.path.join(out_dir, "logits.npy"), logits.astype(np.float32))
    golden = {
        **golden_fields(prompt, greedy, margins, ref_err, cache_err, logits),
        "family": m["family"],
        "architecture": m["config"]["architectures"][0],
        "weights_dtype": m["dtype"],
        "config_style": m.get("config_style", "v4"),
        "notes": m["notes"],
        "max_abs_logit_change_if_misread": sensitivity,
        "layer_types": ["sliding_attention" if s else "full_attention" for s in p["sliding"]],
        "head_dim": p["D"],
        "generator": {"transformers": transformers.__version__, "torch": torch.__version__,
                      "dtype": "float32", "attn_implementation": "eager",
                      "greedy": "model.generate(do_sample=False, min_new_tokens=32, max_new_tokens=32)",
                      "logits": "one forward pass over prompt + greedy_ids, use_cache=False"},
    }
    if m["family"] == "qwen3_moe":
        golden["sparse_layers"] = [i for i, s in enumerate(p["sparse"]) if s]
        golden["min_router_topk_gap"] = router_gap
    if gemma:
        golden["max_abs_logit_change_small_misreads"] = small
        golden["embed_scale"] = p["embed_scale"]
        golden["embed_scale_if_run_in_bfloat16"] = float(torch.tensor(math.sqrt(p["H"])).to(torch.bfloat16))
        golden["query_pre_attn_scalar"] = p["query_pre_attn_scalar"]
        golden["attention_scale"] = p["scale"]
        golden["rope_per_layer"] = [{"theta": th, "linear_factor": f} for th, f in zip(p["thetas"], p["factors"])]
        golden["sliding_window"] = p["window"]
        golden["attn_logit_softcapping"] = p["attn_cap"]
        golden["final_logit_softcapping"] = p["final_cap"]
        golden.update(extra)  # max |pre-cap attention score| (visible entries) and max |pre-cap logit|, float64 reference
        if mm:
            golden["text_model"] = "Gemma3ForCausalLM built from text_config with the language_model.model.* tensors"
            golden["tensor_prefix"] = "language_model.model."
            golden["ignored_tensors"] = sorted(k for k in stored if not k.startswith("language_model."))
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(out_dir, n)) for n in os.listdir(out_dir))
    print(f"{m['name']}: {m['dtype']} T={seq.shape[1]} V={V} {size / 1024:.0f} KiB max|logit|={golden['max_abs_logit']:.3f} "
          f"ref err={ref_err:.2e} cache err={cache_err:.2e} min margin={golden['min_greedy_margin']:.4f}"
          + (f" router gap={router_gap:.2e}" if router_gap is not None else "")
          + (" pre-cap score {max_abs_pre_cap_attention_score:.2f} logit {max_abs_pre_cap_logit:.2f}".format(**extra) if gemma else ""))
    # Tests allow ~1e-4 * max|logit|; a margin below twice that could flip a greedy choice.
    if golden["min_greedy_margin"] < max(1e-3, 2e-4 * golden["max_abs_logit"]):
        print("  warning: near-tie in greedy decoding; pick another seed", file=sys.stderr)
    return size


if __name__ == "__main__":
    only = set(sys.argv[1:])
    total = sum(build(m) for m in MODELS if not only or m["name"] in only)
    print(f"total {total / 1024:.0f} KiB")
