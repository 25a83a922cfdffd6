#!/usr/bin/env python3
"""Builds small tokenizers with the exact pipelines of the dense families and their goldens.

The real tokenizer.json files cannot be downloaded here, so each family's pipeline (normalizer,
pre-tokenizer, model options, post-processor, decoder, added tokens; see
shared/reference/dense-decoders.md section 7) is rebuilt with the `tokenizers` library and a
small BPE vocabulary is trained on a built-in corpus. tessera must reproduce
`Tokenizer.from_file` on these files exactly.

Outputs, for each variant V in VARIANTS:
  tests/data/tokenizer/families/V/tokenizer.json, tokenizer_config.json
  tests/data/tokenizer/families/V/golden.jsonl
      Line 1: {"kind": "meta", "tokenizers", "variant", "encode_cases", "decode_cases"}.
      {"kind": "encode", "category", "text",
       "ids"       encode(text, add_special_tokens=True).ids,
       "plain_ids" encode(text, add_special_tokens=False).ids (absent: equal to "ids"),
       "ordinary_ids" the same with encode_special_tokens=True, specials left as text (absent:
           equal to "plain_ids"),
       "decoded" decode(ids, skip_special_tokens=False) (absent: equal to "text"),
       "decoded_skip" decode(ids, skip_special_tokens=True) (absent: equal to "decoded")}
      {"kind": "decode", "ids", "text", "text_skip"}: arbitrary id sequences (split
       characters, byte-fallback runs, special tokens anywhere).

Variants: the four families (llama3, mistral, qwen2 (= Qwen2.5), qwen3), DeepSeek-V3's pipeline
(deepseek3: its three isolating splits before ByteLevel, deepseek.md §8), the legacy Mistral
form (Prepend/Replace normalizer, no pre-tokenizer), and two that exercise components the
families do not use together: "flags" (Qwen pipeline plus added tokens with lstrip, rstrip,
single_word and normalized: true) and "misc" (NFC + Replace normalizers, Digits and Metaspace
"always"/split pre-tokenizers, the Metaspace decoder, ByteLevel with add_prefix_space).

The text corpus is that of tests/data/tokenizer/golden.jsonl (made by make_tokenizer_golden.py:
prose, code, numbers, whitespace runs, CJK, emoji, combining marks, RTL, CRLF, random strings...)
plus family-specific texts with special-token strings, leading spaces and NFC-sensitive forms.

The BPE trainer breaks frequency ties in hash-map order, so a rerun may train slightly
different vocabularies; each golden file is made from the tokenizer.json saved next to it, so
commit a variant's files together.

Usage: tools/.venv/bin/python tools/make_family_tokenizers.py   (tokenizers==0.22.2)
"""
import json
import os
import random
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "tokenizer", "families")
CORPUS = os.path.join(ROOT, "tests", "data", "tokenizer", "golden.jsonl")

L3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
      r"|\s*[\r\n]+|\s+(?!\S)|\s+")
Q2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
      r"|\s*[\r\n]+|\s+(?!\S)|\s+")

LLAMA_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                  "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                  "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
QWEN2_PLAIN = ["<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
               "<|repo_name|>", "<|file_sep|>"]
QWEN3_PLAIN = QWEN2_PLAIN + ["<tool_response>", "</tool_response>", "<think>", "</think>"]
MISTRAL_SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]",
                    "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"]
BYTE_TOKENS = ["<0x%02X>" % b for b in range(256)]


