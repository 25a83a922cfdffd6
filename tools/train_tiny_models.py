#!/usr/bin/env python3
"""Trains tessera's two built-in demo models from scratch, on a 2-core CPU, and writes them as
complete Hugging Face directories under models/ (issue 15).

  models/tiny-gpt-oss   GptOssForCausalLM: 8 experts, top-2, alternating sliding (64) / full
                        attention with sinks, YaRN rope, swigluoai experts; the experts are
                        stored as MXFP4 blocks + scales (post-training quantization; the held-out
                        loss before and after is recorded), everything else BF16.
  models/tiny-llama     LlamaForCausalLM twin: dense, same tokenizer, data, steps and seed.
  models/tiny-deepseek  DeepseekV3ForCausalLM (deepseek.md): MLA with q_lora_rank and a latent KV
                        cache, YaRN rope (factor 4, mscale 1.0 / mscale_all_dim 1.0, interleaved
                        pairs), a dense first layer, then sigmoid-scored noaux_tc MoE (8 experts in
                        4 groups, top-2 of 2 groups, one shared expert, routed_scaling_factor 2.5);
                        the router's e_score_correction_bias is trained the way DeepSeek-V3 trains
                        it (auxiliary-loss-free balancing: after each step, bias += 0.001 *
                        sign(mean load - expert load)); every linear weight but the router is
                        stored as DeepSeek-V3 ships it, float8_e4m3fn with a float32
                        weight_scale_inv per 128 x 128 block (post-training quantization; the
                        held-out loss before and after is recorded), the rest BF16.

Text: the Python standard library sources of Debian 12's python3.11 packages
(libpython3.11-minimal / libpython3.11-stdlib, /usr/lib/python3.11/**/*.py without the test
suites), licensed under the PSF License Agreement (/usr/lib/python3.11/LICENSE.txt); present on
every Debian 12 machine with python3. Files go to the held-out split when the first byte of the
SHA-256 of their path (relative to /usr/lib/python3.11) is below 13 (about 5 %), else to training.
The corpus record (corpus.json) lists every file with its split and SHA-256.

Tokenizer: a byte-level BPE of 4096 tokens trained on the training split with the `tokenizers`
library (Llama 3's split regex, ByteLevel bytes, no normalizer), plus harmony's special tokens
(<|endoftext|> separates files in the training stream).

Usage (tools/.venv, tools/requirements.txt):
  tools/.venv/bin/python tools/train_tiny_models.py [--work DIR] [--steps N] [--only llama|gpt-oss|deepseek]
Resumable: checkpoints go to WORK/<model>/ckpt.pt every --save-every steps and a rerun continues
from the last one; the corpus, tokenizer and finished models are reused. Seeds are fixed, so a
rerun from scratch reproduces the loss curve (torch CPU kernels with 2 threads).
"""
import argparse
import glob
import hashlib
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import transformers
from safetensors.torch import save_file
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STDLIB = "/usr/lib/python3.11"
HELDOUT_BYTE = 13
VOCAB = 4096
SPECIALS = ["<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
            "<|return|>", "<|call|>"]
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SEQ = 256
BATCH = 16
HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 256, 4, 8, 2, 32


def log(*args):
    print(*args, file=sys.stderr, flush=True)


# ---- corpus and tokenizer ----------------------------------------------------------------------

def corpus_files():
    files = []
    for path in sorted(glob.glob(os.path.join(STDLIB, "**", "*.py"), recursive=True)):
        rel = os.path.relpath(path, STDLIB)
        parts = rel.split(os.sep)
        if any(p in ("test", "tests", "idle_test", "__pycache__") for p in parts) or "site-packages" in parts:
            continue
        files.append(rel)
    return files


