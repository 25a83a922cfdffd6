#!/usr/bin/env python3
"""Tiny random dense (and Qwen3-MoE, Gemma 2/3, Phi-3, SmolLM3, GLM-4.5 MoE) checkpoints and their Hugging
Face float32 reference outputs.

Spec: ../shared/reference/dense-decoders.md (§1 forward pass, §2 family differences, §3 RoPE,
§5 tensor names, §6 config loading rules, §9 offline test models); for Gemma
../shared/reference/families-2026.md ("Gemma 3", "Gemma 2") and transformers 4.57.1's
models/gemma3/modeling_gemma3.py and models/gemma2/modeling_gemma2.py; for Phi-3, SmolLM3 and GLM-4.5
families-2026.md ("Phi-3 / Phi-3.5 / Phi-4-mini", "SmolLM2 / SmolLM3", "GLM-4.5 / 4.5-Air"),
../shared/reference/rope.md (partial rotary) and transformers 4.57.1's models/phi3, models/smollm3,
models/glm4_moe and modeling_rope_utils.py (`_compute_longrope_parameters`, `dynamic_rope_update`).

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
     which would let a missing norm or bias pass; GLM-4.5's router buffer `e_score_correction_bias` is
     0.1 N(0, 1) (HF leaves it at zero, which would hide it). Gemma differs: its RMSNorm multiplies by (1 + w),
     so every Gemma norm weight w (incl. q/k, pre/post feed-forward norms) is 0.1 N(0, 1), the final
     norm's 3 + 0.1 N(0, 1) (19 + 0.1 N(0, 1) for gemma2_a) so that the logits are not tiny with
     the small tied embedding (N(0, 0.03^2), 0.05 for gemma2_a: larger ones make greedy repeat
     the input token); gemma2_a's q/k_proj are x3.5 in layers 2-3 so that attention scores reach
     the soft-cap (x3.5 in all four layers puts transformers' float32 error, which grows with
     the scores, above the 1e-5 bar of (a));
  3. rounds every tensor to the stored dtype (BF16, or F32 for llama_b, phi3_b and gemma3_b, F16 for
     mistral_b; `e_score_correction_bias` always F32 as in the released GLM-4.5 files) and
     loads exactly those values back into the float32 model, so the reference sees what is stored;
     writes model.safetensors (HF names of §5; no lm_head.weight when tied; Qwen3-MoE experts under
     the per-expert names `mlp.experts.{e}.{gate,up,down}_proj.weight`, as save_pretrained writes;
     glm4_moe_b also the MTP layer model.layers.2.* that GLM-4.5's files carry, see `mtp_tensors`)
     and generation_config.json (bos/eos; eos a list for llama_a and qwen3_a; a null bos left out);
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
     alone mean the same model to transformers; the only unexpected keys allowed are glm4_moe_b's
     MTP layer, which transformers 4.57.1 reports as unused because its Glm4MoeModel skips only
     model.layers.46.* and model.layers.92.* silently); for qwen3_b the v5 config converted back to v4
     by `v5_to_v4` must equal the config the model was built from. For Phi-3 / SmolLM3 / GLM-4.5 the
     modules transformers built are checked against the parsed config too: rotary width, longrope
     attention factor and the inverse frequencies the forward call used, biases, q/k norms, NoPE
     layers, MoE layers.

Models (V vocab, H hidden, nh/nkv heads, D head_dim, L layers, I intermediate, P prompt length;
T = P + 32 logit rows; every directory 239-354 KiB but gemma3_a's 759 KiB, about 5.8 MiB in all):
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
  phi3_a      Phi3ForCausalLM, BF16, untied, laid out as Phi-4-mini-instruct. V 256, H 64, 4/2 heads, D 16,
              L 2, I 64, P 40. fused qkv_proj [128, 64] (rows q 64 | k 32 | v 32) and gate_up_proj [128, 64]
              (rows gate | up); partial_rotary_factor 0.75: the first 12 channels of each head rotate
              (split-half pairs (i, i + 6)), 4 pass; rope_scaling {"type": "longrope", 6 short_factor,
              6 long_factor} with original_max_position_embeddings 32 < P = 40 and max_position_embeddings
              512: every forward call (prefill and each decode step) has max position + 1 > 32 and uses
              the long factors, inv_freq = 1 / (long_factor * 1e4^(2i/12)); cos and sin x
              sqrt(1 + ln(512/32) / ln 32) = 1.3416; Phi-4-mini's keys transformers does not read
              (attention_bias, mlp_bias, lm_head_bias, full_attn_mod, interpolate_factor, embd_pdrop,
              resid_pdrop) written as that file has them; sliding_window null.
  phi3_b      Phi3ForCausalLM, F32, tied (as Phi-4-mini). V 256, H 48, 6/2 heads, D 8, L 2, I 64, P 40.
              qkv_proj [80, 48]; no partial_rotary_factor key (1.0); rope_scaling null; rms_norm_eps
              1e-5; sliding_window 16 (Phi-3-mini-4k's config has 2047, which transformers applies).
  smollm3_a   SmolLM3ForCausalLM, BF16, tied. V 256, H 64, 4/2 heads, D 16, L 4, I 48, P 40. Explicit
              no_rope_layers [1, 0, 1, 1] (1 = rope, layer 1 NoPE) beside no_rope_layer_interval 4, as
              SmolLM3-3B's config.json writes both keys: transformers reads the list and uses the
              interval only when the list is null (it would give [1, 1, 1, 0]). bos_token_id null;
              pretraining_tp / max_window_layers present and unread. rope_theta 5e6.
  smollm3_b   SmolLM3ForCausalLM, BF16, untied. V 256, H 64, 4/1 heads, D 16, L 4, I 48, P 40. No
              no_rope_layers: derived from no_rope_layer_interval 3 as int((i + 1) % 3 != 0) =
              [1, 1, 0, 1]; attention_bias true: q, k, v and o_proj biases.
  glm4_moe_a  Glm4MoeForCausalLM, BF16, untied, laid out as GLM-4.5. V 256, H 48, 4/2 heads, head_dim 16
              != H/nh 12, L 3, P 40. first_k_dense_replace 1: layer 0 a dense MLP (I 64), layers 1-2 MoE
              with 8 routed experts (moe_intermediate 8), top-2, n_group 2 / topk_group 1,
              routed_scaling_factor 2.5, norm_topk_prob true, 1 shared expert (intermediate 8); sigmoid
              router + e_score_correction_bias for the choice only (it changes 20 / 16 of the 72
              routings of layers 1 / 2); partial_rotary_factor 0.5 (first 8 channels, pairs (i, i + 4));
              use_qk_norm true (per head over head_dim, before rope); q/k/v biases, no o_proj bias.
  glm4_moe_b  Glm4MoeForCausalLM, BF16, untied, laid out as GLM-4.5-Air. V 256, H 48, 4/1 heads, head_dim
              24, L 2, P 40. first_k_dense_replace 0 (both layers MoE), 6 routed experts top-3, n_group 1
              / topk_group 1, norm_topk_prob false, routed_scaling_factor 1.0, n_shared_experts 2 (one
              shared MLP of intermediate 16); use_qk_norm false; q/k/v biases; rotary on the first 12
              channels. num_nextn_predict_layers 1 and model.safetensors holds that MTP layer as
              model.layers.2.*: a full MoE decoder layer plus eh_proj [48, 96], enorm, hnorm,
              embed_tokens [256, 48], shared_head.norm, shared_head.head [256, 48], seeded values of their
              own; golden.json "ignored_tensors" lists them. The goldens never involve it.
Both MoE checkpoints use the per-expert names. golden.json also records, per model, how much the
float64 logits move when one switch is misread on purpose ("max_abs_logit_change_if_misread",
each asserted > 1% of max|logit|), the derived layer types, and for MoE the sparse layers and the
smallest gap between the k-th and (k+1)-th router probability ("min_router_topk_gap"; for GLM-4.5 of the
biased choice scores, and with a group limit also between the topk_group-th and next group score).
For Phi-3, SmolLM3 and GLM-4.5 golden.json also has "rotary_dim" and "rope_theta"; phi3_a "longrope" (the
original/max lengths, scale, attention factor and its formula, which factor list the calls used, the
inverse frequencies used and the short ones); SmolLM3 "rope_layers" (no_rope_layers as transformers
derives it); GLM-4.5 "sparse_layers", "min_chosen_biased_score" (transformers fills excluded groups with
0.0 instead of -inf; the two agree while every chosen biased score is > 0, asserted where groups are
excluded) and "routings_changed_by_correction_bias" per MoE layer (tokens whose chosen expert set
differs without the bias); glm4_moe_b "mtp_layer_index" and "ignored_tensors".
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


# Phi-3 / Phi-4-mini, SmolLM3, GLM-4.5 (families-2026.md). Key order sorted, as save_pretrained writes the
# Hub's files.

PHI3_A_SHORT = [1.0, 1.02, 1.05, 1.1, 1.2, 1.35]
PHI3_A_LONG = [1.0, 1.5, 2.5, 4.0, 8.0, 16.0]


def phi3_a():
    c = {"architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
         "bos_token_id": 250, "embd_pdrop": 0.0, "eos_token_id": 251, "full_attn_mod": 1, "hidden_act": "silu",
         "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 64, "interpolate_factor": 1,
         "lm_head_bias": False, "max_position_embeddings": 512, "mlp_bias": False, "model_type": "phi3",
         "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
         "original_max_position_embeddings": 32, "pad_token_id": 250, "partial_rotary_factor": 0.75,
         "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
         "rope_scaling": {"long_factor": PHI3_A_LONG, "short_factor": PHI3_A_SHORT, "type": "longrope"},
         "rope_theta": 10000.0, "sliding_window": None, "tie_word_embeddings": False, "use_cache": True,
         "vocab_size": 256}
    return dict(name="phi3_a", family="phi3", seed=8105, dtype="bfloat16", prompt=40, config=c,
                generation={"bos_token_id": 250, "eos_token_id": [252, 251]},
                switches={"short factors instead of long (T 72 > original 32)": {"longrope": "short"},
                          "no longrope attention factor (cos/sin x 1)": {"attn_factor": 1.0},
                          "long/short chosen per position (short for positions < 32) instead of per call":
                              {"longrope": "per_position"},
                          "attention factor 0.1 ln(16) + 1 (yarn's) instead of sqrt(1 + ln 16 / ln 32)":
                              {"attn_factor": 0.1 * math.log(512 / 32) + 1.0},
                          "rope_scaling ignored (plain rope, factor 1)": {"rope": None, "attn_factor": 1.0},
                          "partial_rotary_factor ignored (rotate all 16 channels, plain rope)":
                              {"rot": 16, "rope": None, "attn_factor": 1.0},
                          "rotary on interleaved pairs (2i, 2i+1)": {"pairing": "interleaved"},
                          "gate_up_proj halves swapped (up | gate)": {"swap_gate_up": True}},
                notes="Phi3ForCausalLM laid out as Phi-4-mini-instruct: fused qkv_proj (q | k | v rows) with GQA 4/2, fused "
                      "gate_up_proj (gate | up rows), partial_rotary_factor 0.75 (first 12 of 16 channels rotated, split-half "
                      "pairs (i, i + 6)), longrope with 6 short / 6 long factors, original_max_position_embeddings 32 < "
                      "prompt 40 so every forward call (prefill and each decode step) uses the long factors, attention "
                      "factor sqrt(1 + ln(512/32)/ln(32)) on cos and sin; untied; sliding_window null")


def phi3_b():
    c = {"architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
         "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 48,
         "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 4096, "model_type": "phi3",
         "num_attention_heads": 6, "num_hidden_layers": 2, "num_key_value_heads": 2,
         "original_max_position_embeddings": 4096, "pad_token_id": 2, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
         "rope_scaling": None, "rope_theta": 10000.0, "sliding_window": 16, "tie_word_embeddings": True,
         "use_cache": True, "vocab_size": 256}
    return dict(name="phi3_b", family="phi3", seed=8206, dtype="float32", prompt=40, config=c,
                generation={"bos_token_id": 1, "eos_token_id": [2, 3]},
                switches={"sliding_window ignored": {"sliding": [False] * 2},
                          "gate_up_proj halves swapped (up | gate)": {"swap_gate_up": True},
                          "fused qkv_proj split as k | q | v": {"qkv_order": "kqv"}},
                notes="Phi3ForCausalLM, F32, tied (as Phi-4-mini); GQA 6/2, head_dim 8; fused qkv_proj / gate_up_proj; "
                      "no partial_rotary_factor key (1.0: all 8 channels rotated); rope_scaling null; sliding_window 16 "
                      "with a 40-token prompt (Phi-3-mini-4k's config has sliding_window 2047; transformers applies it)")


def smollm3_a():
    c = {"architectures": ["SmolLM3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
         "bos_token_id": None, "eos_token_id": 250, "hidden_act": "silu", "hidden_size": 64,
         "initializer_range": 0.02, "intermediate_size": 48, "max_position_embeddings": 65536,
         "max_window_layers": 4, "mlp_bias": False, "model_type": "smollm3", "no_rope_layer_interval": 4,
         "no_rope_layers": [1, 0, 1, 1], "num_attention_heads": 4, "num_hidden_layers": 4,
         "num_key_value_heads": 2, "pad_token_id": 251, "pretraining_tp": 2, "rms_norm_eps": 1e-06,
         "rope_scaling": None, "rope_theta": 5000000.0, "sliding_window": None, "tie_word_embeddings": True,
         "use_cache": True, "use_sliding_window": False, "vocab_size": 256}
    return dict(name="smollm3_a", family="smollm3", seed=9105, dtype="bfloat16", prompt=40, config=c,
                generation={"bos_token_id": None, "eos_token_id": 250},
                switches={"no_rope_layers ignored (rope on every layer)": {"rope_layers": [True] * 4},
                          "no_rope_layers derived from no_rope_layer_interval 4 instead of the list ([1, 1, 1, 0])":
                              {"rope_layers": [True, True, True, False]},
                          "no_rope_layers read inverted (0 = rope)": {"rope_layers": [False, True, False, False]}},
                notes="SmolLM3ForCausalLM as SmolLM3-3B's config.json writes it: an explicit no_rope_layers list (1 = rope, "
                      "0 = NoPE) beside no_rope_layer_interval 4; the list here is [1, 0, 1, 1] (layer 1 NoPE), which "
                      "transformers reads in preference to the interval (that would give [1, 1, 1, 0]); GQA 4/2; tied; "
                      "bos_token_id null; pretraining_tp 2 and max_window_layers ignored by transformers")


def smollm3_b():
    c = {"architectures": ["SmolLM3ForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
         "bos_token_id": None, "eos_token_id": 250, "hidden_act": "silu", "hidden_size": 64,
         "initializer_range": 0.02, "intermediate_size": 48, "max_position_embeddings": 65536,
         "mlp_bias": False, "model_type": "smollm3", "no_rope_layer_interval": 3, "num_attention_heads": 4,
         "num_hidden_layers": 4, "num_key_value_heads": 1, "pad_token_id": 251, "rms_norm_eps": 1e-06,
         "rope_scaling": None, "rope_theta": 5000000.0, "sliding_window": None, "tie_word_embeddings": False,
         "use_cache": True, "use_sliding_window": False, "vocab_size": 256}
    return dict(name="smollm3_b", family="smollm3", seed=9211, dtype="bfloat16", prompt=40, config=c,
                generation={"bos_token_id": None, "eos_token_id": 250},
                switches={"no_rope_layer_interval ignored (rope on every layer)": {"rope_layers": [True] * 4},
                          "default interval 4 instead of 3 ([1, 1, 1, 0])": {"rope_layers": [True, True, True, False]},
                          "no q/k/v bias": {"qkv_bias": False}, "no o_proj bias": {"o_bias": False}},
                notes="SmolLM3ForCausalLM with no no_rope_layers list: transformers derives it from no_rope_layer_interval "
                      "3 as int((i + 1) % 3 != 0) = [1, 1, 0, 1] (layer 2 NoPE); attention_bias true (q, k, v AND o_proj "
                      "biases); GQA 4/1; untied")


def glm4_moe_a():
    c = {"architectures": ["Glm4MoeForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
         "eos_token_id": [253, 254, 255], "first_k_dense_replace": 1, "head_dim": 16, "hidden_act": "silu",
         "hidden_size": 48, "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 131072,
         "model_type": "glm4_moe", "moe_intermediate_size": 8, "n_group": 2, "n_routed_experts": 8,
         "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 4, "num_experts_per_tok": 2,
         "num_hidden_layers": 3, "num_key_value_heads": 2, "pad_token_id": 253, "partial_rotary_factor": 0.5,
         "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 1000000.0, "routed_scaling_factor": 2.5,
         "tie_word_embeddings": False, "topk_group": 1, "use_cache": True, "use_qk_norm": True, "vocab_size": 256}
    return dict(name="glm4_moe_a", family="glm4_moe", seed=10105, dtype="bfloat16", prompt=40, config=c,
                generation={"bos_token_id": None, "eos_token_id": [253, 254, 255]},
                switches={"e_score_correction_bias ignored in the choice": {"use_bias": False},
                          "e_score_correction_bias also in the weights": {"biased_weights": True},
                          "group limit ignored (all 8 experts eligible)": {"topk_group": 2},
                          "group score = max instead of sum of top-2": {"group_score": "max"},
                          "norm_topk_prob false": {"norm_topk": False},
                          "routed_scaling_factor ignored (1.0)": {"route_scale": 1.0},
                          "softmax router instead of sigmoid": {"score_func": "softmax"},
                          "no shared expert": {"shared": False},
                          "partial_rotary_factor ignored (rotate all 16 channels)": {"rot": 16},
                          "rotary on interleaved pairs (2i, 2i+1)": {"pairing": "interleaved"},
                          "no q/k norm": {"qk_norm": False},
                          "no q/k/v bias": {"qkv_bias": False}},
                notes="Glm4MoeForCausalLM laid out as GLM-4.5: layer 0 dense (first_k_dense_replace 1, I 64), layers 1-2 MoE: "
                      "8 routed experts (moe_intermediate 8), top-2, sigmoid scores, e_score_correction_bias (F32, "
                      "0.1 N(0,1)) for the choice only, n_group 2 / topk_group 1 (group score = sum of the top-2 biased "
                      "scores), weights from the unbiased scores, norm_topk_prob true, x routed_scaling_factor 2.5, plus 1 "
                      "shared expert; head_dim 16 != hidden/heads 12, partial_rotary_factor 0.5 (first 8 channels, split-half "
                      "pairs (i, i + 4)); use_qk_norm true (per head, before rope); attention_bias: q/k/v biases, o_proj none; "
                      "GQA 4/2; untied")


def glm4_moe_b():
    c = {"architectures": ["Glm4MoeForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
         "eos_token_id": [253, 254, 255], "first_k_dense_replace": 0, "head_dim": 24, "hidden_act": "silu",
         "hidden_size": 48, "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 131072,
         "model_type": "glm4_moe", "moe_intermediate_size": 8, "n_group": 1, "n_routed_experts": 6,
         "n_shared_experts": 2, "norm_topk_prob": False, "num_attention_heads": 4, "num_experts_per_tok": 3,
         "num_hidden_layers": 2, "num_key_value_heads": 1, "num_nextn_predict_layers": 1, "pad_token_id": 253,
         "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 1000000.0,
         "routed_scaling_factor": 1.0, "tie_word_embeddings": False, "topk_group": 1, "use_cache": True,
         "use_qk_norm": False, "vocab_size": 256}
    return dict(name="glm4_moe_b", family="glm4_moe", seed=10206, dtype="bfloat16", prompt=40, config=c, mtp=True,
                generation={"bos_token_id": None, "eos_token_id": [253, 254, 255]},
                switches={"e_score_correction_bias ignored in the choice": {"use_bias": False},
                          "norm_topk_prob true": {"norm_topk": True},
                          "no shared expert": {"shared": False},
                          "partial_rotary_factor ignored (rotate all 24 channels)": {"rot": 24}},
                notes="Glm4MoeForCausalLM laid out as GLM-4.5-Air with its MTP layer: both layers MoE (first_k_dense_replace 0), "
                      "6 routed experts top-3, n_group 1 / topk_group 1 (no group limit), norm_topk_prob false (weights are "
                      "the raw sigmoid scores, sum != 1), routed_scaling_factor 1.0, n_shared_experts 2 (one shared MLP of "
                      "intermediate 2 x 8 = 16); use_qk_norm false; q/k/v biases; head_dim 24 != hidden/heads 12, rotary "
                      "on the first 12 channels; GQA 4/1; num_nextn_predict_layers 1: model.layers.2.* (a full MoE decoder "
                      "layer plus eh_proj, enorm, hnorm, embed_tokens, shared_head.norm, shared_head.head) is in "
                      "model.safetensors and is not part of the forward pass")


MODELS = [llama_a(), llama_b(), mistral_a(), mistral_b(), qwen2_a(), qwen2_b(), qwen3_a(), qwen3_b(),
          qwen3_moe_a(), qwen3_moe_b(), gemma3_a(), gemma3_b(), gemma2_a(), gemma3_mm(),
          phi3_a(), phi3_b(), smollm3_a(), smollm3_b(), glm4_moe_a(), glm4_moe_b()]


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
    if m["family"] in SORTED_KEYS:  # the Hub's Gemma, Phi-3, SmolLM3, GLM-4.5 files list their keys sorted
        c = dict(sorted(c.items()))
    return c


GEMMA = ("gemma2", "gemma3")
SORTED_KEYS = GEMMA + ("phi3", "smollm3", "glm4_moe")


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
        if name.endswith("e_score_correction_bias"):  # GLM-4.5 router buffer, F32 in the released files
            w[name] = (m.get("router_bias_std", 0.1) * n).contiguous()
            continue
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
        elif name.endswith("mlp.gate.weight"):  # Qwen3-MoE / GLM-4.5 router [E, H]
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


def mtp_tensors(m, cfg, gen):
    """glm4_moe_b: the MTP ("nextn") layer that GLM-4.5's model.safetensors carries as
    model.layers.<num_hidden_layers>.* (num_nextn_predict_layers 1; transformers 4.57.1 builds no such
    layer): a full decoder layer (MoE here, since its index >= first_k_dense_replace) plus eh_proj
    [H, 2H], enorm, hnorm, embed_tokens [V, H], shared_head.norm and shared_head.head [V, H], as llama.cpp's
    GLM4_MOE tensor map (NEXTN_*) and vLLM's glm4_moe_mtp.py name them. Seeded values of their own (not copies
    of the main embedding / lm_head), so a loader that used them would fail; a text engine skips them."""
    from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeDecoderLayer
    L, H, V = cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size
    with torch.device("meta"):
        block = Glm4MoeDecoderLayer(cfg, L)
    pre = f"model.layers.{L}."
    shapes = {pre + k: tuple(v.shape) for k, v in block.state_dict().items()}
    shapes.update({pre + "eh_proj.weight": (H, 2 * H), pre + "enorm.weight": (H,), pre + "hnorm.weight": (H,),
                   pre + "embed_tokens.weight": (V, H), pre + "shared_head.norm.weight": (H,),
                   pre + "shared_head.head.weight": (V, H)})
    store = DTYPES[m["dtype"]]
    out = {}
    for name in sorted(shapes):
        n = torch.randn(*shapes[name], generator=gen, dtype=torch.float32)
        if name.endswith("e_score_correction_bias"):
            out[name] = (0.1 * n).contiguous()
            continue
        if name.endswith("norm.weight"):
            t = 1.0 + 0.1 * n
        elif name.endswith(".bias"):
            t = 0.1 * n
        else:
            t = n / math.sqrt(shapes[name][1])
        out[name] = t.to(store).contiguous()
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
    """Everything the forward pass needs, by the loading rules of §2/§3/§6 (both spellings), and for Phi-3,
    SmolLM3 and GLM-4.5 by the rules of transformers 4.57.1's configuration_*.py (defaults included)."""
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
    if mt in ("mistral", "phi3"):  # phi3: create_sliding_window_causal_mask on every layer when sliding_window is set
        sliding = [c.get("sliding_window") is not None] * L
    elif mt in ("qwen2", "qwen3"):
        sliding = [bool(c.get("use_sliding_window")) and i >= c["max_window_layers"] for i in range(L)]
    elif mt == "qwen3_moe":  # HF4: sliding_window (if enabled) applies to all layers
        sliding = [bool(c.get("use_sliding_window")) and c.get("sliding_window") is not None] * L
    else:
        sliding = [False] * L
    # SmolLM3: no_rope_layers (1 = rope, 0 = NoPE) when given, else int((i + 1) % no_rope_layer_interval != 0)
    rope_layers = [True] * L
    if mt == "smollm3":
        nrl = c.get("no_rope_layers")
        if nrl is None:
            nrl = [int((i + 1) % c.get("no_rope_layer_interval", 4) != 0) for i in range(L)]
        rope_layers = [bool(x) for x in nrl]
        # a layer slides only where it is NoPE and use_sliding_window with a window is set
        sliding = [bool(c.get("use_sliding_window")) and c.get("sliding_window") is not None and not r
                   for r in rope_layers]
    attn_bias = bool(c.get("attention_bias", False))
    partial = c.get("partial_rotary_factor", 0.5 if mt == "glm4_moe" else 1.0)
    p = dict(H=H, nh=nh, nkv=nkv, L=L, D=head_dim, theta=theta, rope=rope, eps=c["rms_norm_eps"],
             window=c.get("sliding_window"), sliding=sliding, tied=c["tie_word_embeddings"],
             # phi3 has no q/k/v/o biases whatever attention_bias says (the key is not read)
             qkv_bias=(mt == "qwen2") or (mt not in ("mistral", "phi3") and attn_bias),
             # o_proj bias: llama, qwen3(-moe) and smollm3 with attention_bias; glm4_moe's o_proj never has one
             o_bias=(mt not in ("qwen2", "mistral", "phi3", "glm4_moe")) and attn_bias,
             mlp_bias=(mt in ("llama", "smollm3")) and bool(c.get("mlp_bias", False)),
             qk_norm=mt in ("qwen3", "qwen3_moe") or (mt == "glm4_moe" and bool(c.get("use_qk_norm", False))),
             sparse=[False] * L, rot=int(head_dim * partial), rope_layers=rope_layers, fused=(mt == "phi3"),
             attn_factor=None, longrope=None, pairing="split", swap_gate_up=False, qkv_order="qkv", router=None)
    if rope is not None and rope["rope_type"] == "longrope":
        # Phi3Config keeps original_max_position_embeddings at the top level (default 4096); transformers takes
        # factor = max_position_embeddings / original and never reads rope_scaling.factor when that key is set
        orig = c.get("original_max_position_embeddings", 4096)
        scale = c["max_position_embeddings"] / orig
        p.update(original_max=orig, longrope_scale=scale,
                 attn_factor=rope.get("attention_factor") or (
                     1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(orig))))
    if mt == "qwen3_moe":
        E = c.get("num_experts", c.get("num_local_experts"))
        p.update(E=E, k=c["num_experts_per_tok"], norm_topk=bool(c["norm_topk_prob"]))
        p["sparse"] = [i not in (c.get("mlp_only_layers") or []) and E > 0
                       and (i + 1) % c["decoder_sparse_step"] == 0 for i in range(L)]
    if mt == "glm4_moe":  # DeepSeek-V3's noaux_tc router (families-2026.md "GLM-4.5")
        p.update(router="sigmoid", E=c["n_routed_experts"], k=c["num_experts_per_tok"],
                 norm_topk=bool(c.get("norm_topk_prob", True)), n_group=c.get("n_group", 1),
                 topk_group=c.get("topk_group", 1), route_scale=c.get("routed_scaling_factor", 1.0),
                 use_bias=True, biased_weights=False, group_score="sum2", score_func="sigmoid", shared=True)
        p["sparse"] = [i >= c.get("first_k_dense_replace", 1) for i in range(L)]
    return p


