#!/usr/bin/env python3
"""Seed corpora of the fuzz targets in tests/fuzz/ (issue 44 point 6), made from the repository's
real files and kept small (a few KB each) so that the corpus stays well under 2 MB:

  gguf/           gguf-py's fixture (tests/data/gguf/fixture.gguf, as it is) and one small model file
                  per GGUF architecture tessera reads (llama with Llama 3 rope_freqs and a byte-level
                  BPE vocabulary, qwen3moe with stacked experts, gpt-oss with MXFP4 experts, deepseek2
                  with attn_k_b / attn_v_b and a SentencePiece vocabulary), written as
                  convert_hf_to_gguf.py lays them out: the <arch>.* keys, tokenizer.ggml.* (a family
                  vocabulary cut to 300 tokens), a few tensors of each kind the mapping rewrites
                  (q8_0 / f32 / mxfp4; shapes of a tiny config so that the rows match the metadata);
                  and issue 44's two hostile GGUF files (2^40 layers, a token that is not UTF-8);
  safetensors/    tests/data/io's files, and its sharded checkpoint as one input (index, then shards);
  config/         config.json + generation_config.json pairs of the built-in models and tests/data;
  tokenizer/      for each shipped tokenizer a text of its golden corpus (mode byte = its index);
                  the family tokenizer.json files cut to their first 300 tokens (merges and added
                  tokens kept consistent) with their tokenizer_config.json and a text;
  chat_template/  each pinned Hub template (or its kind name) with a conversation of the goldens.

Inputs of several files are joined with the separator of tests/fuzz/fuzz_main.h. Standard library
only. Usage: python3 tools/make_fuzz_seeds.py   (rewrites the generated seeds; request/ is untouched)
"""
import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
SEP = b"\n#---8<---#\n"  # fuzz_main.h kSeparator
FAMILIES = ["llama3", "mistral", "mistral_legacy", "qwen2", "qwen3", "deepseek3", "misc", "misc_bytelevel", "flags"]


def read(*parts):
    with open(os.path.join(ROOT, *parts), "rb") as f:
        return f.read()


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def compact(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


# ---- GGUF ----------------------------------------------------------------------------------------

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q",
          I64: "<q", F64: "<d"}
GGML_F32, GGML_Q8_0, GGML_MXFP4 = 0, 8, 39


def gguf_str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, value):
    if vtype == STR:
        return gguf_str(value)
    if vtype == ARR:
        etype, items = value
        return struct.pack("<IQ", etype, len(items)) + b"".join(gguf_value(etype, v) for v in items)
    return struct.pack(SCALAR[vtype], value)


def tensor_bytes(ggml_type, ne):
    """Deterministic contents: f32 small values; q8_0 blocks (f16 scale 2^-7, int8 ramp); mxfp4 blocks
    (E8M0 scale 2^-4, nibbles ramp)."""
    count = 1
    for n in ne:
        count *= n
    if ggml_type == GGML_F32:
        return b"".join(struct.pack("<f", ((i % 13) - 6) / 64.0) for i in range(count))
    blocks = count // 32
    if ggml_type == GGML_Q8_0:
        return b"".join(struct.pack("<e", 1 / 128) + bytes((i + b) % 256 for i in range(32)) for b in range(blocks))
    if ggml_type == GGML_MXFP4:
        return b"".join(bytes([123]) + bytes((i * 7 + b) % 256 for i in range(16)) for b in range(blocks))
    raise ValueError(ggml_type)