def build_corpus(work):
    out = os.path.join(work, "corpus")
    if os.path.exists(os.path.join(out, "corpus.json")):
        return out
    os.makedirs(out, exist_ok=True)
    record = {"source": f"{STDLIB}/**/*.py without test/, tests/, idle_test/ (Debian 12 python3.11)",
              "licence": "PSF License Agreement, " + os.path.join(STDLIB, "LICENSE.txt"),
              "heldout_rule": f"sha256(relative path)[0] < {HELDOUT_BYTE}", "files": []}
    texts = {"train": [], "heldout": []}
    for rel in corpus_files():
        with open(os.path.join(STDLIB, rel), "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        split = "heldout" if hashlib.sha256(rel.encode()).digest()[0] < HELDOUT_BYTE else "train"
        texts[split].append(text)
        record["files"].append({"path": rel, "split": split, "sha256": hashlib.sha256(data).hexdigest()})
    for split, parts in texts.items():
        # Files joined by <|endoftext|> for training; the held-out text also as plain text for
        # perplexity (files separated by a blank line).
        with open(os.path.join(out, f"{split}.txt"), "w", encoding="utf-8") as f:
            f.write("\n\n".join(parts))
        record[split] = {"files": len(parts), "bytes": sum(len(p.encode()) for p in parts)}
    with open(os.path.join(out, "files.json"), "w") as f:
        json.dump({split: [len(t) for t in parts] for split, parts in texts.items()}, f)  # file lengths
    with open(os.path.join(out, "corpus.json"), "w") as f:
        json.dump(record, f, indent=1)
    log(f"corpus: {record['train']['files']} training files ({record['train']['bytes']} bytes), "
        f"{record['heldout']['files']} held-out ({record['heldout']['bytes']} bytes)")
    return out


def split_files(corpus, split):
    """The split's files as separate strings (lengths from files.json)."""
    with open(os.path.join(corpus, f"{split}.txt"), encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(corpus, "files.json")) as f:
        lengths = json.load(f)[split]
    out, pos = [], 0
    for n in lengths:
        out.append(text[pos:pos + n])
        pos += n + 2
    return out


def build_tokenizer(work, corpus):
    path = os.path.join(work, "tokenizer.json")
    if os.path.exists(path):
        return Tokenizer.from_file(path)
    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), "isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, show_progress=False,
                                  special_tokens=[AddedToken(s, special=True, normalized=False) for s in SPECIALS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(split_files(corpus, "train"), trainer=trainer)
    tok.save(path)
    log(f"tokenizer: {tok.get_vocab_size()} tokens")
    return tok


# Held-out files that are not Python code: pydoc_data/topics.py is 756 KB of English prose (the
# library reference's topics as one string literal), 63 % of the held-out bytes. The held-out loss
# is reported over all held-out files and over the code alone.
PROSE = {"pydoc_data/topics.py"}


def heldout_code_files(corpus):
    with open(os.path.join(corpus, "corpus.json")) as f:
        names = [e["path"] for e in json.load(f)["files"] if e["split"] == "heldout"]
    return [text for name, text in zip(names, split_files(corpus, "heldout")) if name not in PROSE]


def token_stream(work, corpus, tok, split):
    path = os.path.join(work, f"{split}.tokens.npy")
    if os.path.exists(path):
        return np.load(path)
    eot = tok.token_to_id("<|endoftext|>")
    ids = []
    files = heldout_code_files(corpus) if split == "heldout_code" else split_files(corpus, split)
    for enc in tok.encode_batch(files):
        ids.extend(enc.ids)
        ids.append(eot)
    arr = np.array(ids, dtype=np.int32)
    np.save(path, arr)
    log(f"{split}: {len(arr)} tokens")
    return arr


# ---- models ------------------------------------------------------------------------------------

def common_config(tok):
    eot = tok.token_to_id("<|endoftext|>")
    return dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, rms_norm_eps=1e-5, initializer_range=0.02,
                bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, attention_dropout=0.0)


def llama_config(tok):
    return transformers.LlamaConfig(
        **common_config(tok), intermediate_size=768, hidden_act="silu", max_position_embeddings=2048,
        rope_theta=500000.0, tie_word_embeddings=True, attention_bias=False, mlp_bias=False)


