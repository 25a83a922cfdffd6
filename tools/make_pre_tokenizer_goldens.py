#!/usr/bin/env python3
"""Reference pre-tokenizations for the GGUF pre-tokenizer rows (src/tokenizer/gguf_vocab.cpp).

llama.cpp names the pre-tokenizer of a byte-level BPE vocabulary with tokenizer.ggml.pre and maps
the name to a list of regexes (src/llama-vocab.cpp: the name -> LLAMA_VOCAB_PRE_TYPE_* chain in
llama_vocab::impl::load, and regex_exprs per type in the llm_tokenizer_bpe constructor). This script
reads both from the pinned llama-cpp-python sdist itself, so that the table in gguf_vocab.cpp is
checked against llama.cpp's source rather than against a copy of it, and writes, for every distinct
regex list ("rule"), where a piece of text starts when Hugging Face `tokenizers` applies the list as
a Sequence of Split(Regex, "isolated") steps, on >= 500 varied texts.

The regexes are taken as llama.cpp documents their intent, since llama.cpp's own matcher is an
approximation of the tokenizer.json it was adapted from (it replaces every non-ASCII character by
one byte per category and runs std::regex, which loses case and \\p{M}; a few lists take
hand-written fast paths):
  - where a type's regex_exprs carries the "original regex from tokenizer.json" in a comment, the
    original is used (llama3, jais-2, qwen2, qwen35, tekken, gpt-4o, tiny_aya, bailingmoe,
    seed-coder, grok-2, exaone-moe, minicpm5);
  - llama.cpp's std::regex spelling of the caseless contractions, (?:'[sS]|'[tT]|...), is written
    back as (?i:'s|'t|...), the tokenizer.json spelling of every original llama.cpp quotes (its
    hand-written llama3 and qwen2 splitters serve both spellings alike). The two differ only where
    U+017F (long s) follows an apostrophe: Oniguruma folds it into s, llama.cpp does not (neither
    in std::regex nor in its splitters, whose unicode_tolower leaves it). The script checks that
    this is the only difference on the texts, and the rows follow Hugging Face here, as the
    llama3 and qwen2 rows always did;
  - llama.cpp's case trick ((?=[\\p{L}])([^a-z])) / ((?=[\\p{L}])([^A-Z])), documented for gpt-4o
    and tekken as standing for [\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}] / [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}], is
    written back as those classes where no original is given (granite-embed-multi-97m, whose
    lookaheads add \\p{M} "so combining marks attach to their base letters": the original's classes);
  - kimi-k2's trigger "\\p{Han}+" stands for the K2 regex that unicode.cpp's custom splitter
    implements and quotes in its comment (tokenization_kimi.py's, with && class intersections);
  - afmoe's "\\p{AFMoE_digits}" is unicode.cpp's custom splitter (a run of \\p{N} cut into groups
    of three from the right); it is ported to Python below, with \\p{N} as Oniguruma's set.
tiny_aya's "\\d{1,3}(?=(?:\\d{3})*\\b)" is the original regex and is run as such by `tokenizers`,
although llama.cpp matches it with the afmoe splitter (its TODO says it may differ: digits followed
by a letter or "_" are not grouped by the regex, and \\d is only Nd); superbpe's "\\d" is Oniguruma's
(Nd), where llama.cpp's std::wregex reads ASCII digits. The counts of texts where llama.cpp's
approximations would cut differently are printed.

For the gpt2 and starcoder rules the script also checks that the split equals the Hugging Face
pre-tokenizers these vocabularies ship (ByteLevel with use_regex; Digits(individual_digits) then
ByteLevel for StarCoder / SmolLM2), which end their regex with "|\\s+" where llama.cpp's does not,
and where gguf_vocab.cpp has to spell a regex otherwise (constructs that tessera's translation in
src/tokenizer/split_regex.h does not take), that its spelling gives the same pieces in Oniguruma.

Outputs (tests/data/tokenizer/pre/):
  index.json      {"llama_cpp_python", "tokenizers", "texts": [...], "rules": [names],
                   "not_byte_level": [{"type", "names", "regexes"}]}: the texts, shared by all rules
                   (the corpus of tools/make_tokenizer_golden.py without its long texts, plus texts
                   aimed at these regexes), and the types whose vocabulary is not byte-level.
  <rule>.json     {"rule", "types", "regexes", "llama_cpp_regexes", "variants": [{"names",
                   "ignore_merges", "add_bos"}], "starts"}: "regexes" are the reference ones (as
                   `tokenizers` ran them), "llama_cpp_regexes" those of llama.cpp's source; "starts"
                   is base64 of a bit per code point of the concatenated texts (least significant
                   bit first), set where a piece begins.

Usage: tools/.venv/bin/python tools/make_pre_tokenizer_goldens.py [--sdist PATH] [--out-dir DIR]
"""
import argparse
import base64
import json
import os
import random
import re
import sys
import tarfile

