#!/usr/bin/env python3
"""Token ids from GGUF metadata: tessera against llama.cpp on the same files (issue 30 point 3).

For each tokenizer kind a vocab-only GGUF is written by llama.cpp's own convert_hf_to_gguf.py
(llama-cpp-python's sdist, as tools/compare_llama_cpp.py fetches it; --vocab-only):
  gpt2 / llama-bpe  the Llama 3 family test tokenizer (tests/data/tokenizer/families/llama3)
  gpt2 / qwen2      the Qwen2 and Qwen3 family test tokenizers
  gpt2 / gpt-4o     gpt-oss's o200k_harmony (assets/o200k_harmony)
  gpt2 / deepseek-v3, deepseek-llm, deepseek-coder
                    the DeepSeek-V3 family test tokenizer (tests/data/tokenizer/families/deepseek3)
                    under each of llama.cpp's DeepSeek pre-tokenizers
  llama (SPM)       a SentencePiece BPE model with byte fallback trained here (sentencepiece, pinned
                    in tools/requirements.txt) on the family corpora, as Llama 2 / Mistral ship one
The converter names BPE pre-tokenizers by hashing sample encodings, which it cannot do for test
tokenizers; it is told the family's name, as compare_llama_cpp.py does.

Each file tokenizes every text of the families' golden corpora (their "encode" cases: prose, code,
numbers, whitespace runs, Unicode of many scripts, special tokens in the text) with
`tessera tokenize -m FILE.gguf --jsonl` and with llama.cpp's `llama-tokenize --ids --no-bos`
(special tokens parsed, as tessera's Encode does), and the ids are compared text by text.

Usage: tools/.venv/bin/python tools/compare_gguf_tokenizers.py LLAMA_TOKENIZE [OUT_DIR [NAME,NAME...]]
  LLAMA_TOKENIZE: a llama.cpp build's llama-tokenize binary.
"""
import json
import os
import subprocess
import sys
import tempfile

from compare_llama_cpp import ROOT, llama_cpp_source

FAMILIES = os.path.join(ROOT, "tests", "data", "tokenizer", "families")

CONVERT = """
import sys
sys.path.insert(0, {src!r})
sys.path.insert(0, {gguf!r})
import convert_hf_to_gguf as c
c.TextModel.get_vocab_base_pre = lambda self, tokenizer: {pre!r}
sys.argv = ["convert_hf_to_gguf.py", {model!r}, "--vocab-only", "--outfile", {out!r}]
c.main()
"""


def texts_of(*families):
    texts = []
    for family in families:
        for line in open(os.path.join(FAMILIES, family, "golden.jsonl"), encoding="utf-8"):
            case = json.loads(line)
            if case.get("kind") == "encode" and case["text"] not in texts:
                texts.append(case["text"])
    return texts