def gpt_oss_config(tok):
    return transformers.GptOssConfig(
        **common_config(tok), intermediate_size=256, num_local_experts=8, num_experts_per_tok=2,
        experts_per_token=2, sliding_window=64,
        layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(LAYERS)],
        rope_theta=150000.0, max_position_embeddings=4 * SEQ * 4, initial_context_length=4 * SEQ,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                      "original_max_position_embeddings": 4 * SEQ, "truncate": False},
        swiglu_limit=7.0, attention_bias=True, tie_word_embeddings=False, router_aux_loss_coef=0.02,
        output_router_logits=False, hidden_act="silu")


def deepseek_config(tok):
    config = common_config(tok)
    del config["head_dim"]  # MLA: qk_nope_head_dim + qk_rope_head_dim, v_head_dim
    config["num_key_value_heads"] = HEADS
    return transformers.DeepseekV3Config(
        **config, intermediate_size=768, moe_intermediate_size=128, n_routed_experts=8, n_shared_experts=1,
        num_experts_per_tok=2, n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5,
        first_k_dense_replace=1, q_lora_rank=128, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16,
        v_head_dim=32, hidden_act="silu", max_position_embeddings=4 * SEQ * 4, rope_theta=10000.0,
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4 * SEQ,
                      "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
        rope_interleave=True, tie_word_embeddings=False, attention_bias=False)


MODEL_CLASSES = {"llama": transformers.LlamaForCausalLM, "gpt-oss": transformers.GptOssForCausalLM,
                 "deepseek": transformers.DeepseekV3ForCausalLM}
MODEL_NAMES = {"llama": "tiny-llama", "gpt-oss": "tiny-gpt-oss", "deepseek": "tiny-deepseek"}


def make_model(kind, tok):
    if kind == "deepseek":
        from golden_generation import route_deepseek_v3_like_deepseek
        route_deepseek_v3_like_deepseek()
    config = {"llama": llama_config, "gpt-oss": gpt_oss_config, "deepseek": deepseek_config}[kind](tok)
    config._attn_implementation = "eager"
    return MODEL_CLASSES[kind](config)


class BiasBalancer:
    """DeepSeek-V3's auxiliary-loss-free load balancing (its technical report, section 2.1.2): the
    routers' chosen experts are counted during the step, then each e_score_correction_bias moves
    by `speed` towards the mean load (sign of the difference). The bias only chooses experts; the
    gate weights stay the unbiased sigmoid scores."""

    def __init__(self, model, speed=1e-3):
        self.speed = speed
        self.loads = {}
        self.routers = [layer.mlp.gate for layer in model.model.layers if hasattr(layer.mlp, "gate")
                        and hasattr(layer.mlp.gate, "e_score_correction_bias")]
        for router in self.routers:
            router.register_forward_hook(self._count)

    def _count(self, router, inputs, output):
        if not router.training:
            return
        indices = output[0]  # (topk_indices, topk_weights)
        load = torch.bincount(indices.reshape(-1), minlength=router.n_routed_experts).float()
        self.loads[id(router)] = self.loads.get(id(router), 0) + load

    @torch.no_grad()
    def step(self):
        for router in self.routers:
            load = self.loads.pop(id(router), None)
            if load is not None:
                router.e_score_correction_bias += self.speed * torch.sign(load.mean() - load)

    def imbalance(self):
        """max load / mean load of the last counted step, per router (before step() clears it)."""
        return [round((l.max() / l.mean()).item(), 3) for l in self.loads.values()]


def lr_at(step, steps, peak=3e-3, warmup=100):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup))))


def eval_windows(stream, count=48):
    """Fixed windows over the held-out stream: SEQ + 1 tokens each, evenly spaced."""
    starts = np.linspace(0, len(stream) - SEQ - 2, count).astype(np.int64)
    return torch.from_numpy(np.stack([stream[s:s + SEQ + 1] for s in starts]).astype(np.int64))