def load_corpus():
    # Long texts (kilobytes each) are kept to a few: with a vocabulary this small they would
    # dominate the golden files without covering anything new.
    texts = []
    long_kept = 0
    with open(CORPUS, encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if e["kind"] == "encode":
                if e["category"] == "long":
                    long_kept += 1
                    if long_kept > 4:
                        continue
                texts.append((e["category"], e["text"]))
    return texts


def training_text(corpus):
    # The readable categories, repeated so that the trainer sees real word frequencies.
    keep = {"prose", "code", "contractions", "numbers", "whitespace", "mixed", "misc", "crlf", "cjk", "special"}
    lines = [t for c, t in corpus if c in keep]
    return lines * 3


def family_texts(specials, plain):
    """Texts around the added tokens of a family: at the start, glued, spaced, partial, repeated."""
    out = []
    toks = specials + plain
    for i, s in enumerate(toks):
        out.append(s)
        out.append(f"{s}Hello")
        out.append(f" {s} world ")
        out.append(f"a{s}b{toks[(i + 1) % len(toks)]}c")
        out.append(f"{s}{s}\n{s[:-1]}")
        out.append(f"\n\n{s}  x")
    out += ["Hello <s>.", "[INST]Hello", "[INST] Hello [/INST]", "<s>[INST] What is 2+2? [/INST]4</s>",
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>",
            "<think>\nreasoning here\n</think>\n\nanswer", "<tool_call>{\"name\": \"f\"}</tool_call>",
            " a", "  a", "\n\n\n", " ", "", "   leading", "trailing   ", "\tTab\tseparated\t",
            "caf\u00e9 cafe\u0301 e\u0301\u0301 \u1e9b\u0323 \u212b \u00c5 A\u030a \uac00 \u1100\u1161",
            "\u0958 \u0915\u093c \ufb2c \u2126 \u03a9 \u1f71 \u03ac", "12345 1234567890 ١٢٣٤ ๑๒๓",
            "日本語のテキスト、漢字とかな。", "😀😃😄 👨‍👩‍👧‍👦 🇫🇷", "Ünïcödé ÀÉÎÕÜ ß ẞ ﬁ",
            "▁already▁has▁metaspace", "▁", "▁▁ ▁", "word▁ ▁word", "mixed\u2581 \u2581"]
    return out


def random_decode_ids(rng, size, count):
    cases = []
    for _ in range(count):
        n = rng.randint(0, 12)
        cases.append([rng.randrange(size) for _ in range(n)])
    return cases


def byte_level_bpe(regex, ignore_merges, nfc, specials, plain, post, vocab_size, corpus):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), "isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=not nfc, use_regex=False)])  # Llama true, Qwen false
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(corpus), trainer)
    tok.add_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in plain])
    tok.post_processor = post(tok)
    return tok


def llama3(corpus):
    def post(tok):
        bos = tok.token_to_id("<|begin_of_text|>")
        return processors.Sequence([
            processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
            processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                          pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                          special_tokens=[("<|begin_of_text|>", bos)])])
    tok = byte_level_bpe(L3, True, False, LLAMA_SPECIALS, [], post, 1500, corpus)
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "model_max_length": 131072,
              "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": True}
    return tok, config, LLAMA_SPECIALS, []


def qwen(plain):
    def build(corpus):
        post = lambda tok: processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
        tok = byte_level_bpe(Q2, False, True, QWEN2_SPECIALS, plain, post, 1500, corpus)
        config = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                  "model_max_length": 131072, "tokenizer_class": "Qwen2Tokenizer", "errors": "replace",
                  "split_special_tokens": False, "clean_up_tokenization_spaces": False}
        return tok, config, QWEN2_SPECIALS, plain
    return build


def sentencepiece_bpe(corpus, legacy):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # Trained with split words (SentencePiece does not merge across word boundaries), saved
    # with the family's pre-tokenizer or normalizer below.
    tok.pre_tokenizer = pre_tokenizers.Metaspace("▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=1200, show_progress=False, limit_alphabet=120,
                                  special_tokens=MISTRAL_SPECIALS + BYTE_TOKENS)
    tok.train_from_iterator(training_text(corpus), trainer)
    if legacy:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.pre_tokenizer = None
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace("▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    # The byte pieces are plain vocabulary entries in SentencePiece models, not added tokens.
    data = json.loads(tok.to_str())
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] not in BYTE_TOKENS]
    tok = Tokenizer.from_str(json.dumps(data, ensure_ascii=False))
    config = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True,
              "add_eos_token": False, "legacy": legacy, "tokenizer_class": "LlamaTokenizer",
              "model_max_length": 32768}
    return tok, config, MISTRAL_SPECIALS, []


