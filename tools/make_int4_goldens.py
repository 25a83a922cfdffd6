#!/usr/bin/env python3
"""int4 (AWQ) checkpoints in both stored forms and their Hugging Face float32 reference outputs.

Spec: ../shared/reference/quantization.md Part B (AutoAWQ GEMM: qweight [in, out/8] in the nibble
order 0,2,4,6,1,3,5,7, qzeros as is, fp16 scales) and dense-decoders.md §10 (compressed-tensors
pack-quantized: weight_packed [out, in/8] natural order, q + 8; weight_zero_point packed along
out, z + 8; symmetric without zero points).

Everything is quantized and packed by the upstream packages themselves (pinned in
requirements.txt): AutoAWQ 0.2.9's `AwqQuantizer.pseudo_quantize_tensor` (round to nearest, per
group, zero point) and `WQLinear_GEMM.from_linear` (its packing), compressed-tensors 0.19.0's
`calculate_qparams` and `PackedQuantizationCompressor.compress`. The dequantized weight is
W = (q - z) * s computed in float32 from the stored integers and scales (exact: at most 5 + 11
significant bits); the script checks that this agrees with each package's own unpacking
(AutoAWQ `unpack_awq` + `reverse_awq_order`, compressed-tensors `unpack_from_int32`) on every
code and zero, and with compressed-tensors' `decompress` to its scale dtype's rounding.

Outputs, under tests/data/int4/ (INT4_GOLDEN_OUT=dir writes elsewhere):
  calib.txt: 48 KiB of the shipped models' training text (never their held-out files), the
    calibration text of the quantizer tests.
  layers.safetensors + layers.json: one random 64 x 256 module per form (AutoAWQ G 64,
    compressed-tensors asymmetric G 64, symmetric channel), every nibble position and value used,
    with its dequantized float32 weight `<module>.dequantized` [out, in]: the unpacking test.
  <model>/: a checkpoint made from tests/data/dense_golden/<base> with its linear modules
    quantized, config.json with the quantization_config the packages write, golden.json
    (prompt_ids, greedy_ids: 32 plain-argmax steps, min_greedy_margin) and logits.npy (float32 [prompt + 32, vocab]) of
    transformers float32 eager with the dequantized weights:
      llama_awq      llama_a, AutoAWQ GEMM, group 32 (llama3 rope)
      qwen2_awq      qwen2_a, AutoAWQ GEMM, group 32 (q/k/v biases, stored fp16 as AutoAWQ does)
      llama_ct       llama_b, compressed-tensors asymmetric, group 32 (tied lm_head, every bias)
      qwen3_ct       qwen3_a, compressed-tensors asymmetric, group 16 (q/k norm; groups of 16 take
                     the exact kernel on the fast path too). (qwen3_b's config is in the
                     transformers v5 spelling, which 4.57's from_pretrained does not read.)
      qwen3_moe_ct   qwen3_moe_a, compressed-tensors symmetric, channel (experts; the router
                     ignored, as llm-compressor recipes do; down_proj groups of 8 take the exact
                     kernel on the fast path too)

Deterministic (seeded, one thread): a rerun rewrites the files byte for byte.
Setup: tools/.venv/bin/pip install --no-deps -r tools/requirements-int4.txt (on top of requirements.txt).
Usage: tools/.venv/bin/python tools/make_int4_goldens.py
"""
import json
import os
import sys
import warnings

import numpy as np
import torch
from safetensors.torch import load_file, save_file

warnings.simplefilter("ignore")
# AutoAWQ 0.2.9 (its last release, tested with transformers 4.51) imports an activation class
# transformers 4.57 renamed; only its quantizer and packer are used here.
import transformers.activations as _activations  # noqa: E402

if not hasattr(_activations, "PytorchGELUTanh"):
    _activations.PytorchGELUTanh = _activations.GELUTanh
from awq.modules.linear.gemm import WQLinear_GEMM  # noqa: E402
from awq.quantize.quantizer import AwqQuantizer  # noqa: E402
from awq.utils.packing_utils import reverse_awq_order, unpack_awq  # noqa: E402
from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor  # noqa: E402
from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32  # noqa: E402
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme  # noqa: E402
from compressed_tensors.quantization.utils import calculate_qparams  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