@torch.no_grad()
def heldout_loss(model, windows):
    model.eval()
    total = 0.0
    for i in range(0, len(windows), 8):
        batch = windows[i:i + 8]
        logits = model(batch[:, :-1], use_cache=False).logits.float()
        total += torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1),
                                                   reduction="sum").item()
    model.train()
    return total / (len(windows) * SEQ)


def train(kind, work, tok, train_ids, windows, steps, save_every):
    out = os.path.join(work, kind)
    os.makedirs(out, exist_ok=True)
    ckpt = os.path.join(out, "ckpt.pt")
    torch.manual_seed(1234)
    model = make_model(kind, tok)
    model.train()
    balancer = BiasBalancer(model) if kind == "deepseek" else None
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=lr_at(0, steps), betas=(0.9, 0.95), eps=1e-8)
    state = {"step": 0, "curve": [], "heldout": [], "seconds": 0.0}
    if os.path.exists(ckpt):
        saved = torch.load(ckpt, weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        state = saved["state"]
        log(f"{kind}: resuming at step {state['step']}")
    state.setdefault("torch_threads", torch.get_num_threads())  # of the training run (a resumed export may differ)
    params = sum(p.numel() for p in model.parameters())
    log(f"{kind}: {params / 1e6:.2f} M parameters, {steps} steps of {BATCH} x {SEQ} tokens")
    gen = np.random.default_rng(4321)
    # Batch b's window starts are drawn from a generator advanced to step b, so a resumed run
    # reads exactly the windows the uninterrupted one would have.
    starts_all = gen.integers(0, len(train_ids) - SEQ - 1, size=(steps, BATCH))
    t_last = time.time()
    while state["step"] < steps:
        step = state["step"]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps)
        batch = torch.from_numpy(np.stack([train_ids[s:s + SEQ + 1] for s in starts_all[step]]).astype(np.int64))
        kwargs = {"output_router_logits": True} if kind == "gpt-oss" else {}
        result = model(batch[:, :-1], use_cache=False, **kwargs)
        loss = torch.nn.functional.cross_entropy(result.logits.float().reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        total = loss
        if kind == "gpt-oss" and result.aux_loss is not None:  # the router's load-balancing loss
            total = loss + model.config.router_aux_loss_coef * result.aux_loss
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        imbalance = balancer.imbalance() if balancer else None
        if balancer:
            balancer.step()
        state["step"] += 1
        now = time.time()
        state["seconds"] += now - t_last
        t_last = now
        if step % 10 == 0:
            state["curve"].append([step, round(loss.item(), 4)])
        if state["step"] % 100 == 0 or state["step"] == steps:
            h = heldout_loss(model, windows)
            state["heldout"].append([state["step"], round(h, 4)])
            rate = state["step"] * BATCH * SEQ / max(state["seconds"], 1e-9)
            log(f"{kind}: step {state['step']}/{steps} train {loss.item():.3f} held-out {h:.3f} "
                f"({rate:.0f} tokens/s, {state['seconds'] / 60:.1f} min)"
                + (f" expert load max/mean {imbalance}" if imbalance else ""))
        if state["step"] % save_every == 0 or state["step"] == steps:
            tmp = ckpt + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, tmp)
            os.replace(tmp, ckpt)
            t_last = time.time()
    return model, state


# ---- MXFP4 (gpt-oss.md §2.3) -------------------------------------------------------------------

