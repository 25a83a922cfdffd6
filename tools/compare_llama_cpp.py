#!/usr/bin/env python3
"""llama.cpp beside tessera on the shipped trained models (issue 15 point 4; docs/ACCURACY.md,
"Trained models", and docs/BENCHMARKS.md).

llama.cpp comes from PyPI: llama-cpp-python (pinned in tools/requirements.txt) builds it from
source on install. Its source distribution also carries llama.cpp's own converter
(vendor/llama.cpp/convert_hf_to_gguf.py with gguf-py), which this script downloads once with
`pip download` into build/llama_cpp_src and runs on models/<name> to write GGUF files:
  tiny-gpt-oss  --outtype q8_0  (the experts stay MXFP4, everything else Q8_0: "MXFP4 + Q8_0")
                --outtype f32   (experts MXFP4, everything else f32: llama.cpp's most exact form)
  tiny-llama    --outtype q8_0 and --outtype f32
The converter identifies BPE pre-tokenizers by a hash of sample encodings and does not know the
shipped tokenizer; it uses Llama 3's split regex, so the script tells the converter it is
"llama-bpe" (and checks below that llama.cpp then tokenizes the text exactly as tokenizers does).

Perplexity: the same text (tests/data/trained/heldout_sample.txt), the same token ids (from the
model's tokenizer.json) and the same windows as `tessera perplexity -c 256` (disjoint windows of
256, each from a fresh context; engine/perplexity.h), NLL in float64 from llama.cpp's float32
logits. Speed: prefill tokens/s of those windows, and greedy decode tokens/s of 128 tokens, with
2 threads, against `tessera perplexity --json` and `tessera generate --json` in the same run.

Install: tools/requirements-llama-cpp.txt (its header has the command).
Usage: tools/.venv/bin/python tools/compare_llama_cpp.py
"""
import glob
import json
import os
import subprocess
import sys
import tarfile
import time

import numpy as np

from make_trained_goldens import windows  # the windows of `tessera perplexity` (same folder)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build", "llama_cpp")
TEXT = os.path.join(ROOT, "tests", "data", "trained", "heldout_sample.txt")
VERSION = "0.3.16"
CTX = 256
THREADS = 2
PROMPT = "class Stack:\n    \"\"\"A last-in, first-out stack.\"\"\"\n\n    def __init__(self):\n"


def llama_cpp_source():
    src = os.path.join(BUILD, "src")
    if os.path.exists(os.path.join(src, "convert_hf_to_gguf.py")):
        return src
    os.makedirs(BUILD, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                    f"llama-cpp-python=={VERSION}", "-d", BUILD], check=True)
    sdist = glob.glob(os.path.join(BUILD, f"llama_cpp_python-{VERSION}.tar.gz"))[0]
    prefix = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and
                   (m.name == prefix + "convert_hf_to_gguf.py" or m.name.startswith(prefix + "gguf-py/"))]
        for m in members:
            m.name = m.name[len(prefix):]
        tar.extractall(src, members=members)
    return src


CONVERT = """
import sys
sys.path.insert(0, {src!r})
sys.path.insert(0, {gguf!r})
import convert_hf_to_gguf as c
c.TextModel.get_vocab_base_pre = lambda self, tokenizer: "llama-bpe"
sys.argv = ["convert_hf_to_gguf.py", {model!r}, "--outtype", {outtype!r}, "--outfile", {out!r}]
c.main()
"""


def convert(src, name, outtype):
    out = os.path.join(BUILD, f"{name}-{outtype}.gguf")
    if not os.path.exists(out):
        code = CONVERT.format(src=src, gguf=os.path.join(src, "gguf-py"), model=os.path.join(ROOT, "models", name),
                              outtype=outtype, out=out + ".tmp")
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        os.replace(out + ".tmp", out)
    return out


def nll_rows(logits, ids):
    logits = logits.astype(np.float64)
    m = logits.max(-1, keepdims=True)
    lse = (m[:, 0] + np.log(np.exp(logits - m).sum(-1)))
    return lse - logits[np.arange(len(ids)), ids]


def llama_cpp_perplexity(path, ids):
    from llama_cpp import Llama
    llm = Llama(model_path=path, n_ctx=CTX, n_batch=CTX, n_ubatch=CTX, n_threads=THREADS, logits_all=True,
                verbose=False)
    nll, seconds, count = [], 0.0, 0
    for begin, end, first in windows(len(ids), CTX, CTX):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids[begin:end])
        seconds += time.perf_counter() - t0
        logits = np.array(llm.scores[:end - begin], dtype=np.float32)
        nll.extend(nll_rows(logits[first - 1 - begin:end - 1 - begin], ids[first:end]))
        count += 1
    nll = np.array(nll)
    # Greedy decode speed: 128 tokens after the demo prompt.
    prompt = llm.tokenize(PROMPT.encode(), add_bos=False, special=False)
    llm.reset()
    llm.eval(prompt)
    t0 = time.perf_counter()
    for _ in range(128):
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        llm.eval([token])
    decode = 128 / (time.perf_counter() - t0)
    tokenized = llm.tokenize(open(TEXT, "rb").read(), add_bos=False, special=False)
    return {"perplexity": float(np.exp(nll.mean())), "scored": len(nll), "windows": count,
            "prefill_tok_s": len(ids) / seconds, "decode_tok_s": decode, "same_tokens": tokenized == list(ids)}


def tessera(name, *extra):
    exe = os.path.join(ROOT, "build", "tessera")
    ppl = json.loads(subprocess.run([exe, "perplexity", "-m", os.path.join(ROOT, "models", name), "-f", TEXT, "-c",
                                     str(CTX), "--json", "-t", str(THREADS), *extra], check=True, capture_output=True,
                                    text=True).stdout)
    gen = json.loads(subprocess.run([exe, "generate", "-m", os.path.join(ROOT, "models", name), "--raw", "-p", PROMPT,
                                     "-n", "128", "--temp", "0", "--json", "-t", str(THREADS), *extra], check=True,
                                    capture_output=True, text=True).stdout)
    return {"perplexity": ppl["perplexity"], "prefill_tok_s": ppl["tokens_per_second"],
            "decode_tok_s": gen["timings"]["decode_tok_s"]}


def main():
    from tokenizers import Tokenizer
    src = llama_cpp_source()
    text = open(TEXT, encoding="utf-8").read()
    rows = []
    for name in ["tiny-gpt-oss", "tiny-llama"]:
        ids = Tokenizer.from_file(os.path.join(ROOT, "models", name, "tokenizer.json")).encode(text).ids
        for label, extra in [("exact", ["--precision", "exact", "--kv-type", "f32"]), ("fast", []),
                             ("fast, --dense int8", ["--dense", "int8"])]:
            rows.append((name, "tessera " + label, tessera(name, *extra)))
        for outtype, label in [("f32", "f32 (experts MXFP4)" if name == "tiny-gpt-oss" else "f32"),
                               ("q8_0", "MXFP4 + Q8_0" if name == "tiny-gpt-oss" else "Q8_0")]:
            rows.append((name, "llama.cpp " + label, llama_cpp_perplexity(convert(src, name, outtype), ids)))
    print("| model | engine, weights | perplexity | prefill t/s | decode t/s | tokenization identical |")
    print("|---|---|---|---|---|---|")
    for name, label, r in rows:
        same = {True: "yes", False: "no"}.get(r.get("same_tokens"), "")
        print(f"| {name} | {label} | {r['perplexity']:.4f} | {r['prefill_tok_s']:.0f} | {r['decode_tok_s']:.0f} | {same} |")


if __name__ == "__main__":
    main()