import awq  # noqa: E402
import compressed_tensors  # noqa: E402
import transformers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DENSE = os.path.join(ROOT, "tests", "data", "dense_golden")
OUT = os.environ.get("INT4_GOLDEN_OUT", os.path.join(ROOT, "tests", "data", "int4"))
GREEDY = 32


# ---- AutoAWQ GEMM ---------------------------------------------------------------------------

def awq_quantize(weight, group):
    """AutoAWQ's round-to-nearest with zero points, packed by WQLinear_GEMM: (qweight, qzeros,
    scales fp16, dequantized float32 [out, in])."""
    quantizer = AwqQuantizer.__new__(AwqQuantizer)  # only its pseudo-quantizer's settings
    quantizer.w_bit, quantizer.group_size, quantizer.zero_point = 4, group, True
    fake, scales, zeros = quantizer.pseudo_quantize_tensor(weight.clone())
    linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    linear.weight.data = fake
    packed = WQLinear_GEMM.from_linear(linear, 4, group, scales=scales.t().contiguous(), zeros=zeros.t().contiguous())
    qweight, qzeros, fp16_scales = packed.qweight, packed.qzeros, packed.scales
    # AutoAWQ's own unpacking of its packing: logical [in, out] codes and [in/G, out] zeros.
    codes, zs = unpack_awq(qweight, qzeros, 4)
    codes, zs = reverse_awq_order(codes, zs, 4)
    codes, zs = torch.bitwise_and(codes, 0xF).to(torch.int32), torch.bitwise_and(zs, 0xF).to(torch.int32)
    # The spec's reading (quantization.md B.2): logical column 8c + j in nibble REV[j].
    rev = [0, 4, 1, 5, 2, 6, 3, 7]
    shifts = torch.tensor([4 * rev[j] for j in range(8)], dtype=torch.int32)
    mine = ((qweight[:, :, None] >> shifts[None, None, :]) & 0xF).reshape(qweight.shape[0], -1)
    mine_z = ((qzeros[:, :, None] >> shifts[None, None, :]) & 0xF).reshape(qzeros.shape[0], -1)
    assert torch.equal(mine, codes) and torch.equal(mine_z, zs), "AWQ unpack order"
    deq = (codes - zs.repeat_interleave(group, dim=0)).float() * fp16_scales.float().repeat_interleave(group, dim=0)
    # Round to nearest of the float weights (up to fp16 scale rounding, no clamp surprises).
    assert torch.allclose(deq.t(), fake, atol=float(fp16_scales.abs().max()) * 1e-2)
    return qweight.contiguous(), qzeros.contiguous(), fp16_scales.contiguous(), deq.t().contiguous()


# ---- compressed-tensors pack-quantized --------------------------------------------------------