FP4 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def quantize_mxfp4(w):
    """w [..., rows, cols] float -> (blocks uint8 [..., rows, cols/32, 16], scales uint8 E8M0
    [..., rows, cols/32]). Shared exponent floor(log2(amax)) - 2 per 32 values (E2M1's largest
    exponent is 2), values rounded to the nearest E2M1 magnitude (ties to the even code), clamped
    at 6. Element 2j of a block is the low nibble of byte j."""
    *lead, rows, cols = w.shape
    blocks = w.reshape(*lead, rows, cols // 32, 32).double()
    amax = blocks.abs().amax(-1, keepdim=True)
    exp = torch.where(amax > 0, torch.floor(torch.log2(amax.clamp_min(1e-38))) - 2, torch.full_like(amax, -127))
    exp = exp.clamp(-127, 127)
    scaled = (blocks / torch.exp2(exp)).abs().clamp(max=6.0)
    dist = (scaled[..., None] - FP4.double()).abs()
    # Nearest magnitude; a tie goes to the even code (mantissa bit 0), as round-half-to-even.
    code = (dist + (torch.arange(8) % 2).double() * 1e-9).argmin(-1)
    code = code | ((blocks < 0) & (code > 0)).long() << 3
    code = code.to(torch.uint8)
    packed = code[..., 0::2] | (code[..., 1::2] << 4)
    scales = (exp.squeeze(-1) + 127).to(torch.uint8)
    return packed.contiguous(), scales.contiguous()


def dequantize_mxfp4(blocks, scales):
    lut = torch.cat([FP4, -FP4]).double()
    lo, hi = blocks & 0x0F, blocks >> 4
    codes = torch.stack([lo, hi], dim=-1).reshape(*blocks.shape[:-1], 32).long()
    vals = lut[codes] * torch.exp2(scales.double() - 127)[..., None]
    return vals.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32).float()


# ---- export ------------------------------------------------------------------------------------

def write_tokenizer_files(out, work):
    shutil.copy(os.path.join(work, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None,
                   "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": None,
                   "add_bos_token": False, "add_eos_token": False, "clean_up_tokenization_spaces": False,
                   "model_max_length": 4 * SEQ}, f, indent=2)


FP8_BLOCK = 128  # DeepSeek-V3's weight_block_size


def fp8_checkpoint(model):
    """DeepSeek-V3's storage (deepseek.md section 7): every Linear weight but the router's as
    float8_e4m3fn codes + float32 weight_scale_inv per 128 x 128 block (make_deepseek_golden.py's
    weight_quant), the rest BF16 (e_score_correction_bias float32, as V3 ships it). Returns the
    stored tensors and the float32 state dict they decode to."""
    from make_deepseek_golden import fp8_dequantize, fp8_quantize, is_linear
    stored, decoded = {}, {}
    for name, value in model.state_dict().items():
        value = value.detach().float()
        if is_linear(name):
            codes, scale_inv = fp8_quantize(value, FP8_BLOCK)
            stored[name], stored[name + "_scale_inv"] = codes.contiguous(), scale_inv.contiguous()
            decoded[name] = fp8_dequantize(codes, scale_inv, FP8_BLOCK)
        elif name.endswith("e_score_correction_bias"):
            stored[name] = decoded[name] = value.contiguous()
        else:
            stored[name] = value.to(torch.bfloat16).contiguous()
            decoded[name] = stored[name].float()
    return stored, decoded