def write_gguf(metadata, tensors, alignment=32):
    """metadata: [(key, type, value)]; tensors: [(name, ne, ggml_type[, bytes])]. GGUF v3, little-endian."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, value in metadata:
        out += gguf_str(key) + struct.pack("<I", vtype) + gguf_value(vtype, value)
    data, offsets = b"", []
    for name, ne, ggml_type, *given in tensors:
        offsets.append(len(data))
        data += given[0] if given else tensor_bytes(ggml_type, ne)
        data += b"\0" * (-len(data) % alignment)
    for (name, ne, ggml_type, *_), offset in zip(tensors, offsets):
        out += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", ggml_type, offset)
    out += b"\0" * (-len(out) % alignment)
    return out + data


def byte_level_vocab(family, size):
    """The first `size` tokens of a family tokenizer (byte-level BPE), with the merges among them."""
    tok = json.loads(read("tests", "data", "tokenizer", "families", family, "tokenizer.json"))
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])[:size]
    kept = {t for t, _ in vocab}
    merges = []
    for m in tok["model"]["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        if a in kept and b in kept and a + b in kept:
            merges.append(a + " " + b)
    return [t for t, _ in vocab], merges


def gpt2_tokenizer_keys(family, pre, size=300):
    tokens, merges = byte_level_vocab(family, size)
    tokens += ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    types = [1] * size + [3, 3, 3]
    return [("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, pre),
            ("tokenizer.ggml.tokens", ARR, (STR, tokens)), ("tokenizer.ggml.token_type", ARR, (I32, types)),
            ("tokenizer.ggml.merges", ARR, (STR, merges)), ("tokenizer.ggml.bos_token_id", U32, size),
            ("tokenizer.ggml.eos_token_id", U32, size + 1), ("tokenizer.ggml.add_bos_token", BOOL, True)]


def sentencepiece_tokenizer_keys():
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    words = ["\u2581", "\u2581t", "h", "e", "\u2581th", "\u2581the", "l", "o", "\u2581he", "ll", "\u2581hello", "w", "r", "d"]
    tokens = pieces + words
    scores = [0.0] * len(pieces) + [-float(i) for i in range(len(words))]
    types = [2, 3, 3] + [6] * 256 + [1] * len(words)
    return [("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
            ("tokenizer.ggml.scores", ARR, (F32, scores)), ("tokenizer.ggml.token_type", ARR, (I32, types)),
            ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
            ("tokenizer.ggml.unknown_token_id", U32, 0), ("tokenizer.ggml.add_space_prefix", BOOL, True)]


def common_keys(arch, hidden=32, heads=2, kv_heads=1, head_dim=16, ffn=32, layers=1):
    return [("general.architecture", STR, arch), ("general.name", STR, "fuzz seed"),
            ("general.file_type", U32, 7), (arch + ".block_count", U32, layers),
            (arch + ".context_length", U32, 64), (arch + ".embedding_length", U32, hidden),
            (arch + ".feed_forward_length", U32, ffn), (arch + ".attention.head_count", U32, heads),
            (arch + ".attention.head_count_kv", U32, kv_heads), (arch + ".attention.key_length", U32, head_dim),
            (arch + ".attention.value_length", U32, head_dim), (arch + ".rope.freq_base", F32, 500000.0),
            (arch + ".attention.layer_norm_rms_epsilon", F32, 1e-5)]


def gguf_seeds():
    write("gguf", "fixture.gguf", read("tests", "data", "gguf", "fixture.gguf"))
    vocab = 303  # gpt2_tokenizer_keys: the 256 byte tokens, 44 merged ones, 3 added
    # llama: permuted q/k rows, Llama 3 rope scaling as rope_freqs, tied output.
    llama = common_keys("llama") + gpt2_tokenizer_keys("llama3", "llama-bpe")
    write("gguf", "llama.gguf", write_gguf(llama, [
        ("token_embd.weight", [32, vocab], GGML_Q8_0), ("output_norm.weight", [32], GGML_F32),
        ("rope_freqs.weight", [8], GGML_F32, struct.pack("<8f", 1, 1, 1, 2, 4, 8, 8, 8)),
        ("blk.0.attn_norm.weight", [32], GGML_F32), ("blk.0.attn_q.weight", [32, 32], GGML_Q8_0),
        ("blk.0.attn_k.weight", [32, 16], GGML_Q8_0), ("blk.0.attn_v.weight", [32, 16], GGML_F32),
        ("blk.0.attn_output.weight", [32, 32], GGML_Q8_0), ("blk.0.ffn_gate.weight", [32, 32], GGML_Q8_0)]))
    # qwen3moe: q/k norms, a router, experts stacked [in, out, E].
    qwen = common_keys("qwen3moe") + [("qwen3moe.expert_count", U32, 2), ("qwen3moe.expert_used_count", U32, 1),
                                      ("qwen3moe.expert_feed_forward_length", U32, 16)]
    qwen += gpt2_tokenizer_keys("qwen3", "qwen2")
    write("gguf", "qwen3moe.gguf", write_gguf(qwen, [
        ("blk.0.attn_q_norm.weight", [16], GGML_F32),
        ("blk.0.attn_k_norm.weight", [16], GGML_F32), ("blk.0.ffn_gate_inp.weight", [32, 2], GGML_F32),
        ("blk.0.ffn_gate_exps.weight", [32, 16, 2], GGML_Q8_0), ("blk.0.ffn_up_exps.weight", [32, 16, 2], GGML_Q8_0)]))
    # gpt-oss: MXFP4 experts repacked, gate/up biases interleaved, sinks, YaRN keys.
    oss = common_keys("gpt-oss") + [("gpt-oss.expert_count", U32, 2), ("gpt-oss.expert_used_count", U32, 1),
                                    ("gpt-oss.expert_feed_forward_length", U32, 32),
                                    ("gpt-oss.attention.sliding_window", U32, 8),
                                    ("gpt-oss.rope.scaling.type", STR, "yarn"), ("gpt-oss.rope.scaling.factor", F32, 4.0),
                                    ("gpt-oss.rope.scaling.original_context_length", U32, 16)]
    oss += gpt2_tokenizer_keys("qwen2", "gpt-4o")
    write("gguf", "gpt-oss.gguf", write_gguf(oss, [
        ("blk.0.attn_sinks.weight", [2], GGML_F32),
        ("blk.0.ffn_gate_exps.weight", [32, 32, 2], GGML_MXFP4), ("blk.0.ffn_up_exps.weight", [32, 32, 2], GGML_MXFP4),
        ("blk.0.ffn_down_exps.weight", [32, 32, 2], GGML_MXFP4), ("blk.0.ffn_gate_exps.bias", [32, 2], GGML_F32),
        ("blk.0.ffn_up_exps.bias", [32, 2], GGML_F32)]))
    # deepseek2 (V3 gating): MLA keys, kv_b split into attn_k_b [nope, C, H] / attn_v_b [C, v, H].
    ds = common_keys("deepseek2", kv_heads=1, head_dim=48) + [
        ("deepseek2.vocab_size", U32, 273), ("deepseek2.attention.kv_lora_rank", U32, 32),
        ("deepseek2.attention.key_length_mla", U32, 24), ("deepseek2.attention.value_length_mla", U32, 16),
        ("deepseek2.rope.dimension_count", U32, 8), ("deepseek2.leading_dense_block_count", U32, 0),
        ("deepseek2.expert_feed_forward_length", U32, 32), ("deepseek2.expert_count", U32, 4),
        ("deepseek2.expert_used_count", U32, 2), ("deepseek2.expert_shared_count", U32, 1),
        ("deepseek2.expert_weights_scale", F32, 2.5), ("deepseek2.expert_weights_norm", BOOL, True),
        ("deepseek2.expert_gating_func", U32, 2), ("deepseek2.expert_group_count", U32, 2),
        ("deepseek2.expert_group_used_count", U32, 1)]
    ds += sentencepiece_tokenizer_keys()
    write("gguf", "deepseek2.gguf", write_gguf(ds, [
        ("blk.0.attn_kv_a_mqa.weight", [32, 40], GGML_Q8_0),
        ("blk.0.attn_k_b.weight", [16, 32, 2], GGML_F32), ("blk.0.attn_v_b.weight", [32, 16, 2], GGML_Q8_0),
        ("blk.0.exp_probs_b.bias", [4], GGML_F32)]))

    # Issue 44's hostile files: a gpt-oss model of 2^40 layers (allocated per layer before any
    # check, once) and a vocabulary token that is not UTF-8 (an nlohmann exception, once).
    huge = [(k, U64, 1 << 40) if k == "gpt-oss.block_count" else (k, t, v) for k, t, v in oss]
    write("gguf", "hostile-layers.gguf", write_gguf(huge, []))
    bad = [(k, t, (STR, v[1][:5] + [b"\xff\xfe"] + v[1][6:])) if k == "tokenizer.ggml.tokens" else (k, t, v)
           for k, t, v in llama]
    write("gguf", "hostile-utf8-token.gguf", write_gguf(bad, []))

# ---- safetensors, config -------------------------------------------------------------------------

def safetensors_seeds():
    for name in ["interop.safetensors", "c64.safetensors", "f4.safetensors"]:
        write("safetensors", name, read("tests", "data", "io", name))
    shard_dir = os.path.join("tests", "data", "io", "sharded")
    shards = sorted(f for f in os.listdir(os.path.join(ROOT, shard_dir)) if f.endswith(".safetensors"))
    parts = [read(shard_dir, "model.safetensors.index.json")] + [read(shard_dir, s) for s in shards]
    write("safetensors", "sharded.input", SEP.join(parts))


def config_seeds():
    dirs = ["models/tiny-gpt-oss", "models/tiny-llama", "models/tiny-deepseek"]
    dirs += ["tests/data/io/configs/" + d for d in sorted(os.listdir(os.path.join(ROOT, "tests/data/io/configs")))]
    golden_roots = ["tests/data/dense_golden", "tests/data/deepseek_golden"]
    for root in golden_roots:
        dirs += [root + "/" + d for d in sorted(os.listdir(os.path.join(ROOT, root)))
                 if os.path.isfile(os.path.join(ROOT, root, d, "config.json"))]
    for d in dirs:
        parts = [read(d, "config.json")]
        if os.path.isfile(os.path.join(ROOT, d, "generation_config.json")):
            parts.append(read(d, "generation_config.json"))
        write("config", d.replace("/", "_").replace("tests_data_", "").replace("models_", "") + ".input", SEP.join(parts))


# ---- tokenizer -----------------------------------------------------------------------------------

def trimmed_tokenizer(family, keep=300):
    """The family's tokenizer.json with its first `keep` vocabulary entries, the merges among them, and
    its added tokens renumbered after them (references in the post-processor follow)."""
    tok = json.loads(read("tests", "data", "tokenizer", "families", family, "tokenizer.json"))
    model = tok["model"]
    vocab = {t: i for t, i in model["vocab"].items() if i < keep}
    renumber, next_id = {}, keep
    for added in sorted(tok["added_tokens"], key=lambda a: a["id"]):
        if added["id"] < keep:
            continue
        renumber[added["id"]] = next_id
        added["id"] = next_id
        next_id += 1
    tok["added_tokens"] = [a for a in tok["added_tokens"] if a["id"] < next_id]
    for added in tok["added_tokens"]:
        if added["content"] in model["vocab"] and added["content"] not in vocab:
            vocab[added["content"]] = added["id"]
    merges = []
    for m in model["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    model["vocab"], model["merges"] = vocab, merges

    def fix(node):
        if isinstance(node, dict):
            if "ids" in node and isinstance(node["ids"], list):
                node["ids"] = [renumber.get(i, i) for i in node["ids"]]
            for v in node.values():
                fix(v)
        elif isinstance(node, list):
            for v in node:
                fix(v)
    fix(tok.get("post_processor"))
    return compact(tok)


def golden_text(family_dir, index=1):
    with open(os.path.join(ROOT, family_dir, "golden.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if '"kind":"encode"' in line]
    return texts[index % len(texts)].encode()[:512]


def tokenizer_seeds():
    # Mode bytes below 0x80 choose the shipped tokenizer (tokenizer_fuzzer.cpp: 0 o200k, 1 tiny-llama,
    # 2.. the families in FAMILIES order).
    write("tokenizer", "o200k.input", bytes([0]) + "Hello <|start|>user<|message|>héllo wörld 123 \u4e16\u754c\n\tdef f(x): return x**2".encode())
    write("tokenizer", "tiny-llama.input", bytes([1]) + b"import os\n\nclass Foo(object):\n    def __init__(self):\n        self.x = 1  # comment\n")
    for i, family in enumerate(FAMILIES):
        fdir = "tests/data/tokenizer/families/" + family
        write("tokenizer", "text-%s.input" % family, bytes([2 + i]) + golden_text(fdir, 7 * i + 1))
        parts = [trimmed_tokenizer(family), read(fdir, "tokenizer_config.json"), golden_text(fdir, 3 * i)[:200]]
        write("tokenizer", "file-%s.input" % family, bytes([0x80]) + SEP.join(parts))


# ---- chat templates ------------------------------------------------------------------------------

def chat_seeds():
    goldens = json.loads(read("tests", "data", "chat_templates", "goldens.json"))
    cases = goldens["cases"]
    kinds = ["llama3.1", "mistral-v0.3", "qwen2.5", "qwen3", "deepseek-v2", "deepseek-v3", "deepseek-r1"]
    by_kind = {}
    for case in cases:
        by_kind.setdefault(case["template"], []).append(case)
    for n, kind in enumerate(kinds):
        picked = sorted(by_kind.get(kind, []), key=lambda c: len(json.dumps(c)))
        for j, case in enumerate(picked[:2] + picked[-1:]):
            options = dict(case.get("options", {}))
            options["eos_token_id"] = [1, 2]
            # The first seed of a kind carries the real template text, the others a name
            # --chat-template accepts (ChatML, or a Hub template llama.cpp keeps).
            head = read("tests", "data", "chat_templates", kind + ".jinja") if j == 0 else \
                (b"chatml" if j == 1 else b"meta-llama-Llama-3.2-3B-Instruct")
            data = SEP.join([head, compact(case["messages"]), compact(options)])
            if len(data) <= 8192:
                write("chat_template", "%s-%d.input" % (kind, j), data)
    # The Hub templates of the newer families (llama.cpp's collection, extracted by
    # scripts/setup_jinja.sh), with a conversation that calls a tool.
    hub = os.path.join(ROOT, "build-deps", "llama-jinja-0.3.36", "templates")
    conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"id": "call12345", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                    {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21.5}"},
                    {"role": "user", "content": "Thanks"}]
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                              "required": ["city"]}}}]
    for name in ["google-gemma-4-31B-it", "google-gemma-2-2b-it", "microsoft-Phi-3.5-mini-instruct",
                 "HuggingFaceTB-SmolLM3-3B", "GLM-4.6", "Qwen3.5-4B", "meta-llama-Llama-3.2-3B-Instruct"]:
        with open(os.path.join(hub, name + ".jinja"), "rb") as f:
            text = f.read()
        write("chat_template", "hub-%s.input" % name,
              SEP.join([text, compact(conversation), compact({"tools": tools, "add_generation_prompt": True})]))
    # The template found through a tokenizer_config.json, as in a model directory.
    config = {"bos_token": "<s>", "eos_token": "</s>", "chat_template": read("tests", "data", "chat_templates", "mistral-v0.3.jinja").decode()}
    write("chat_template", "tokenizer_config.input",
          SEP.join([compact(config), compact([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                                              {"role": "user", "content": "Bye"}]), b"{}"]))


def main():
    gguf_seeds()
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    chat_seeds()


if __name__ == "__main__":
    main()