def inv_freq_ref(p, T=None):
    """Inverse frequencies of the rotated channels (rot = head_dim * partial_rotary_factor); T, the length of
    the forward call, picks longrope's factor list."""
    R = p["rot"]
    inv = 1.0 / p["theta"] ** (torch.arange(0, R, 2, dtype=torch.float64) / R)
    r = p["rope"]
    if r is None:
        return inv
    if r["rope_type"] == "longrope":
        # long factors when the call's sequence (max position id + 1) exceeds original_max_position_embeddings
        which = p["longrope"] or ("long" if T > p["original_max"] else "short")
        return inv / torch.tensor(r[which + "_factor"], dtype=torch.float64)
    assert r["rope_type"] == "llama3", r
    f, lo, hi, L0 = r["factor"], r["low_freq_factor"], r["high_freq_factor"], r["original_max_position_embeddings"]
    wl = 2 * math.pi / inv
    out = torch.where(wl > L0 / lo, inv / f, inv)
    smooth = (L0 / wl - lo) / (hi - lo)
    blend = (1 - smooth) * inv / f + smooth * inv
    mid = (wl >= L0 / hi) & (wl <= L0 / lo)
    return torch.where(mid, blend, out)


def glm_route(p, h, W, pre):
    """GLM-4.5 / DeepSeek-V3 noaux_tc routing for one layer: sigmoid scores, + e_score_correction_bias for the
    CHOICE only; group score = sum of the top-2 biased scores of each group, the topk_group best groups kept
    (the others excluded); top-k of the biased scores; weights = the unbiased scores of the chosen experts,
    renormalised when norm_topk_prob, times routed_scaling_factor.

    Returns (ids [T, k], weights [T, k], stats). transformers fills excluded experts with 0.0 rather than
    -inf: the two agree while every chosen biased score is > 0, which stats["min_chosen_biased_score"] shows."""
    logits = h @ W[pre + "mlp.gate.weight"].T
    T, E, k, G, TG = logits.shape[0], p["E"], p["k"], p["n_group"], p["topk_group"]
    scores = torch.softmax(logits, -1) if p["score_func"] == "softmax" else torch.sigmoid(logits)
    bias = W[pre + "mlp.gate.e_score_correction_bias"]
    choice = scores + bias if p["use_bias"] else scores.clone()
    gaps = []
    if TG < G:
        grouped = choice.view(T, G, E // G)
        group = grouped.max(-1).values if p["group_score"] == "max" else grouped.topk(2, -1).values.sum(-1)
        srt = group.sort(-1, descending=True).values
        gaps.append(float((srt[:, TG - 1] - srt[:, TG]).min()))
        keep = torch.zeros(T, G, dtype=torch.bool)
        keep.scatter_(1, group.topk(TG, -1).indices, True)
        choice = choice.masked_fill(~keep.repeat_interleave(E // G, 1), float("-inf"))
    srt = choice.sort(-1, descending=True).values
    gaps.append(float((srt[:, k - 1] - srt[:, k]).min()))
    ids = choice.topk(k, -1).indices
    w = (choice if p["biased_weights"] else scores).gather(1, ids)
    if p["norm_topk"]:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    stats = {"min_router_topk_gap": min(gaps), "min_chosen_biased_score": float(choice.gather(1, ids).min())}
    return ids, w * p["route_scale"], stats


def reference_forward(c, weights, ids, override=None):
    """Returns (logits [T, V] float64, stats): stats["min_router_topk_gap"] for MoE (smallest gap between the
    k-th and (k+1)-th router choice score, and for grouped routing between the topk_group-th and next group
    score); for GLM-4.5 also how many routings the correction bias changes.

    `override` replaces parsed settings (a deliberately wrong reading of the config, to show the
    golden depends on that switch)."""
    p = parse_config(c)
    p.update(override or {})
    W = {k: v.double() for k, v in weights.items()}
    T, H, D, nh, nkv, eps, R = ids.shape[0], p["H"], p["D"], p["nh"], p["nkv"], p["eps"], p["rot"]

    def rms(x, w):
        return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))

    def lin(x, name, bias):
        y = x @ W[name + ".weight"].T
        return y + W[name + ".bias"] if bias else y

    def mlp(x, pre, bias):
        if pre + "gate_up_proj.weight" in W:  # Phi-3: fused rows gate | up
            gu = lin(x, pre + "gate_up_proj", False)
            g, u = gu[..., :gu.shape[-1] // 2], gu[..., gu.shape[-1] // 2:]
            if p["swap_gate_up"]:
                g, u = u, g
            return lin(torch.nn.functional.silu(g) * u, pre + "down_proj", False)
        return lin(torch.nn.functional.silu(lin(x, pre + "gate_proj", bias)) * lin(x, pre + "up_proj", bias),
                   pre + "down_proj", bias)

    pos = torch.arange(T, dtype=torch.float64)
    if p["longrope"] == "per_position":  # the misreading: short below original_max_position_embeddings, long above
        inv = torch.where((pos + 1 > p["original_max"])[:, None], inv_freq_ref(dict(p, longrope="long"))[None],
                          inv_freq_ref(dict(p, longrope="short"))[None])
        ang = pos[:, None] * inv
    else:
        ang = pos[:, None] * inv_freq_ref(p, T)[None]
    af = 1.0 if p["attn_factor"] is None else p["attn_factor"]  # longrope: on cos and sin
    cos, sin = (torch.cos(ang) * af)[:, None], (torch.sin(ang) * af)[:, None]

    def rope(v):  # [T, heads, D]: the first R channels rotate, split-half pairs (i, i + R/2); the rest pass
        r, rest = v[..., :R], v[..., R:]
        if p["pairing"] == "interleaved":  # the misreading: pairs (2i, 2i + 1)
            a, b = r[..., 0::2], r[..., 1::2]
            return torch.cat([torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2), rest], -1)
        a, b = r[..., :R // 2], r[..., R // 2:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], -1)

    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None]
    stats = {}
    x = W["model.embed_tokens.weight"][ids]
    for li in range(p["L"]):
        pre = f"model.layers.{li}."
        h = rms(x, W[pre + "input_layernorm.weight"])
        if p["fused"]:  # Phi-3 qkv_proj: rows q (nh*D) | k (nkv*D) | v (nkv*D)
            qkv = lin(h, pre + "self_attn.qkv_proj", False)
            sizes = {"q": nh * D, "k": nkv * D, "v": nkv * D}
            parts, o = {}, 0
            for part in p["qkv_order"]:
                parts[part] = qkv[:, o:o + sizes[part]]
                o += sizes[part]
            q, k, v = parts["q"].reshape(T, nh, D), parts["k"].reshape(T, nkv, D), parts["v"].reshape(T, nkv, D)
        else:
            q = lin(h, pre + "self_attn.q_proj", p["qkv_bias"]).view(T, nh, D)
            k = lin(h, pre + "self_attn.k_proj", p["qkv_bias"]).view(T, nkv, D)
            v = lin(h, pre + "self_attn.v_proj", p["qkv_bias"]).view(T, nkv, D)
        if p["qk_norm"]:
            q = rms(q, W[pre + "self_attn.q_norm.weight"])
            k = rms(k, W[pre + "self_attn.k_norm.weight"])
        if p["rope_layers"][li]:  # SmolLM3 NoPE layers skip the rotation
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
        if p["sparse"][li] and p["router"] == "sigmoid":
            tid, tw, rs = glm_route(p, h, W, pre)
            unbiased, _, _ = glm_route(dict(p, use_bias=False), h, W, pre)
            changed = int((tid.sort(-1).values != unbiased.sort(-1).values).any(-1).sum())
            stats["min_router_topk_gap"] = min(stats.get("min_router_topk_gap", math.inf), rs["min_router_topk_gap"])
            stats["min_chosen_biased_score"] = min(stats.get("min_chosen_biased_score", math.inf),
                                                   rs["min_chosen_biased_score"])
            stats.setdefault("routings_changed_by_correction_bias", []).append(changed)
            y = torch.zeros_like(x)
            for t in range(T):
                for j in range(p["k"]):
                    y[t] += tw[t, j] * mlp(h[t], pre + f"mlp.experts.{int(tid[t, j])}.", False)
            if p["shared"]:
                y = y + mlp(h, pre + "mlp.shared_experts.", False)
            x = x + y
        elif p["sparse"][li]:
            prob = torch.softmax(h @ W[pre + "mlp.gate.weight"].T, -1)  # over all E experts
            srt = torch.sort(prob, -1, descending=True).values
            gap = float((srt[:, p["k"] - 1] - srt[:, p["k"]]).min())
            stats["min_router_topk_gap"] = min(stats.get("min_router_topk_gap", math.inf), gap)
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
    return rms(x, W["model.norm.weight"]) @ head.T, stats


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
    mtp = mtp_tensors(m, cfg, gen) if m.get("mtp") else {}
    if mtp:
        assert not set(mtp) & set(weights)
        stored = {**weights, **mtp}

    save_file(stored, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(disk, f, indent=2)
        f.write("\n")
    # a null bos (SmolLM3, GLM-4.5 have none) is left out of generation_config.json, as the Hub files do
    gcfg = dict({k: v for k, v in m["generation"].items() if v is not None}, do_sample=False)
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
        router_gap = None if gemma else extra.get("min_router_topk_gap")
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
            if mtp:  # the "Some weights ... were not used" warning lists the MTP layer, checked just below
                transformers.logging.set_verbosity_error()
            loaded, info = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager",
                                                                output_loading_info=True)
            transformers.logging.set_verbosity_warning()
            loaded.eval()
            assert not any(info[k] for k in ("missing_keys", "mismatched_keys", "error_msgs")), info
            # glm4_moe_b: transformers skips only model.layers.46.* / .92.* (GLM-4.5-Air's and GLM-4.5's MTP
            # layer index) silently; this checkpoint's MTP layer is reported as unexpected and not loaded
            assert set(info["unexpected_keys"]) == set(mtp), info["unexpected_keys"]
            assert type(loaded).__name__ == m["config"]["architectures"][0], type(loaded).__name__
            lcfg = loaded.config.text_config if mm else loaded.config
            for key in ("layer_types", "sliding_window", "head_dim", "norm_topk_prob", "mlp_only_layers",
                        "decoder_sparse_step", "use_sliding_window", "tie_word_embeddings", "query_pre_attn_scalar",
                        "rope_theta", "rope_scaling", "rope_local_base_freq", "attn_logit_softcapping",
                        "final_logit_softcapping", "rms_norm_eps", "partial_rotary_factor",
                        "original_max_position_embeddings", "max_position_embeddings", "no_rope_layers",
                        "attention_bias", "use_qk_norm", "first_k_dense_replace", "n_group", "topk_group",
                        "routed_scaling_factor", "n_routed_experts", "n_shared_experts", "num_experts_per_tok"):
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
    new_family = m["family"] in ("phi3", "smollm3", "glm4_moe")
    if new_family:
        # what transformers built agrees with parse_config: rotary width, attention factor, biases, NoPE / MoE layers
        rot = model.model.rotary_emb
        T = seq.shape[1]
        assert 2 * rot.inv_freq.numel() == p["rot"], (rot.inv_freq.numel(), p["rot"])
        assert rot.attention_scaling == (1.0 if p["attn_factor"] is None else p["attn_factor"]), rot.attention_scaling
        # after the forward over T tokens the buffer holds the frequencies that call used (longrope: long)
        assert torch.allclose(rot.inv_freq.double(), inv_freq_ref(p, T), rtol=1e-6, atol=0), rot.inv_freq
        for layer in model.model.layers:
            a = layer.self_attn
            if p["fused"]:
                assert a.qkv_proj.bias is None and a.o_proj.bias is None and layer.mlp.gate_up_proj.bias is None
            else:
                assert (a.q_proj.bias is not None) == p["qkv_bias"] and (a.o_proj.bias is not None) == p["o_bias"]
            assert hasattr(a, "q_norm") == p["qk_norm"]
        if m["family"] == "smollm3":
            hf_rope = [bool(layer.self_attn.use_rope) for layer in model.model.layers]
            assert hf_rope == p["rope_layers"], hf_rope
        if m["family"] == "glm4_moe":
            from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeMoE
            hf_sparse = [isinstance(layer.mlp, Glm4MoeMoE) for layer in model.model.layers]
            assert hf_sparse == p["sparse"], hf_sparse
            # transformers masks the excluded groups with 0.0, not -inf: the same choice while every chosen
            # biased score is positive (without a group limit nothing is masked)
            assert p["topk_group"] >= p["n_group"] or extra["min_chosen_biased_score"] > 0, extra
            assert sum(extra["routings_changed_by_correction_bias"]) > 0, extra

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
    if new_family:
        golden["rotary_dim"] = p["rot"]
        golden["rope_theta"] = p["theta"]
        if small:
            golden["max_abs_logit_change_small_misreads"] = small
    if m["family"] == "phi3" and p["rope"] is not None:
        golden["longrope"] = {
            "original_max_position_embeddings": p["original_max"],
            "max_position_embeddings": disk["max_position_embeddings"],
            "scale": p["longrope_scale"],
            "attention_factor": p["attn_factor"],
            "attention_factor_formula": "sqrt(1 + ln(scale) / ln(original_max_position_embeddings)), "
                                        "scale = max_position_embeddings / original_max_position_embeddings",
            "factors_used": "long" if seq.shape[1] > p["original_max"] else "short",
            "rule": "per forward call: long_factor when max(position_ids) + 1 > original_max_position_embeddings, "
                    "else short_factor; the attention factor applies to both",
            "inv_freq_used": inv_freq_ref(p, seq.shape[1]).tolist(),
            "inv_freq_short": inv_freq_ref(dict(p, longrope="short")).tolist(),
        }
    if m["family"] == "smollm3":
        golden["rope_layers"] = [int(r) for r in p["rope_layers"]]
    if m["family"] == "glm4_moe":
        golden["sparse_layers"] = [i for i, s in enumerate(p["sparse"]) if s]
        golden["min_router_topk_gap"] = router_gap
        golden["min_chosen_biased_score"] = extra["min_chosen_biased_score"]
        golden["routings_changed_by_correction_bias"] = {
            str(i): n for i, n in zip(golden["sparse_layers"], extra["routings_changed_by_correction_bias"])}
        if mtp:
            golden["mtp_layer_index"] = disk["num_hidden_layers"]
            golden["ignored_tensors"] = sorted(mtp)
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
