#!/usr/bin/env python3
"""Reference data for the shipped trained models (models/tiny-gpt-oss, models/tiny-llama,
models/tiny-deepseek), from Hugging Face transformers in float32 (eager attention), for
tests/trained_model_test.cpp. tiny-deepseek's FP8 block weights are decoded here (transformers
4.57.1 loads FP8 checkpoints only on a GPU) and its router masks unchosen groups with -inf as
DeepSeek's code does (golden_generation.route_deepseek_v3_like_deepseek):

  tests/data/trained/heldout_sample.txt   the first held-out files of the training corpus
                                          (tools/train_tiny_models.py), about 24 KB
  tests/data/trained/<model>/perplexity.json
      windowed perplexity of that text, for each (context, stride) below, with exactly the
      windows of `tessera perplexity` (src/engine/perplexity.h: windows from position 0 of a fresh
      cache at 0, stride, 2 stride, ...; each scores the tokens the previous one did not, from
      the logits of the position before), NLLs in float64 from the float32 logits
  tests/data/trained/<model>/{golden.json, logits.npy}
      a Python prompt, its 32-token greedy continuation (full forward passes, no cache) and the
      float32 logits of prompt + continuation

Usage: tools/.venv/bin/python tools/make_trained_goldens.py [--corpus build/train/corpus] [--only NAME]
"""
import argparse
import json
import os

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "trained")
MODELS = {"tiny-gpt-oss": transformers.GptOssForCausalLM, "tiny-llama": transformers.LlamaForCausalLM,
          "tiny-deepseek": transformers.DeepseekV3ForCausalLM}
WINDOWS = [(256, 256), (256, 64), (1024, 1024)]
SAMPLE_BYTES = 24000
PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n    \"\"\"Print the size of every file named on the command line.\"\"\"\n"
NEW_TOKENS = 32


def sample_text(corpus):
    with open(os.path.join(corpus, "heldout.txt"), encoding="utf-8") as f:
        text = f.read()
    cut = text.rfind("\n", 0, SAMPLE_BYTES)  # whole lines
    return text[:cut + 1]


def windows(n, context, stride):
    """(begin, end, first) of each window of `tessera perplexity` over n tokens: the window runs
    tokens [begin, end) from a fresh context and scores tokens [first, end)."""
    count = 1 if n <= context else 1 + (n - context + stride - 1) // stride
    scored_end = 1
    for w in range(count):
        begin = w * stride
        end = min(begin + context, n)
        yield begin, end, max(scored_end, begin + 1)
        scored_end = max(scored_end, end)


@torch.no_grad()
def perplexity(model, ids, context, stride):
    nll, count = [], 0
    for begin, end, first in windows(len(ids), context, stride):
        logits = model(torch.tensor([ids[begin:end]]), use_cache=False).logits[0].double()
        logp = torch.log_softmax(logits, dim=-1)
        for t in range(first, end):
            nll.append(-float(logp[t - 1 - begin, ids[t]]))
        count += 1
    nll = np.array(nll)
    return {"context": context, "stride": stride, "windows": count, "scored": len(nll),
            "mean_nll": float(nll.mean()), "perplexity": float(np.exp(nll.mean()))}


@torch.no_grad()
def greedy(model, prompt_ids):
    seq = torch.tensor([prompt_ids])
    margins = []
    for _ in range(NEW_TOKENS):
        last = model(seq, use_cache=False).logits[0, -1]
        top2 = torch.topk(last, 2).values
        margins.append(float(top2[0] - top2[1]))
        seq = torch.cat([seq, last.argmax().view(1, 1)], dim=1)
    logits = model(seq, use_cache=False).logits[0].float().numpy()
    return seq[0].tolist(), logits, min(margins)


def load_model(name, cls, model_dir):
    if name != "tiny-deepseek":
        return cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").float().eval()
    from safetensors.torch import load_file
    from golden_generation import route_deepseek_v3_like_deepseek
    from make_deepseek_golden import fp8_dequantize
    route_deepseek_v3_like_deepseek()
    config = transformers.AutoConfig.from_pretrained(model_dir)
    assert config.quantization_config["weight_block_size"] == [128, 128], config.quantization_config
    del config.quantization_config
    config._attn_implementation = "eager"
    model = cls(config)
    stored = load_file(os.path.join(model_dir, "model.safetensors"))
    values = {}
    for key, value in stored.items():
        if key.endswith("_scale_inv"):
            continue
        scale = stored.get(key + "_scale_inv")
        values[key] = fp8_dequantize(value, scale, 128) if scale is not None else value.float()
    model.load_state_dict(values)
    return model.float().eval()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", default=os.path.join(ROOT, "build", "train", "corpus"))
    p.add_argument("--only", choices=sorted(MODELS))
    args = p.parse_args()
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    text = sample_text(args.corpus)
    with open(os.path.join(OUT, "heldout_sample.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    for name, cls in MODELS.items():
        if args.only and name != args.only:
            continue
        model_dir = os.path.join(ROOT, "models", name)
        tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        model = load_model(name, cls, model_dir)
        ids = tok.encode(text).ids
        out = os.path.join(OUT, name)
        os.makedirs(out, exist_ok=True)
        results = [perplexity(model, ids, c, s) for c, s in WINDOWS]
        with open(os.path.join(out, "perplexity.json"), "w") as f:
            json.dump({"text": "tests/data/trained/heldout_sample.txt", "tokens": len(ids), "results": results,
                       "generator": {"transformers": transformers.__version__, "torch": torch.__version__,
                                     "dtype": "float32", "attn_implementation": "eager"}}, f, indent=1)
        prompt_ids = tok.encode(PROMPT).ids
        seq, logits, margin = greedy(model, prompt_ids)
        np.save(os.path.join(out, "logits.npy"), logits.astype(np.float32))
        golden = {"prompt": PROMPT, "prompt_ids": prompt_ids, "greedy_ids": seq[len(prompt_ids):],
                  "greedy_text": tok.decode(seq[len(prompt_ids):]), "min_greedy_margin": margin,
                  "max_abs_logit": float(np.abs(logits).max()),
                  "generator": {"transformers": transformers.__version__, "torch": torch.__version__,
                                "dtype": "float32", "attn_implementation": "eager"}}
        with open(os.path.join(out, "golden.json"), "w") as f:
            json.dump(golden, f, indent=1)
        print(f"{name}: {len(ids)} tokens; " + ", ".join(
            f"ctx {r['context']} stride {r['stride']}: ppl {r['perplexity']:.4f}" for r in results) +
            f"; greedy {golden['greedy_text']!r} (min margin {margin:.3f})")


if __name__ == "__main__":
    main()