import tokenizers
from tokenizers import Regex, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizer_golden  # noqa: E402  (the shared corpus)

SDIST = os.path.join(ROOT, "build-deps", "dl", "llama_cpp_python-0.3.36.tar.gz")
VENDOR = "llama_cpp_python-0.3.36/vendor/llama.cpp/"

CONTRACTIONS_STD = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
CONTRACTIONS_CASELESS = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
UPPER_TRICK = ["((?=[\\p{L}])([^a-z]))", "((?=[\\p{L}\\p{M}])([^a-z]))"]
LOWER_TRICK = ["((?=[\\p{L}])([^A-Z]))", "((?=[\\p{L}\\p{M}])([^A-Z]))"]
UPPER_CLASS = "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
LOWER_CLASS = "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
AFMOE_DIGITS = "\\p{AFMoE_digits}"
KIMI_TRIGGER = "\\p{Han}+"

# The name a rule's file gets: the first of these types in the rule, else its first type.
PREFERRED = ["GPT2", "LLAMA3", "QWEN2", "GPT4O", "DEEPSEEK3_LLM", "BLOOM", "STARCODER"]


# ---------------------------------------------------------------------------------------------
# llama.cpp's source.

def cpp_literal_at(line, i):
    """The C++ string literal starting at line[i] == '"': (value, index after it)."""
    assert line[i] == '"'
    out, j = [], i + 1
    escapes = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "r": "\r", "t": "\t", "0": "\0"}
    while line[j] != '"':
        if line[j] == "\\":
            out.append(escapes[line[j + 1]])
            j += 2
        else:
            out.append(line[j])
            j += 1
    return "".join(out), j + 1


def literals(code):
    """The string literals of a line of code (up to a // comment outside literals)."""
    out, i = [], 0
    while i < len(code):
        if code.startswith("//", i):
            break
        if code[i] == '"':
            value, i = cpp_literal_at(code, i)
            out.append(value)
        else:
            i += 1
    return out


def parse_types(vocab_cpp):
    """{TYPE: {"regexes": [...], "byte_encode": bool}} from the llm_tokenizer_bpe constructor."""
    start = vocab_cpp.index("llm_tokenizer_bpe(const llama_vocab & vocab) {")
    end = vocab_cpp.index("std::vector<std::string> regex_exprs;", start)
    types, labels, pending_original, block = {}, [], None, None
    for raw in vocab_cpp[start:end].splitlines():
        line = raw.strip()
        m = re.match(r"case LLAMA_VOCAB_PRE_TYPE_(\w+):", line)
        if m or line == "default:":
            if block is not None:  # a new group of labels after a break
                labels, block = [], None
            labels.append(m.group(1) if m else "DEFAULT")
            continue
        if line.startswith("//"):
            if '"' in line:  # a commented-out original regex
                pending_original = cpp_literal_at(line, line.index('"'))[0]
            continue
        if block is None and line.startswith("regex_exprs"):
            block = {"regexes": [], "llama_cpp": [], "byte_encode": True}
            for label in labels:
                types[label] = block
        if block is None:
            continue
        for value in literals(line):
            block["llama_cpp"].append(value)
            if pending_original is not None:
                value, pending_original = pending_original, None
            block["regexes"].append(value)
        if line.startswith("byte_encode = false"):
            block["byte_encode"] = False
    return types


