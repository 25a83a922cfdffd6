#!/usr/bin/env python3
"""AutoAWQ's own quantizer on a tessera model directory (the comparison of issue 16 point 5).

Runs AutoAWQ 0.2.9 (pinned in requirements-int4.txt; CPU) on an unquantized Llama-family
directory with the given calibration text and writes its AutoAWQ GEMM checkpoint, which tessera
loads as downloaded. Calibration: the text is tokenized with the model's tokenizer and cut into
`--samples` blocks of `--window` tokens, as AutoAWQ's own calib_data does with its default
(pile-val) text, which is not reachable here.

Usage: tools/.venv/bin/python tools/autoawq_quantize.py MODEL_DIR CALIB.txt OUT_DIR
         [--group 128] [--samples 32] [--window 512]
"""
import argparse
import json
import os
import shutil
import warnings

import torch

warnings.simplefilter("ignore")
import transformers.activations as _activations  # noqa: E402

if not hasattr(_activations, "PytorchGELUTanh"):  # AutoAWQ 0.2.9 imports the 4.51 name
    _activations.PytorchGELUTanh = _activations.GELUTanh
from awq import AutoAWQForCausalLM  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("calib")
    ap.add_argument("out")
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--window", type=int, default=512)
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    ids = tokenizer(open(args.calib, encoding="utf-8").read(), add_special_tokens=False)["input_ids"]
    n = min(args.samples, len(ids) // args.window)
    # AutoAWQ takes text samples; decoding each window gives back the same tokens for this
    # byte-level BPE (checked below), so the blocks it makes are these windows.
    texts = [tokenizer.decode(ids[i * args.window:(i + 1) * args.window]) for i in range(n)]
    for i, t in enumerate(texts):
        assert tokenizer(t, add_special_tokens=False)["input_ids"] == ids[i * args.window:(i + 1) * args.window]
    model = AutoAWQForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32, device_map="cpu")
    quant_config = {"zero_point": True, "q_group_size": args.group, "w_bit": 4, "version": "GEMM"}
    model.quantize(tokenizer, quant_config=quant_config, calib_data=texts, n_parallel_calib_samples=None,
                   max_calib_samples=n, max_calib_seq_len=args.window)
    model.save_quantized(args.out)
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        src = os.path.join(args.model, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(args.out, name))
    print(json.dumps({"out": args.out, "samples": n, "window": args.window, "group": args.group}))


if __name__ == "__main__":
    main()
