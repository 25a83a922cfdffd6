#!/usr/bin/env python3
"""GGUF files of synthetic Llama-3.1-8B for the speed comparison of issue 30 (docs/BENCHMARKS.md).

Pipeline, as a llama.cpp user makes them: `tessera synth --preset llama-3.1-8b` (BF16 weights, the
real shapes), the Llama 3 family test tokenizer (tests/data/tokenizer/families/llama3: the
converter needs one; ids past its 1500+ tokens become [PAD] entries, as the converter writes
them), llama.cpp's convert_hf_to_gguf.py (llama-cpp-python's sdist, as tools/compare_llama_cpp.py
fetches it) to a BF16 GGUF, then `llama-quantize` to each type asked for. Intermediate files are
removed as soon as they are used (the BF16 checkpoint and GGUF are 16 GB each).

Usage: tools/.venv/bin/python tools/make_bench_ggufs.py OUT_DIR LLAMA_QUANTIZE [TYPE ...]
       (types: llama-quantize names, default Q8_0 Q4_0 Q4_K_M)
"""
import os
import shutil
import subprocess
import sys

from compare_llama_cpp import CONVERT, ROOT, llama_cpp_source  # the converter, as the comparison runs it


def main():
    out_dir, quantize = sys.argv[1], sys.argv[2]
    types = sys.argv[3:] or ["Q8_0", "Q4_0", "Q4_K_M"]
    os.makedirs(out_dir, exist_ok=True)
    hf = os.path.join(out_dir, "llama-3.1-8b-hf")
    bf16 = os.path.join(out_dir, "llama-3.1-8b-bf16.gguf")
    if not os.path.exists(bf16):
        if not os.path.exists(os.path.join(hf, "config.json")):
            subprocess.run([os.path.join(ROOT, "build", "tessera"), "synth", "--preset", "llama-3.1-8b", "-o", hf,
                            "--force"], check=True)
        for name in ["tokenizer.json", "tokenizer_config.json"]:
            shutil.copy(os.path.join(ROOT, "tests", "data", "tokenizer", "families", "llama3", name), hf)
        src = llama_cpp_source()
        code = CONVERT.format(src=src, gguf=os.path.join(src, "gguf-py"), model=hf, outtype="bf16", out=bf16 + ".tmp")
        subprocess.run([sys.executable, "-c", code], check=True)
        os.replace(bf16 + ".tmp", bf16)
        shutil.rmtree(hf)
    for t in types:
        out = os.path.join(out_dir, f"llama-3.1-8b-{t}.gguf")
        if not os.path.exists(out):
            subprocess.run([quantize, bf16, out + ".tmp", t, "2"], check=True)
            os.replace(out + ".tmp", out)
    os.remove(bf16)


if __name__ == "__main__":
    main()