def ct_quantize(weight, group, symmetric, scale_dtype=torch.bfloat16):
    """compressed-tensors' qparams and packer: (state dict of the module's tensors, dequantized
    float32 [out, in]). group None: channel strategy."""
    out, inp = weight.shape
    strategy = "channel" if group is None else "group"
    args = QuantizationArgs(num_bits=4, type="int", symmetric=symmetric, strategy=strategy, group_size=group)
    g = inp if group is None else group
    w = weight.reshape(out, inp // g, g)
    scale, zp = calculate_qparams(w.amin(dim=2), w.amax(dim=2), args)
    scale = scale.to(scale_dtype)  # stored in the model dtype, as llm-compressor does
    zp = torch.round(zp).to(torch.int8)
    sd = {"weight": weight, "weight_scale": scale, "weight_zero_point": zp}
    packed = PackedQuantizationCompressor.compress(sd, QuantizationScheme(targets=["Linear"], weights=args))
    codes = unpack_from_int32(packed["weight_packed"], 4, torch.Size([out, inp])).to(torch.int32)
    # The spec's reading (dense-decoders.md §10): element k in word k/8 at bits 4 (k mod 8), q + 8.
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    raw = packed["weight_packed"]
    mine = ((raw[:, :, None] >> shifts[None, None, :]) & 0xF).reshape(out, -1)[:, :inp] - 8
    assert torch.equal(mine, codes), "compressed-tensors unpack order"
    if symmetric:
        assert "weight_zero_point" not in packed
        z = torch.zeros(out, inp // g, dtype=torch.int32)
    else:
        z = unpack_from_int32(packed["weight_zero_point"], 4, torch.Size([out, inp // g]), packed_dim=0).to(torch.int32)
        zraw = packed["weight_zero_point"]
        mine_z = ((zraw.t()[:, :, None] >> shifts[None, None, :]) & 0xF).reshape(zraw.shape[1], -1).t()[:out] - 8
        assert torch.equal(mine_z, z), "compressed-tensors zero-point packing"
        assert torch.equal(z, zp.to(torch.int32))
    deq = (codes - z.repeat_interleave(g, dim=1)).float() * scale.float().repeat_interleave(g, dim=1)
    decompressed = PackedQuantizationCompressor.decompress(dict(packed), QuantizationScheme(targets=["Linear"], weights=args))
    assert torch.allclose(decompressed["weight"].float(), deq, rtol=1e-2, atol=1e-6), "compressed-tensors decompress"
    state = {k: v.contiguous() for k, v in packed.items()}
    return state, deq.contiguous()


# ---- the unpacking fixtures ---------------------------------------------------------------------

def make_layers():
    gen = torch.Generator().manual_seed(4)
    out, inp = 64, 256  # AutoAWQ packs correctly only when out % 32 == 0
    tensors, meta = {}, {}
    forms = [("awq_g64", "awq", 64, False), ("ct_asym_g64", "ct", 64, False), ("ct_sym_channel", "ct", None, True)]
    for name, kind, group, symmetric in forms:
        # Rows with different ranges and offsets, so zero points take many values.
        w = torch.randn(out, inp, generator=gen) * torch.rand(out, 1, generator=gen) + torch.randn(out, 1, generator=gen) * 0.5
        if kind == "awq":
            qweight, qzeros, scales, deq = awq_quantize(w, group)
            tensors.update({f"{name}.qweight": qweight, f"{name}.qzeros": qzeros, f"{name}.scales": scales})
            codes = unpack_awq(qweight, qzeros, 4)[0]
        else:
            state, deq = ct_quantize(w, group, symmetric)
            tensors.update({f"{name}.{k}": v for k, v in state.items()})
        tensors[f"{name}.dequantized"] = deq
        meta[name] = {"form": kind, "group": group if group is not None else -1, "symmetric": symmetric,
                      "out": out, "in": inp}
    save_file(tensors, os.path.join(OUT, "layers.safetensors"))
    with open(os.path.join(OUT, "layers.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")


# ---- the models ---------------------------------------------------------------------------------

MODELS = {
    "llama_awq": ("llama_a", "awq", 32, False),
    "qwen2_awq": ("qwen2_a", "awq", 32, False),
    "llama_ct": ("llama_b", "ct", 32, False),
    "qwen3_ct": ("qwen3_a", "ct", 16, False),
    "qwen3_moe_ct": ("qwen3_moe_a", "ct", None, True),
}


def linear_modules(model):
    """(name, module) of every linear module in the decoder layers (lm_head stays 16-bit)."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n.startswith("model.layers.")]


def quantization_config(kind, group, symmetric, ignore):
    if kind == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True, "version": "gemm",
                "modules_to_not_convert": None}
    weights = {"num_bits": 4, "type": "int", "symmetric": symmetric, "strategy": "channel" if group is None else "group",
               "group_size": group, "dynamic": False, "actorder": None, "observer": "minmax"}
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "ignore": ignore, "config_groups": {"group_0": {"targets": ["Linear"], "format": "pack-quantized",
                                                             "weights": weights, "input_activations": None,
                                                             "output_activations": None}},
            "kv_cache_scheme": None, "version": compressed_tensors.__version__}


def make_model(name, base, kind, group, symmetric):
    src = os.path.join(DENSE, base)
    out_dir = os.path.join(OUT, name)
    os.makedirs(out_dir, exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    stored = load_file(os.path.join(src, "model.safetensors"))
    golden = json.load(open(os.path.join(src, "golden.json")))
    ignore = ["lm_head"]
    tensors = {k: v for k, v in stored.items()}
    for module_name, module in linear_modules(model):
        if module_name.endswith(".mlp.gate"):  # the MoE router stays 16-bit
            if kind == "ct" and len(ignore) == 1:
                ignore.append("re:.*mlp\\.gate$")
            continue
        weight = module.weight.data.float()
        del tensors[module_name + ".weight"]
        if kind == "awq":
            qweight, qzeros, scales, deq = awq_quantize(weight, group)
            tensors.update({f"{module_name}.qweight": qweight, f"{module_name}.qzeros": qzeros,
                            f"{module_name}.scales": scales})
            if module.bias is not None:  # AutoAWQ stores the bias in fp16
                bias = module.bias.data.half()
                tensors[module_name + ".bias"] = bias
                module.bias.data = bias.float()
        else:
            state, deq = ct_quantize(weight, group, symmetric)
            tensors.update({f"{module_name}.{k}": v for k, v in state.items()})
        module.weight.data = deq
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    config = json.load(open(os.path.join(src, "config.json")))
    config["quantization_config"] = quantization_config(kind, group, symmetric, ignore)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(src, "generation_config.json")) as f:
        gen_config = f.read()
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        f.write(gen_config)

    # Greedy by plain argmax, step by step (generate()'s min_new_tokens would mask eos ids, which
    # the quantized models do pick; tessera's greedy test takes the plain argmax).
    seq = list(golden["prompt_ids"])
    with torch.no_grad():
        for _ in range(GREEDY):
            seq.append(int(torch.argmax(model(torch.tensor([seq]), use_cache=False).logits[0, -1])))
        logits = model(torch.tensor([seq]), use_cache=False).logits[0].float().numpy()
    P = len(golden["prompt_ids"])
    greedy = seq[P:]
    argmax = [int(np.argmax(logits[P - 1 + i])) for i in range(GREEDY)]
    assert greedy == argmax, f"{name}: step-by-step greedy {greedy} != argmax of one pass {argmax}"
    margins = []
    for i in range(GREEDY):
        top = np.sort(logits[P - 1 + i])[-2:]
        margins.append(float(top[1] - top[0]))
    record = {"base": base, "form": kind, "group_size": group if group is not None else -1, "symmetric": symmetric,
              "prompt_ids": golden["prompt_ids"], "greedy_ids": greedy, "min_greedy_margin": min(margins),
              "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                           "autoawq": awq.__version__, "compressed_tensors": compressed_tensors.__version__}}
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    np.save(os.path.join(out_dir, "logits.npy"), logits.astype(np.float32))
    print(f"{name}: {len(tensors)} tensors, greedy margin {min(margins):.3g}, max |logit| {np.abs(logits).max():.3g}")


def make_calibration_text():
    """calib.txt: the quantizers' calibration text, from the shipped models' training split (the
    Python 3.11 standard library files tools/train_tiny_models.py trains on; never the held-out
    files): the first files of the split in its order, up to 48 KiB (> 8 windows of 512 tokens)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import train_tiny_models as training  # noqa: E402
    import hashlib
    parts, size = [], 0
    for rel in training.corpus_files():
        if hashlib.sha256(rel.encode()).digest()[0] < training.HELDOUT_BYTE:
            continue
        with open(os.path.join(training.STDLIB, rel), "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        parts.append(text)
        size += len(data)
        if size >= 48 * 1024:
            break
    with open(os.path.join(OUT, "calib.txt"), "w", encoding="utf-8") as f:
        f.write("\n\n".join(parts)[:48 * 1024])


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    make_calibration_text()
    make_layers()
    for name, (base, kind, group, symmetric) in MODELS.items():
        if len(sys.argv) > 1 and name not in sys.argv[1:]:
            continue
        make_model(name, base, kind, group, symmetric)


if __name__ == "__main__":
    main()
