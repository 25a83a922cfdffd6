#!/usr/bin/env python3
"""GGUF files made by llama.cpp's own tools, run by tessera and by llama.cpp, against transformers
(issue 30, "What it must show"; numbers go to docs/ACCURACY.md).

For each tiny checkpoint with transformers float32 logits (tests/data/deepseek_golden: v2_a, v2_b,
v3_a, v3_long, their expert groups written as later converters write them; a Qwen3-MoE made here; tests/data/dense_golden: llama_b,
mistral_b, qwen2_b, qwen3_a, qwen3_b; llama_a's Llama 3 rope scaling too), llama.cpp's
convert_hf_to_gguf.py writes F32, BF16 and Q8_0 files and `llama-quantize` (a llama.cpp build's,
given on the command line) makes Q4_0 and Q6_K from the F32 file. For every file:
  reference  transformers float32 logits of the weights the file holds: the golden logits for F32;
             for the other types every tensor is read back with gguf-py and dequantized
             (gguf.quants.dequantize, ggml's definitions), the llama.cpp layout undone (q/k rows of
             the llama architecture), loaded into the transformers model, and run;
  tessera    `tessera logits -m FILE.gguf --precision exact --kv-type f32`, and the fast path;
  llama.cpp  the same ids through llama-cpp-python (logits_all).
Printed: max |logits - reference| / max |reference| over every position, and greedy agreement.

Usage: tools/.venv/bin/python tools/compare_gguf_goldens.py LLAMA_QUANTIZE [OUT_DIR [MODEL,MODEL...]]
Needs tools/requirements-llama-cpp.txt (llama-cpp-python) on top of tools/requirements.txt.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from compare_llama_cpp import ROOT, llama_cpp_source

GOLDENS = os.path.join(ROOT, "tests", "data", "dense_golden")
DEEPSEEK_GOLDENS = os.path.join(ROOT, "tests", "data", "deepseek_golden")
MODELS = ["llama_a", "llama_b", "mistral_b", "qwen2_b", "qwen3_a", "qwen3_b"]
# The DeepSeek goldens whose configs a deepseek2 file records (v3_b's mscale differs from its
# mscale_all_dim, which no deepseek2 file can hold; tests/gguf_model_test.cpp).
DEEPSEEK = ["v2_a", "v2_b", "v3_a", "v3_long"]

CONVERT = """
import sys
sys.path.insert(0, {src!r})
sys.path.insert(0, {gguf!r})
import convert_hf_to_gguf as c
# The golden checkpoints have no tokenizer (ids go in directly): write the converter's vocab-less form.
for cls in vars(c).values():
    if isinstance(cls, type) and issubclass(cls, c.TextModel):
        cls.set_vocab = lambda self: (self._set_vocab_none(), self.gguf_writer.add_vocab_size(self.hparams["vocab_size"]))
# Expert groups as later converters record them (TextModel.set_gguf_parameters writes n_group and
# topk_group as expert_group_count / expert_group_used_count; 0.3.16's writes neither).
_set_params = c.DeepseekV2Model.set_gguf_parameters
def _with_groups(self):
    _set_params(self)
    if self.hparams.get("n_group") is not None:
        self.gguf_writer.add_uint32("deepseek2.expert_group_count", self.hparams["n_group"])
    if self.hparams.get("topk_group") is not None:
        self.gguf_writer.add_uint32("deepseek2.expert_group_used_count", self.hparams["topk_group"])
c.DeepseekV2Model.set_gguf_parameters = _with_groups
sys.argv = ["convert_hf_to_gguf.py", {model!r}, "--outtype", {outtype!r}, "--outfile", {out!r}]
c.main()
"""


SYNTHETIC = {}  # name -> directory of a checkpoint made here (tiny-qwen3-moe)


def tiny_qwen3_moe(out):
    """A Qwen3-MoE checkpoint with every layer sparse (a GGUF records no dense layers among sparse
    ones, so the qwen3_moe goldens cannot be used) and 256-wide rows (every k-quant applies):
    transformers' random initialisation, seeded, saved as safetensors."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    d = os.path.join(out, "tiny-qwen3-moe")
    if not os.path.exists(os.path.join(d, "config.json")):
        torch.manual_seed(20261206)
        config = Qwen3MoeConfig(vocab_size=4096, hidden_size=256, intermediate_size=256, moe_intermediate_size=256,
                                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, mlp_only_layers=[],
                                decoder_sparse_step=1, max_position_embeddings=512, rope_theta=1e6,
                                tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
        model = Qwen3MoeForCausalLM(config).to(torch.float32)
        with torch.no_grad():  # the default init (std 0.02) leaves the logits nearly flat
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 0.08)
        model.save_pretrained(d, safe_serialization=True)
    return d