FLAG_TOKENS = [  # (content, special, normalized, lstrip, rstrip, single_word)
    ("<mask>", True, False, True, False, False),
    ("<R>", True, False, False, True, False),
    ("<LR>", False, False, True, True, False),
    ("word", False, False, False, False, True),
    ("[SW]", False, True, True, False, True),
    ("caf\u00e9", False, True, False, False, False),  # normalized: matches "cafe\u0301" after NFC
    ("hello world", False, True, False, False, False),
    ("Ω", True, True, False, False, False),
]


def flags(corpus):
    tok, config, specials, plain = qwen(QWEN3_PLAIN)(corpus)
    tok.add_tokens([AddedToken(c, special=s, normalized=n, lstrip=l, rstrip=r, single_word=w)
                    for c, s, n, l, r, w in FLAG_TOKENS])
    return tok, config, specials, plain + [t[0] for t in FLAG_TOKENS]


def misc(corpus):
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(r"\s{2,}"), " "),
                                           normalizers.Replace("``", "\"")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                                 pre_tokenizers.Metaspace("▁", prepend_scheme="always", split=True)])
    trainer = trainers.BpeTrainer(vocab_size=900, show_progress=False, limit_alphabet=100,
                                  special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(training_text(corpus), trainer)
    tok.decoder = decoders.Metaspace("▁", prepend_scheme="always", split=True)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B </s>",
                                                       special_tokens=[("<s>", 1), ("</s>", 2)])
    return tok, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, ["<unk>", "<s>", "</s>"], []


def misc_digits(corpus):
    # Byte-level model behind Digits(individual) + ByteLevel(add_prefix_space, use_regex).
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=900, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tok.train_from_iterator(training_text(corpus), trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    return tok, {"eos_token": "<|endoftext|>"}, ["<|endoftext|>"], []


# DeepSeek-V3 / R1 (deepseek.md §8, llama.cpp's DEEPSEEK3_LLM pre-tokenizer): three isolating
# splits in order (digits in groups of up to three, runs of CJK ideographs and kana, then the
# letter/punctuation/space pattern), then ByteLevel without its own regex or prefix space; BOS
# added by the post-processor (add_bos_token); the fullwidth-bar special tokens.
DS3_SPLITS = [r"\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
              r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
              r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"]
DS3_SPECIALS = ["<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>",
                "<\uff5cUser\uff5c>", "<\uff5cAssistant\uff5c>"]
# V3's tool-call and tool-output markers (its chat template; the `special` flags of the real
# tokenizer.json are recalled as false, unverified), then R1's think tags.
DS3_PLAIN = ["<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>",
             "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>",
             "<\uff5ctool\u2581outputs\u2581begin\uff5c>", "<\uff5ctool\u2581outputs\u2581end\uff5c>",
             "<\uff5ctool\u2581output\u2581begin\uff5c>", "<\uff5ctool\u2581output\u2581end\uff5c>",
             "<\uff5ctool\u2581sep\uff5c>", "<think>", "</think>"]


def deepseek3(corpus):
    tok = Tokenizer(models.BPE(ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), "isolated", invert=False) for r in DS3_SPLITS] +
        [pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=1500, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(corpus), trainer)
    tok.add_tokens([AddedToken(s, special=True, normalized=False) for s in DS3_SPECIALS])
    tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in DS3_PLAIN])
    bos = tok.token_to_id(DS3_SPECIALS[0])
    tok.post_processor = processors.TemplateProcessing(single=f"{DS3_SPECIALS[0]} $A",
                                                       pair=f"{DS3_SPECIALS[0]} $A {DS3_SPECIALS[0]} $B",
                                                       special_tokens=[(DS3_SPECIALS[0], bos)])
    config = {"add_bos_token": True, "add_eos_token": False, "bos_token": DS3_SPECIALS[0], "eos_token": DS3_SPECIALS[1],
              "model_max_length": 131072, "tokenizer_class": "LlamaTokenizerFast", "clean_up_tokenization_spaces": False}
    return tok, config, DS3_SPECIALS, DS3_PLAIN