def model_dir(out, name, arch, vocab_size, files):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    config = {"architectures": [arch], "model_type": "llama" if arch.startswith("Llama") else "qwen2",
              "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 1, "vocab_size": vocab_size, "max_position_embeddings": 512,
              "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "bos_token_id": 1, "eos_token_id": 2}
    json.dump(config, open(os.path.join(d, "config.json"), "w"))
    for path in files:
        with open(path, "rb") as src, open(os.path.join(d, os.path.basename(path)), "wb") as dst:
            dst.write(src.read())
    return d


def convert(d, pre, out):
    src = llama_cpp_source()
    code = CONVERT.format(src=src, gguf=os.path.join(src, "gguf-py"), pre=pre, model=d, out=out)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return out


def spm_model(out, texts):
    import sentencepiece as spm
    corpus = os.path.join(out, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(t.replace("\n", " ") + "\n")
    prefix = os.path.join(out, "tokenizer")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=4000, model_type="bpe",
                                   byte_fallback=True, character_coverage=0.98, split_digits=True,
                                   allow_whitespace_only_pieces=True, remove_extra_whitespaces=False,
                                   normalization_rule_name="identity", bos_id=1, eos_id=2, unk_id=0,
                                   minloglevel=2)
    return prefix + ".model"


def tessera_ids(gguf, texts):
    out = subprocess.run([os.path.join(ROOT, "build", "tessera"), "tokenize", "-m", gguf, "--jsonl"],
                         input="\n".join(json.dumps(t) for t in texts) + "\n", capture_output=True, text=True,
                         check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def llama_cpp_ids(binary, gguf, text):
    r = subprocess.run([binary, "-m", gguf, "--ids", "--no-bos", "--log-disable", "--stdin"], input=text.encode(),
                       capture_output=True, check=True)
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def main():
    binary = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="gguf_tok_")
    rows = []
    kinds = [("llama3", "LlamaForCausalLM", "llama-bpe", ["llama3"]),
             ("qwen2", "Qwen2ForCausalLM", "qwen2", ["qwen2"]),
             ("qwen3", "Qwen2ForCausalLM", "qwen2", ["qwen3"]),
             # The DeepSeek-V3 family test tokenizer under each DeepSeek pre-tokenizer llama.cpp knows.
             ("deepseek3", "Qwen2ForCausalLM", "deepseek-v3", ["deepseek3"]),
             ("deepseek-llm", "Qwen2ForCausalLM", "deepseek-llm", ["deepseek3"]),
             ("deepseek-coder", "Qwen2ForCausalLM", "deepseek-coder", ["deepseek3"])]
    only = sys.argv[3].split(",") if len(sys.argv) > 3 else None
    kinds = [k for k in kinds if only is None or k[0] in only]
    for name, arch, pre, families in kinds:
        tok = os.path.join(FAMILIES, families[0])
        vocab = json.load(open(os.path.join(tok, "tokenizer.json")))
        size = max([*vocab["model"]["vocab"].values(), *[t["id"] for t in vocab["added_tokens"]]]) + 1
        d = model_dir(out, name, arch, size, [os.path.join(tok, "tokenizer.json"), os.path.join(tok, "tokenizer_config.json")])
        # A LlamaTokenizerFast (the DeepSeek files' class) adds its default <unk> past the vocabulary.
        from transformers import AutoTokenizer
        loaded = max(AutoTokenizer.from_pretrained(d).vocab.values()) + 1
        if loaded > size:
            d = model_dir(out, name, arch, loaded, [])
        rows.append((name, f"gpt2 / {pre}", convert(d, pre, os.path.join(out, name + ".gguf")), texts_of(*families)))
    # gpt-oss's o200k_harmony (the converter names its pre-tokenizer gpt-4o itself, by hash).
    if only is not None and "o200k" not in only:
        return report_on(binary, rows)
    d = os.path.join(out, "o200k")
    os.makedirs(d, exist_ok=True)
    assets = os.path.join(ROOT, "assets", "o200k_harmony")
    subprocess.run(["zstd", "-d", "-f", "-q", os.path.join(assets, "tokenizer.json.zst"), "-o",
                    os.path.join(d, "tokenizer.json")], check=True)
    with open(os.path.join(assets, "tokenizer_config.json"), "rb") as f, open(os.path.join(d, "tokenizer_config.json"), "wb") as g:
        g.write(f.read())
    config = json.load(open(os.path.join(ROOT, "models", "tiny-gpt-oss", "config.json")))
    config["vocab_size"] = 201088
    json.dump(config, open(os.path.join(d, "config.json"), "w"))
    o200k_texts = [json.loads(line)["text"] for line in open(os.path.join(ROOT, "tests", "data", "tokenizer", "golden.jsonl"),
                                                              encoding="utf-8") if '"kind":"encode"' in line]
    o200k_texts += [t for t in texts_of("llama3") if t not in o200k_texts]
    rows.append(("o200k", "gpt2 / gpt-4o", convert(d, "gpt-4o", os.path.join(out, "o200k.gguf")), o200k_texts))
    spm_texts = texts_of("llama3", "mistral")
    d = model_dir(out, "spm", "LlamaForCausalLM", 4000, [spm_model(out, spm_texts)])
    rows.append(("spm", "llama (SentencePiece BPE)", convert(d, "default", os.path.join(out, "spm.gguf")), spm_texts))
    return report_on(binary, rows)


def report_on(binary, rows):
    report = []
    for name, kind, gguf, texts in rows:
        ours = tessera_ids(gguf, texts)
        theirs = [llama_cpp_ids(binary, gguf, t) for t in texts]
        bad = [i for i in range(len(texts)) if ours[i] != theirs[i]]
        report.append({"tokenizer": name, "kind": kind, "texts": len(texts), "equal": len(texts) - len(bad),
                       "first_difference": None if not bad else {"text": texts[bad[0]], "tessera": ours[bad[0]],
                                                                 "llama.cpp": theirs[bad[0]]}})
        print(json.dumps(report[-1], ensure_ascii=False))
    return 0 if all(r["equal"] == r["texts"] for r in report) else 1


if __name__ == "__main__":
    sys.exit(main())