def parse_names(vocab_cpp):
    """[(names, TYPE, {flag: value})] in llama.cpp's order, from llama_vocab::impl::load."""
    start = vocab_cpp.index('} else if (tokenizer_pre == "default") {')
    end = vocab_cpp.index("unknown pre-tokenizer type", start)
    out = []
    for block in re.split(r"\}\s*else if\s*\(", vocab_cpp[start:end]):
        names = re.findall(r'tokenizer_pre == "([^"]+)"', block)
        t = re.search(r"pre_type = LLAMA_VOCAB_PRE_TYPE_(\w+);", block)
        if not names:
            continue
        flags = dict(re.findall(r"\n\s*([\w.]+) = (\w+);", block))
        flags.pop("pre_type", None)
        out.append((names, t.group(1), flags))
    return out


def kimi_regex(unicode_cpp):
    for line in unicode_cpp.splitlines():
        if line.startswith("// [\\p{Han}]+|"):
            return line[3:]
    sys.exit("K2 regex comment not found in unicode.cpp")


def intent(regex, kimi):
    """The regex llama.cpp's adaptation stands for (see the module docstring)."""
    if regex == KIMI_TRIGGER:
        return kimi
    regex = regex.replace(CONTRACTIONS_STD, CONTRACTIONS_CASELESS)
    for trick in UPPER_TRICK:
        regex = regex.replace(trick, UPPER_CLASS)
    for trick in LOWER_TRICK:
        regex = regex.replace(trick, LOWER_CLASS)
    return regex


# The spellings gguf_vocab.cpp uses where tessera's regex translation (src/tokenizer/split_regex.h)
# lacks a construct (\d, \b, \p{Han}, &&) or llama.cpp names a splitter of its own; checked here
# in Oniguruma against the reference on every text (tests/gguf_vocab_test.cpp checks them in tessera).
WORD = ("[\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}\\x{24B6}-\\x{24E9}"
        "\\x{1F130}-\\x{1F149}\\x{1F150}-\\x{1F169}\\x{1F170}-\\x{1F189}]")
HAN = ("\\x{2E80}-\\x{2E99}\\x{2E9B}-\\x{2EF3}\\x{2F00}-\\x{2FD5}\\x{3005}\\x{3007}\\x{3021}-\\x{3029}"
       "\\x{3038}-\\x{303B}\\x{3400}-\\x{4DBF}\\x{4E00}-\\x{9FFF}\\x{F900}-\\x{FA6D}\\x{FA70}-\\x{FAD9}"
       "\\x{16FE2}-\\x{16FE3}\\x{16FF0}-\\x{16FF1}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2B739}"
       "\\x{2B740}-\\x{2B81D}\\x{2B820}-\\x{2CEA1}\\x{2CEB0}-\\x{2EBE0}\\x{2EBF0}-\\x{2EE5D}"
       "\\x{2F800}-\\x{2FA1D}\\x{30000}-\\x{3134A}\\x{31350}-\\x{323AF}")


def tessera_spelling(regex):
    if regex == "\\d{1,3}(?=(?:\\d{3})*\\b)":
        return "\\p{Nd}{1,3}(?=(?:\\p{Nd}{3})*(?!" + WORD + "))"
    if regex == "(?=(\\d{3})+(?!\\d))":
        return "(?=(?:\\p{Nd}{3})+(?!\\p{Nd}))"
    if regex == AFMOE_DIGITS:
        return "\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))"
    if "\\p{Han}" in regex:
        regex = regex.replace("[\\p{Han}]", "[" + HAN + "]")
        return re.sub(r"\[([^\[\]]*)&&\[\^\\p\{Han\}\]\]", lambda m: "(?:(?![" + HAN + "])[" + m.group(1) + "])", regex)
    return regex


# ---------------------------------------------------------------------------------------------
# Splitting.