def checkpoint(name):
    if name in SYNTHETIC:
        return SYNTHETIC[name]
    if name.startswith("tiny-"):
        return os.path.join(ROOT, "models", name)
    return os.path.join(DEEPSEEK_GOLDENS if name in DEEPSEEK else GOLDENS, name)


def convert(name, outtype, out):
    src = llama_cpp_source()
    path = os.path.join(out, f"{name}-{outtype}.gguf")
    code = CONVERT.format(src=src, gguf=os.path.join(src, "gguf-py"), model=checkpoint(name), outtype=outtype, out=path)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return path


def dequantized_model(name, path):
    """The transformers model of `name` holding exactly the weights of GGUF file `path`."""
    sys.path.insert(0, os.path.join(llama_cpp_source(), "gguf-py"))
    import gguf
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(checkpoint(name), dtype=torch.float32, attn_implementation="eager")
    cfg = model.config
    if cfg.model_type == "deepseek_v2":
        from make_deepseek_golden import patch_v2_scaling
        patch_v2_scaling(model)  # the goldens' V2 softmax scale (tests/data/deepseek_golden/README.md)
    reader = gguf.GGUFReader(path)
    arch = str(bytes(reader.fields["general.architecture"].parts[-1]), "utf-8")
    names = gguf.get_tensor_name_map({v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}[arch], cfg.num_hidden_layers)
    tensors = {t.name: t for t in reader.tensors}
    state = model.state_dict()
    def value(name):
        t = tensors[name]
        shape = [int(d) for d in reversed(t.shape)] if len(t.shape) > 1 else [int(t.shape[0])]
        return gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
    for hf_name in state:
        layer = hf_name.split(".")[2] if hf_name.startswith("model.layers.") else None
        if ".mlp.experts." in hf_name:  # per-expert slices of ffn_{gate,up,down}_exps [E, out, in]
            expert, proj = hf_name.split(".")[5], hf_name.split(".")[6].split("_")[0]
            state[hf_name] = torch.from_numpy(value(f"blk.{layer}.ffn_{proj}_exps.weight")[int(expert)].copy())
            continue
        if hf_name.endswith("e_score_correction_bias"):
            state[hf_name] = torch.from_numpy(value(f"blk.{layer}.exp_probs_b.bias"))
            continue
        if hf_name.endswith("kv_b_proj.weight"):  # attn_k_b [H, C, nope] transposed back, attn_v_b [H, v, C]
            k_b, v_b = value(f"blk.{layer}.attn_k_b.weight"), value(f"blk.{layer}.attn_v_b.weight")
            merged = np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1).reshape(state[hf_name].shape)
            state[hf_name] = torch.from_numpy(np.ascontiguousarray(merged))
            continue
        base, suffix = hf_name.rsplit(".", 1)
        gguf_name = names.get_name(base)
        if gguf_name is None or f"{gguf_name}.{suffix}" not in tensors:
            if hf_name == "lm_head.weight" and cfg.tie_word_embeddings:
                continue
            raise KeyError(f"{hf_name}: no tensor in {path}")
        t = tensors[f"{gguf_name}.{suffix}"]
        values = gguf.quants.dequantize(t.data, t.tensor_type).reshape(state[hf_name].shape).astype(np.float32)
        if arch == "llama" and base.endswith(("q_proj", "k_proj")):
            heads = cfg.num_attention_heads if base.endswith("q_proj") else cfg.num_key_value_heads
            # LlamaModel.permute undone: HF row h D + j D/2 + i is stored at h D + 2 i + j.
            values = values.reshape(heads, values.shape[0] // heads // 2, 2, *values.shape[1:]).swapaxes(1, 2)
            values = values.reshape(state[hf_name].shape)
        state[hf_name] = torch.from_numpy(np.ascontiguousarray(values))
    model.load_state_dict(state)
    return model.eval()


def tessera_logits(path, ids, fast):
    with tempfile.NamedTemporaryFile(suffix=".npy") as f:
        args = [os.path.join(ROOT, "build", "tessera"), "logits", "-m", path, "--ids", ",".join(map(str, ids)),
                "--out", f.name, "--kv-type", "f32"]
        args += ["--precision", "fast"] if fast else ["--precision", "exact"]
        subprocess.run(args, check=True, capture_output=True)
        return np.load(f.name)


def llama_cpp_logits(path, ids):
    from llama_cpp import Llama
    llm = Llama(model_path=path, n_ctx=len(ids) + 8, n_batch=len(ids), n_ubatch=len(ids), logits_all=True,
                verbose=False, n_threads=2)
    llm.eval(ids)
    return np.array(llm.scores[:len(ids)], dtype=np.float32)


def relative(got, ref):
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def main():
    quantize = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="gguf_goldens_")
    os.makedirs(out, exist_ok=True)
    rows = []
    SYNTHETIC["tiny-qwen3-moe"] = tiny_qwen3_moe(out)
    # The dense goldens (64-wide rows: llama-quantize keeps k-quant types off them), tiny-llama and
    # tiny-qwen3-moe (256-wide rows: every k-quant applies), whose reference is transformers run here.
    for name in sys.argv[3].split(",") if len(sys.argv) > 3 else MODELS + DEEPSEEK + ["tiny-llama", "tiny-qwen3-moe"]:
        if name.startswith("tiny-"):
            ids = list(np.random.default_rng(7).integers(0, 4096, 64))
        else:
            golden = json.load(open(os.path.join(checkpoint(name), "golden.json")))
            ids = golden["prompt_ids"] + golden["greedy_ids"]
        ids = [int(i) for i in ids]
        files = {t: convert(name, t, out) for t in ["f32", "bf16", "q8_0"]}
        # ik_llama.cpp's llama-quantize (the one this project could build) refuses mainline's
        # deepseek2 files unless their MLA sizes are DeepSeek's own (576 / 512 / 64): the converter's
        # q8_0 is the quantized DeepSeek file here.
        quantized = [] if name in DEEPSEEK else ["Q4_0", "Q6_K"] + (["Q4_K_M", "Q5_K_M"] if name.startswith("tiny-") else [])
        for t in quantized:
            files[t] = os.path.join(out, f"{name}-{t}.gguf")
            subprocess.run([quantize, files["f32"], files[t], t], check=True, capture_output=True)
        for t, path in files.items():
            row = {"model": name, "type": t, "positions": len(ids)}
            # A file one of the readers refuses is reported, not fatal.
            def attempt(key, fn):
                try:
                    return fn()
                except Exception as e:
                    row[key + "_error"] = str(e).strip().splitlines()[-1][:300]
                    return None
            if t == "f32" and not name.startswith("tiny-"):
                ref = np.load(os.path.join(checkpoint(name), "logits.npy"))
            else:
                ref = attempt("reference", lambda: dequantized_model(name, path)(torch.tensor([ids])).logits[0].detach().numpy())
            exact = attempt("tessera", lambda: tessera_logits(path, ids, False))
            fast = attempt("tessera_fast", lambda: tessera_logits(path, ids, True))
            theirs = attempt("llama_cpp", lambda: llama_cpp_logits(path, ids))
            for key, got in [("tessera_exact", exact), ("tessera_fast", fast), ("llama_cpp", theirs)]:
                if got is not None and ref is not None:
                    row[key] = relative(got, ref)
            if exact is not None and theirs is not None:
                row["tessera_vs_llama_cpp"] = relative(exact, theirs)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return 0 if all(r.get("tessera_exact", 1.0) <= 1e-4 or r["model"] == "llama_a" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
