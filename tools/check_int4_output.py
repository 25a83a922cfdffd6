#!/usr/bin/env python3
"""Checks that an int4 checkpoint written by `tessera quantize --to int4-rtn|awq` loads outside
tessera and means the same model there (issue 16 point 4).

  AutoAWQ GEMM form: the tensors are read with AutoAWQ 0.2.9's own unpacking (`unpack_awq` +
    `reverse_awq_order`), dequantized as (q - z) * s in float32 and put into the transformers
    model of the directory's config (transformers' own AWQ loader needs AutoAWQ's GPU kernels or
    intel-extension-for-pytorch, neither of which is here);
  compressed-tensors form: each module is decompressed by compressed-tensors 0.19.0's own
    `PackedQuantizationCompressor.decompress` (scales widened to float32 first, so that it
    computes (q - z) * s without a bf16 rounding). transformers 4.57.1's own loader cannot be used
    for asymmetric files with compressed-tensors 0.19.0: it builds the model's meta zero points
    unpacked ([out, groups]) and then rejects the packed [out/8, groups] tensor of every such
    checkpoint, llm-compressor's included.
Then the logits of a token sequence are compared with `tessera logits` on the same ids
(max |difference| <= 1e-4 * max |logit|, as the golden tests require).

Usage: tools/.venv/bin/python tools/check_int4_output.py DIR [--tessera build/tessera]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch

warnings.simplefilter("ignore")
import transformers.activations as _activations  # noqa: E402

if not hasattr(_activations, "PytorchGELUTanh"):  # AutoAWQ 0.2.9 imports the 4.51 name
    _activations.PytorchGELUTanh = _activations.GELUTanh
from awq.utils.packing_utils import reverse_awq_order, unpack_awq  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402


def ct_weight(state, base, qc):
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    w = qc["config_groups"]["group_0"]["weights"]
    args = QuantizationArgs(num_bits=4, type="int", symmetric=w["symmetric"], strategy=w["strategy"],
                            group_size=w["group_size"])
    sd = {k[len(base) + 1:]: v for k, v in state.items() if k.startswith(base + ".weight_")}
    sd["weight_scale"] = sd["weight_scale"].float()
    return PackedQuantizationCompressor.decompress(sd, QuantizationScheme(targets=["Linear"], weights=args))["weight"].float()


def dequantized_model(directory):
    config = AutoConfig.from_pretrained(directory)
    qc = json.load(open(os.path.join(directory, "config.json")))["quantization_config"]
    del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".safetensors"):
            state.update(load_file(os.path.join(directory, name)))
    weights = {}
    for key, value in state.items():
        if key.endswith(".weight_packed"):
            base = key[: -len(".weight_packed")]
            weights[base + ".weight"] = ct_weight(state, base, qc)
        elif ".weight_" in key:
            continue
        elif key.endswith(".qweight"):
            base = key[: -len(".qweight")]
            codes, zeros = unpack_awq(value, state[base + ".qzeros"], 4)
            codes, zeros = reverse_awq_order(codes, zeros, 4)
            codes, zeros = (codes & 0xF).to(torch.int32), (zeros & 0xF).to(torch.int32)
            scales = state[base + ".scales"].float()
            group = value.shape[0] // scales.shape[0]
            w = (codes - zeros.repeat_interleave(group, 0)).float() * scales.repeat_interleave(group, 0)
            weights[base + ".weight"] = w.t().contiguous()
        elif not key.endswith((".qzeros", ".scales")):
            weights[key] = value.float()
    result = model.load_state_dict(weights, strict=False)
    missing = [k for k in result.missing_keys if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    assert not missing and not result.unexpected_keys, (missing, result.unexpected_keys)
    if config.tie_word_embeddings:
        model.tie_weights()
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--tessera", default="build/tessera")
    args = ap.parse_args()
    torch.set_num_threads(2)
    method = json.load(open(os.path.join(args.dir, "config.json")))["quantization_config"]["quant_method"]
    model = dequantized_model(args.dir)
    model.eval()
    ids = [(7 * i + 3) % model.config.vocab_size for i in range(64)]
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].float().numpy()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.npy")
        subprocess.run([args.tessera, "logits", "-m", args.dir, "--ids", ",".join(map(str, ids)), "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
        got = np.load(out)
    rel = float(np.abs(got - ref).max() / np.abs(ref).max())
    print(json.dumps({"dir": args.dir, "quant_method": method, "loader": "autoawq unpack" if method == "awq"
                      else "compressed-tensors decompress", "max_rel_diff": rel}))
    sys.exit(0 if rel <= 1e-4 else 1)


if __name__ == "__main__":
    main()
