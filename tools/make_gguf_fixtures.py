#!/usr/bin/env python3
"""GGUF fixtures written by llama.cpp's own gguf-py (issue 30): tests/data/gguf/.

fixture.gguf holds one metadata key of every GGUF value type (arrays of several element types
too) and one small tensor of each ggml type tessera reads or will read: f32, f16, bf16, q8_0,
q4_0, q4_1, q5_0, q5_1, mxfp4 (quantized by gguf-py from random values) and q2_K..q6_K (random
blocks with sane f16 scales: gguf-py has no K-quant quantizer), shapes with more than one row.
expected.json lists what a reader must find (metadata values, tensor names, types, ne, offsets,
byte sizes); <tensor>.npy holds gguf-py's dequantization of each tensor (float32, outermost
dimension first), the reference for tessera's exact dequantization.

gguf-py comes from llama.cpp's sources inside the llama-cpp-python sdist pinned in
tools/requirements-llama-cpp.txt (tools/compare_llama_cpp.py downloads it into
build/llama_cpp_src). Usage: tools/.venv/bin/python tools/make_gguf_fixtures.py
"""
import glob
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "gguf")
SRC = glob.glob(os.path.join(ROOT, "build", "llama_cpp_src", "llama_cpp_python-*", "vendor", "llama.cpp", "gguf-py"))
if not SRC:
    sys.exit("make_gguf_fixtures: unpack llama-cpp-python's sdist into build/llama_cpp_src first "
             "(tools/compare_llama_cpp.py does)")
sys.path.insert(0, SRC[0])
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q, GGUFValueType as V  # noqa: E402

rng = np.random.default_rng(30)

# Offsets of the f16 scale fields inside a K-quant block (ggml-common.h), set to sane values so
# the random blocks dequantize to finite numbers.
K_SCALES = {Q.Q2_K: (84, [80, 82]), Q.Q3_K: (110, [108]), Q.Q4_K: (144, [0, 2]), Q.Q5_K: (176, [0, 2]),
            Q.Q6_K: (210, [208])}


def k_blocks(qtype, rows, cols):
    size, fields = K_SCALES[qtype]
    blocks = rng.integers(0, 256, size=(rows * cols // 256, size), dtype=np.uint8)
    for at in fields:
        d = rng.uniform(1e-3, 5e-2, size=blocks.shape[0]).astype(np.float16)
        blocks[:, at:at + 2] = d.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, cols // 256 * size)


def main():
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "fixture.gguf")
    w = gguf.GGUFWriter(path, "llama")
    meta = [
        ("t.uint8", 200, V.UINT8), ("t.int8", -100, V.INT8), ("t.uint16", 65000, V.UINT16),
        ("t.int16", -32000, V.INT16), ("t.uint32", 4000000000, V.UINT32), ("t.int32", -2000000000, V.INT32),
        ("t.float32", 0.1, V.FLOAT32), ("t.bool", True, V.BOOL), ("t.string", "h\u00e9llo \u4e16\u754c", V.STRING),
        ("t.uint64", 2 ** 60, V.UINT64), ("t.int64", -2 ** 60, V.INT64), ("t.float64", 1e300, V.FLOAT64),
    ]
    for key, value, vtype in meta:
        w.add_key_value(key, value, vtype)
    arrays = [("t.tokens", ["<s>", "", "\u2581the", "<0x0A>"], V.STRING), ("t.types", [1, -2, 3], V.INT32),
              ("t.scores", [0.5, -1.25, 3.0], V.FLOAT32), ("t.bytes", [0, 255], V.UINT8), ("t.flags", [True, False], V.BOOL)]
    for key, value, sub in arrays:
        w.add_key_value(key, value, V.ARRAY, sub_type=sub)

    tensors = []

    def add(name, qtype, data, shape):
        # Quantized data goes in as its bytes [rows, row bytes]; gguf-py derives the shape.
        w.add_tensor(name, data, raw_dtype=qtype if qtype not in (Q.F32, Q.F16) else None)
        deq = data.astype(np.float32) if qtype in (Q.F32, Q.F16) else gguf.quants.dequantize(data, qtype)
        np.save(os.path.join(OUT, name + ".npy"), np.ascontiguousarray(deq.reshape(shape), dtype=np.float32))
        tensors.append((name, qtype, shape))

    x = rng.standard_normal((3, 64)).astype(np.float32)
    add("f32", Q.F32, x[:, :32].copy(), (3, 32))
    add("f16", Q.F16, x[:2].astype(np.float16), (2, 64))
    for name, qtype in [("bf16", Q.BF16), ("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("q4_1", Q.Q4_1), ("q5_0", Q.Q5_0),
                        ("q5_1", Q.Q5_1), ("mxfp4", Q.MXFP4)]:
        add(name, qtype, gguf.quants.quantize(x, qtype), (3, 64))
    for name, qtype in [("q2_K", Q.Q2_K), ("q3_K", Q.Q3_K), ("q4_K", Q.Q4_K), ("q5_K", Q.Q5_K), ("q6_K", Q.Q6_K)]:
        add(name, qtype, k_blocks(qtype, 2, 512), (2, 512))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    reader = gguf.GGUFReader(path)
    expected = {"metadata": {}, "tensors": []}
    for key, value, vtype in meta:
        expected["metadata"][key] = {"type": vtype.name.lower(), "value": value}
    for key, value, sub in arrays:
        expected["metadata"][key] = {"type": "array", "element": sub.name.lower(), "value": value}
    for t in reader.tensors:
        expected["tensors"].append({"name": t.name, "type": int(t.tensor_type), "ne": [int(n) for n in t.shape],
                                    "offset": int(t.data_offset - reader.data_offset), "nbytes": int(t.n_bytes)})
    expected["data_offset"] = int(reader.data_offset)
    expected["note"] = "written by gguf-py from " + os.path.relpath(SRC[0], ROOT) + " (tools/make_gguf_fixtures.py)"
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote", path, os.path.getsize(path), "bytes,", len(tensors), "tensors")


if __name__ == "__main__":
    main()