VARIANTS = {
    "llama3": llama3,
    "qwen2": qwen(QWEN2_PLAIN),
    "qwen3": qwen(QWEN3_PLAIN),
    "mistral": lambda c: sentencepiece_bpe(c, legacy=False),
    "mistral_legacy": lambda c: sentencepiece_bpe(c, legacy=True),
    "flags": flags,
    "misc": misc,
    "misc_bytelevel": misc_digits,
    "deepseek3": deepseek3,
}


def flag_texts():
    return ["<mask>", "a <mask> b", "a   <mask>   b", "\n<mask>\n", "x<R>   y", "x <R>\n\ny", "<LR>", " \t<LR> \t",
            "word", "a word b", "awordb", "words", "_word", "word_", "1word", "word.", "é word é", "[SW]",
            "x [SW] y", "x[SW]y", "  [SW]  ", "café", "cafe\u0301", "cafe\u0301s", "CAFÉ café", "hello world",
            "hello  world", "say hello world!", "Ω Ω \u2126", "<mask><mask> <R><R>", "<R>word<LR>word"]


def main():
    corpus = load_corpus()
    rng = random.Random(1234)
    only = sys.argv[1:]  # variant names: regenerate those alone (their random decode cases then differ)
    for name, build in VARIANTS.items():
        if only and name not in only:
            continue
        tok, config, specials, plain = build(corpus)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "tokenizer.json")
        tok.save(path, pretty=False)
        tok = Tokenizer.from_file(path)  # what tessera must reproduce
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=1)
            f.write("\n")
        texts = list(corpus) + [("family", t) for t in family_texts(specials, plain)]
        if name == "flags":
            texts += [("flags", t) for t in flag_texts()]
        lines = []
        for category, text in texts:
            tok.encode_special_tokens = False
            enc = tok.encode(text, add_special_tokens=True).ids
            plain_ids = tok.encode(text, add_special_tokens=False).ids
            tok.encode_special_tokens = True
            ordinary = tok.encode(text, add_special_tokens=False).ids
            tok.encode_special_tokens = False
            decoded = tok.decode(enc, skip_special_tokens=False)
            decoded_skip = tok.decode(enc, skip_special_tokens=True)
            # Fields equal to the one before them are left out (the C++ test fills them in).
            line = {"kind": "encode", "category": category, "text": text, "ids": enc}
            if plain_ids != enc:
                line["plain_ids"] = plain_ids
            if ordinary != plain_ids:
                line["ordinary_ids"] = ordinary
            if decoded != text:
                line["decoded"] = decoded
            if decoded_skip != decoded:
                line["decoded_skip"] = decoded_skip
            lines.append(line)
        size = tok.get_vocab_size(with_added_tokens=True)
        decode_cases = random_decode_ids(rng, size, 150)
        # Runs of byte tokens (valid and invalid UTF-8) and specials between them.
        byte_ids = [tok.token_to_id(b) for b in BYTE_TOKENS if tok.token_to_id(b) is not None]
        if byte_ids:
            for _ in range(80):
                decode_cases.append([rng.choice(byte_ids) if rng.random() < 0.7 else rng.randrange(size)
                                     for _ in range(rng.randint(1, 10))])
            for s in ["é", "日本", "😀", "a\u0301"]:
                ids = [tok.token_to_id("<0x%02X>" % b) for b in s.encode()]
                decode_cases += [ids, ids[:-1], ids[1:], [1] + ids + [2]]
        for ids in decode_cases:
            lines.append({"kind": "decode", "ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                          "text_skip": tok.decode(ids, skip_special_tokens=True)})
        n_enc = sum(1 for l in lines if l["kind"] == "encode")
        meta = {"kind": "meta", "tokenizers": tokenizers.__version__, "variant": name, "encode_cases": n_enc,
                "decode_cases": len(lines) - n_enc}
        with open(os.path.join(d, "golden.jsonl"), "w", encoding="utf-8") as f:
            for obj in [meta] + lines:
                f.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
        print(name, "vocab", size, "encode", n_enc, "decode", len(lines) - n_enc, "bytes", os.path.getsize(path))


if __name__ == "__main__":
    main()