def export(kind, work, model, state, tok, windows, code_windows, record):
    name = MODEL_NAMES[kind]
    out = os.path.join(ROOT, "models", name)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    model.eval()
    trained_loss = heldout_loss(model, windows)
    trained_code_loss = heldout_loss(model, code_windows)
    bf16 = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    info = {"model": name, "steps": state["step"], "batch": BATCH, "sequence": SEQ,
            "tokens_seen": state["step"] * BATCH * SEQ, "train_seconds": round(state["seconds"], 1),
            "torch_threads": state.get("torch_threads", torch.get_num_threads()), "train_loss_curve": state["curve"],
            "heldout_curve": state["heldout"], "heldout_loss_float32": round(trained_loss, 5),
            "heldout_code_loss_float32": round(trained_code_loss, 5),
            "heldout_code": f"the held-out files without {sorted(PROSE)} (English prose)",
            "generator": {"torch": torch.__version__, "transformers": transformers.__version__},
            "corpus": {k: record[k] for k in ("source", "licence", "heldout_rule", "train", "heldout")}}
    config = model.config.to_dict()
    decoded = None  # the float32 weights the stored checkpoint decodes to, where HF cannot load it
    if kind == "gpt-oss":
        for key in [k for k in bf16 if k.endswith("mlp.experts.gate_up_proj") or k.endswith("mlp.experts.down_proj")]:
            w = model.state_dict()[key].float()  # HF layout [E, in, out]
            blocks, scales = quantize_mxfp4(w.transpose(1, 2).contiguous())  # checkpoint rows = outputs
            del bf16[key]
            bf16[key + "_blocks"] = blocks
            bf16[key + "_scales"] = scales
        config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    elif kind == "deepseek":
        # transformers 4.57.1 loads FP8 block checkpoints only on a GPU, so the stored model is
        # measured through its decoded weights.
        bf16, decoded = fp8_checkpoint(model)
        config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                         "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}
        info["expert_bias_range"] = [round(min(v.min().item() for k, v in decoded.items()
                                               if k.endswith("e_score_correction_bias")), 4),
                                     round(max(v.max().item() for k, v in decoded.items()
                                               if k.endswith("e_score_correction_bias")), 4)]
    else:
        bf16.pop("lm_head.weight", None)  # tied to model.embed_tokens.weight
    for k in ("_attn_implementation_autoset", "_name_or_path", "transformers_version"):
        config.pop(k, None)
    config["torch_dtype"] = "bfloat16"
    config["architectures"] = [MODEL_CLASSES[kind].__name__]
    config["use_cache"] = True
    config["output_router_logits"] = False
    save_file(bf16, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    eot = tok.token_to_id("<|endoftext|>")
    with open(os.path.join(tmp, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": eot, "eos_token_id": [eot], "pad_token_id": eot, "do_sample": True,
                   "temperature": 0.7, "top_p": 0.95}, f, indent=2)
    write_tokenizer_files(tmp, work)
    # What the stored checkpoint gives, loaded back by transformers (float32, eager).
    if decoded is None:
        reloaded = MODEL_CLASSES[kind].from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager")
    else:
        reloaded = make_model(kind, tok)
        reloaded.load_state_dict(decoded)
    reloaded = reloaded.float().eval()
    info["heldout_loss_stored"] = round(heldout_loss(reloaded, windows), 5)
    info["heldout_code_loss_stored"] = round(heldout_loss(reloaded, code_windows), 5)
    if kind != "llama":
        cost = "mxfp4" if kind == "gpt-oss" else "fp8"
        info[f"{cost}_loss_cost"] = round(info["heldout_loss_stored"] - trained_loss, 5)
        info[f"{cost}_code_loss_cost"] = round(info["heldout_code_loss_stored"] - trained_code_loss, 5)
    info["checkpoint_bytes"] = os.path.getsize(os.path.join(tmp, "model.safetensors"))
    info["parameters"] = sum(p.numel() for p in model.parameters())
    with open(os.path.join(tmp, "training.json"), "w") as f:
        json.dump(info, f, indent=1)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    log(f"{name}: held-out loss {trained_loss:.4f} (float32 training weights), {info['heldout_loss_stored']:.4f} "
        f"as stored; code only {trained_code_loss:.4f} / {info['heldout_code_loss_stored']:.4f}; "
        f"{info['checkpoint_bytes'] / 1e6:.1f} MB -> {out}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default=os.path.join(ROOT, "build", "train"))
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--save-every", type=int, default=100)
    p.add_argument("--only", choices=["llama", "gpt-oss", "deepseek"])
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.work, exist_ok=True)
    corpus = build_corpus(args.work)
    with open(os.path.join(corpus, "corpus.json")) as f:
        record = json.load(f)
    tok = build_tokenizer(args.work, corpus)
    train_ids = token_stream(args.work, corpus, tok, "train")
    heldout_ids = token_stream(args.work, corpus, tok, "heldout")
    windows = eval_windows(heldout_ids)
    code_windows = eval_windows(token_stream(args.work, corpus, tok, "heldout_code"))
    for kind in ["gpt-oss", "llama", "deepseek"]:
        if args.only and kind != args.only:
            continue
        model, state = train(kind, args.work, tok, train_ids, windows, args.steps, args.save_every)
        export(kind, args.work, model, state, tok, windows, code_windows, record)


if __name__ == "__main__":
    main()