def onig_class(name):
    for line in open(os.path.join(ROOT, "tests", "data", "tokenizer", "onig_classes.txt")):
        fields = line.split()
        if fields and fields[0] == name:
            members = set()
            for r in fields[1:]:
                lo, hi = (int(x, 16) for x in r.split("-"))
                members.update(range(lo, hi + 1))
            return members
    sys.exit("class %s not in onig_classes.txt" % name)


NUMBER = onig_class("N")


def afmoe_digits(piece):
    """unicode.cpp unicode_regex_split_custom_afmoe on one piece: lengths of its pieces."""
    out, pos, prev = [], 0, 0
    while pos < len(piece):
        if ord(piece[pos]) in NUMBER:
            start = pos
            while pos < len(piece) and ord(piece[pos]) in NUMBER:
                pos += 1
            count = pos - start
            if prev < start:
                out.append(start - prev)
            if count % 3:
                out.append(count % 3)
            out += [3] * (count // 3)
            prev = pos
        else:
            pos += 1
    if prev < len(piece):
        out.append(len(piece) - prev)
    return out


def split(steps, text):
    """Piece lengths (code points) of `text` after each step in turn."""
    pieces = [text] if text else []
    for step in steps:
        out = []
        for p in pieces:
            if step == AFMOE_DIGITS:
                lengths = afmoe_digits(p)
            else:
                lengths = [e - s for _, (s, e) in step.pre_tokenize_str(p)]
            at = 0
            for n in lengths:
                out.append(p[at:at + n])
                at += n
            assert at == len(p), (step, p)
        pieces = out
    return [len(p) for p in pieces]


def compile_steps(regexes):
    return [r if r == AFMOE_DIGITS else pre_tokenizers.Split(Regex(r), "isolated") for r in regexes]


def starts_of(lengths):
    starts, at = set(), 0
    for n in lengths:
        starts.add(at)
        at += n
    return starts


# ---------------------------------------------------------------------------------------------
# Texts.

def extra_texts(rng):
    numbers = [
        "1", "12", "123", "1234", "12345", "123456", "1234567", "12345678901234567890",
        "3.14159265358979", "-42", "+7 (555) 010-9999", "1,234,567.89", "1 000 000", "1_000_000",
        "0x1F2E3D", "1e-10", "v1.2.3-rc4", "2025-06-28T12:34:56Z", "x1234y", "1234abc", "abc1234",
        "1234_", "_1234", "1234²", "1234Ⓐ", "1234\u0301", "1234‿x", "12345ǅ", "Ⅻ1234", "1234Ⅻ",
        "١٢٣٤٥٦٧", "۱۲۳۴", "१२३४५", "１２３４５６７", "①②③④", "½¼¾ 12½", "²³¹⁴", "𝟏𝟐𝟑𝟒",
        "order #00012345 shipped", "pi ≈ 3.1415926535897932384626433832795028841971",
        "IMG_20240101_123456.jpg", "CVE-2024-12345", "4111 1111 1111 1111", "١٢٣abc٤٥٦",
        "year2025 and 2025year", "𑥐𑥑𑥒𑥓 Dives Akuru digits", "\U00011F50\U00011F51\U00011F52\U00011F53",
    ]
    out = list(numbers)
    for n in range(1, 41):
        digits = "".join(str(rng.randrange(10)) for _ in range(n))
        out.append(rng.choice(["", " ", "a", "_", "x ", "(", "é", "中"]) + digits +
                   rng.choice(["", " ", "b", "_", ".", ")", "\n", "文", "'s"]))
    out += [
        "<sentinel:0> <sentinel:123>x<sentinel:>", "IMGIMGAZ IMGIMGABCDZ IMGIMGABCDEZ IMGIMGZ",
        "IMGIMGIIIIZIMGIMGAAZ", "\t\ttab  two    four     five\n\n",
        "Hello, world! … 。，、 । ۔ ، (a|b) [c]", "Terve, maailma! Hyvää päivää.",
        "日本語の文章です。漢字、ひらがな、カタカナ。", "〇々〆 ⺀⺁ ⼀⼁ 豈更 𠀀𠀁 𪜀", "ㄱㄴㄷ ㅏㅑ ㄅㄆㄇㄈ ᄀᄁᄂ 가나다",
        "ｱｲｳｴｵ ｶﾞｷﾞ ･ﾟ", "！？“引用”‘单’—：；，、〜︰﹏", "ภาษาไทย ພາສາລາວ ភាសាខ្មែរ မြန်မာ ꧋ꦲꦤꦕꦫꦏ",
        "HelloWorld XMLHttpRequest iPhone ǅungla ǅUNGLA ÉCOLE École éCOLE", "ΑΒΓαβγ ΣΊΣΥΦΟΣ σίσυφος",
        "हिन्दी भाषा বাংলা ভাষা தமிழ் తెలుగు", "e\u0301e\u0301e\u0301 a\u0308b\u0308 \u0301start",
        "a/b//c\n/d /e/", "path/to/file.txt\r\n", "👨‍👩‍👧‍👦 👍🏽 🇯🇵🇫🇷 1️⃣ ❤️ ☺︎",
        "it's it'S IT'S it'ſ it'K 'll 'LL 'lL", "We'VE they'Re I'M you'D", "l'été d'un 'ss 'ſs",
        "x" + " " * 130 + "y", " " * 520 + "z", "a" + "\u3000" * 5 + "b\u00a0\u00a0c", "\n" * 40 + "end",
        "tabs\t\t\t\tand\tspaces    mixed \t \t end", "\r\r\n\n\r line", " \n \n \n ", "trailing   ",
        "def f(x):\n    return x**2  # square\n\n\nclass A:\n\tpass\n",
        "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%a%';",
        "if (a && b || !c) { x += 1; } else { y -= 2; } // done",
        "<div class=\"x\">Hello</div>\n<script>let y = `t${1}`;</script>",
        "ŞİŞLİ ısı İi Iı", "ß ẞ ﬁ ﬂ ﬀ ǲ ǳ", "Ｈｅｌｌｏ　Ｗｏｒｌｄ", "ℌℑℜ 𝔄𝔅 ℂℕ",
        "مرحبا بالعالم، كيف حالك؟ ١٢٣", "שלום עולם! 123", "Привет, мир! 2024 год.",
        "a\u200db\u200cc\u2060d", "mixed中文English日本語한국어text123", "under_score__double___triple",
    ]
    pool = ("abcXYZ019 \t\n\r'_-/.,!?()[]{}<>@#$%^&*+=|~`\"" "éÀßǅσΣж中文日本ひカ한ㄱㄅ"
            "٣१０①²Ⅻ\u0301\u3000\u00a0…。，、।۔،！：﹏ｱ🙂👍🏽" "\u200d\ufe0f⺀〇々ſK")
    for _ in range(120):
        out.append("".join(rng.choice(pool) for _ in range(rng.randrange(1, 50))))
    return out


def build_texts():
    rng = random.Random(20250628)
    corpus = [t for category, t in make_tokenizer_golden.build_corpus(rng) if category != "long"]
    texts = []
    for t in corpus + extra_texts(random.Random(45)):
        if t not in texts:
            texts.append(t)
    return texts


# ---------------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sdist", default=SDIST)
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "tests", "data", "tokenizer", "pre"))
    args = parser.parse_args()

    with tarfile.open(args.sdist) as tar:
        vocab_cpp = tar.extractfile(VENDOR + "src/llama-vocab.cpp").read().decode("utf-8")
        unicode_cpp = tar.extractfile(VENDOR + "src/unicode.cpp").read().decode("utf-8")
    types = parse_types(vocab_cpp)
    names = parse_names(vocab_cpp)
    kimi = kimi_regex(unicode_cpp)
    texts = build_texts()
    if len(texts) < 500:
        sys.exit("only %d texts" % len(texts))

    # Rules: distinct intended regex lists of the byte-level types that some name maps to.
    rules, not_byte_level = {}, []
    for group_names, type_name, flags in names:
        block = types[type_name]
        regexes = [intent(r, kimi) for r in block["regexes"]]
        if not block["byte_encode"]:
            not_byte_level.append({"type": type_name, "names": group_names, "regexes": regexes})
            continue
        ignore_merges = flags.get("ignore_merges") == "true"
        add_bos = flags.get("add_bos") == "true"
        rule = rules.setdefault(tuple(regexes), {"types": [], "variants": [], "llama_cpp": block["llama_cpp"]})
        if type_name not in rule["types"]:
            rule["types"].append(type_name)
        for v in rule["variants"]:
            if (v["ignore_merges"], v["add_bos"]) == (ignore_merges, add_bos):
                v["names"] += group_names
                break
        else:
            rule["variants"].append({"names": list(group_names), "ignore_merges": ignore_merges, "add_bos": add_bos})

    os.makedirs(args.out_dir, exist_ok=True)
    rule_names = []
    for regexes, rule in rules.items():
        name = next((t for t in PREFERRED if t in rule["types"]), rule["types"][0]).lower()
        rule_names.append(name)
        steps = compile_steps(list(regexes))
        splits = [split(steps, t) for t in texts]

        # The contraction spelling only matters for U+017F after an apostrophe.
        std = [r.replace(CONTRACTIONS_CASELESS, CONTRACTIONS_STD) for r in regexes]
        if std != list(regexes):
            differ = [t for t, s in zip(texts, splits) if split(compile_steps(std), t) != s]
            assert all("'ſ" in t for t in differ), (name, differ[:3])
            print("%s: (?:'[sS]|...) instead of (?i:'s|...) differs on %d texts, all with 'ſ" % (name, len(differ)))
        if name == "gpt2":
            hf = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        elif name == "starcoder":
            hf = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                          pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        else:
            hf = None
        if hf is not None:
            for t, lengths in zip(texts, splits):
                assert [e - s for _, (s, e) in hf.pre_tokenize_str(t)] == lengths, (name, t)
        spelled = [tessera_spelling(r) for r in regexes]
        if spelled != list(regexes):
            assert [split(compile_steps(spelled), t) for t in texts] == splits, name
            print("%s: gguf_vocab.cpp's spelling gives the same pieces" % name)
        # What llama.cpp's own matching of the digit rules would change.
        if name == "tiny_aya":
            approx = compile_steps([AFMOE_DIGITS] + list(regexes[1:]))
            n = sum(split(approx, t) != s for t, s in zip(texts, splits))
            print("tiny_aya: llama.cpp's afmoe splitter differs from the original regex on %d texts" % n)
        if name == "superbpe":
            approx = compile_steps([regexes[0], regexes[1].replace("\\d", "[0-9]")])
            n = sum(split(approx, t) != s for t, s in zip(texts, splits))
            print("superbpe: ASCII \\d (llama.cpp's std::wregex) differs from Oniguruma's on %d texts" % n)

        bits = bytearray()
        total = 0
        for t, lengths in zip(texts, splits):
            starts = starts_of(lengths)
            for i in range(len(t)):
                if total % 8 == 0:
                    bits.append(0)
                if i in starts:
                    bits[-1] |= 1 << (total % 8)
                total += 1
        entry = {"rule": name, "types": rule["types"], "regexes": list(regexes),
                 "llama_cpp_regexes": rule["llama_cpp"], "variants": rule["variants"],
                 "starts": base64.b64encode(bytes(bits)).decode("ascii")}
        with open(os.path.join(args.out_dir, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(entry, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print("%-16s %2d names, %d regexes" % (name, sum(len(v["names"]) for v in rule["variants"]), len(regexes)))

    index = {"llama_cpp_python": "0.3.36", "tokenizers": tokenizers.__version__, "rules": rule_names,
             "not_byte_level": not_byte_level, "texts": texts}
    with open(os.path.join(args.out_dir, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    total_names = sum(len(n) for n, _, _ in names)
    print("%d texts, %d rules, %d names (%d not byte-level)" %
          (len(texts), len(rule_names), total_names, sum(len(e["names"]) for e in not_byte_level)))


if __name__ == "__main__":
    main()
