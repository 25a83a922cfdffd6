#!/usr/bin/env python3
"""Generates the tokenizer reference data that tessera's C++ tests compare against.

Outputs (all deterministic for a given tokenizers version and tokenizer.json):

  tests/data/tokenizer/golden.jsonl
      Line 1: {"kind": "meta", ...} with the tokenizers version and the tokenizer.json sha256.
      Then {"kind": "encode", "category", "text", "ids"[, "ordinary_ids"]} for >= 300 varied
      texts (ids from Hugging Face `tokenizers`; decode(ids) == text is asserted here and in C++;
      "ordinary_ids" = ids with `encode_special_tokens=True`, given for texts containing "<|"),
      and {"kind": "decode", "ids", "text"} for arbitrary id sequences, many of which split
      multi-byte characters, so that the lossy UTF-8 decoding (U+FFFD) is checked too.

  tests/data/tokenizer/golden_extra.jsonl
      The same tokenizer.json with EXTRA_ADDED appended to "added_tokens" (meta line lists
      them): checks HF's added-token semantics that o200k_harmony alone cannot show
      (leftmost-longest matching, "normalized": false tokens matched before "normalized": true
      ones, ids assigned by tokenizers, contents that are vocabulary tokens or not spelled in
      byte-level characters, encode_special_tokens skipping).

  tests/data/tokenizer/golden_bytelevel.jsonl
      The same tokenizer.json with GPT-2's pre-tokenizer (ByteLevel, use_regex: true) in place
      of the o200k Split, on the corpus minus the long, random and mixed texts.

  tests/data/tokenizer/split_cases.jsonl
      {"pattern", "text", "pieces"}: HF's Split(Regex(pattern), "isolated") on small texts,
      for the regex translation (empty matches, lookaround, caseless groups, escapes, ...).

  tests/data/tokenizer/onig_classes.txt
      For every character class that tessera's regex translation supports (\\s, \\p{L}, ...),
      the code point ranges that Oniguruma (the regex engine inside `tokenizers`) matches,
      probed through `tokenizers` itself, plus the case-insensitive equivalents of ASCII
      letters. The C++ test checks its PCRE2 translation against this table code point by code
      point.

  src/tokenizer/unicode_delta.h
      What PCRE2 10.42 (Unicode 14.0) lacks compared with that Oniguruma (Unicode 16.0): the
      code points per general category that were unassigned in Unicode 14, the exact \\s set,
      and the caseless ASCII letter sets. Unicode 14 membership is taken from Python's
      `unicodedata` (3.11 ships 14.0.0, the same version as PCRE2 10.42).

Usage (pinned versions in tools/requirements.txt):
  tools/.venv/bin/python tools/make_tokenizer_golden.py [--tokenizer-json PATH]
"""
import argparse
import hashlib
import json
import os
import random
import sys
import unicodedata

import tokenizers
from tokenizers import Regex, Tokenizer, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_JSON = "/work/shared/models/o200k_harmony/tokenizer.json"

# General-category properties the translation accepts in \p{..}; \s is handled separately.
# Mn is left out: U+1171E moved from Mn to Mc in Unicode 15, so Unicode 16's Mn is not a superset
# of Unicode 14's and cannot be expressed by appending code points.
PROPERTIES = ["L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mc", "Me", "N", "Nd", "Nl", "No",
              "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So",
              "Z", "Zs", "Zl", "Zp"]

ALL_CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]


def oniguruma_members(pattern):
    """Code points matched by `pattern` (one character), as tokenizers' Oniguruma sees them."""
    text = "".join(chr(c) for c in ALL_CODE_POINTS)
    covered = bytearray(len(ALL_CODE_POINTS))
    # With behavior "removed" the returned pieces are exactly the unmatched stretches.
    for _, (start, end) in pre_tokenizers.Split(Regex(pattern), "removed").pre_tokenize_str(text):
        covered[start:end] = b"\x01" * (end - start)
    return {ALL_CODE_POINTS[i] for i, c in enumerate(covered) if not c}


def unicode14_members(prop):
    if len(prop) == 1:
        return {c for c in range(0x110000) if unicodedata.category(chr(c))[0] == prop}
    return {c for c in range(0x110000) if unicodedata.category(chr(c)) == prop}


def to_ranges(points):
    ranges = []
    for c in sorted(points):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return ranges


def pcre_class_items(points):
    return ["\\x{%X}" % lo if lo == hi else "\\x{%X}-\\x{%X}" % (lo, hi) for lo, hi in to_ranges(points)]


def cpp_literal(points, indent):
    """The class fragment as C++ adjacent string literals, lines of at most 100 columns."""
    lines, line = [], ""
    for item in pcre_class_items(points):
        item = item.replace("\\", "\\\\")
        if line and indent + len(line) + len(item) + 2 > 100:
            lines.append('"%s"' % line)
            line = ""
        line += item
    lines.append('"%s"' % line)
    return ("\n" + " " * indent).join(lines)


def write_unicode_tables(classes_path, header_path):
    lines = ["# Oniguruma character classes as probed through tokenizers %s." % tokenizers.__version__,
             "# Generated by tools/make_tokenizer_golden.py. Format: NAME RANGE... (hex, inclusive)."]
    header_entries = []
    white_space = oniguruma_members(r"\s")
    lines.append("s " + " ".join("%X-%X" % (lo, hi) for lo, hi in to_ranges(white_space)))
    for prop in PROPERTIES:
        onig = oniguruma_members(r"\p{%s}" % prop)
        u14 = unicode14_members(prop)
        if not u14 <= onig:
            sys.exit("\\p{%s}: Unicode 14 members missing from Oniguruma's class: %s; the "
                     "additive translation would be wrong" % (prop, sorted(u14 - onig)[:10]))
        lines.append(prop + " " + " ".join("%X-%X" % (lo, hi) for lo, hi in to_ranges(onig)))
        header_entries.append((prop, onig - u14))
    caseless = []
    for letter in "abcdefghijklmnopqrstuvwxyz":
        members = oniguruma_members("(?i:%s)" % letter)
        lines.append("i" + letter + " " + " ".join("%X-%X" % (lo, hi) for lo, hi in to_ranges(members)))
        caseless.append((letter, members))
    with open(classes_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")

    out = ["// Generated by tools/make_tokenizer_golden.py from tokenizers %s; do not edit."
           % tokenizers.__version__,
           "//",
           "// Hugging Face `tokenizers` matches pre-tokenizer regexes with Oniguruma (Unicode 16.0);",
           "// PCRE2 10.42 knows Unicode 14.0. Every code point that Oniguruma puts into a general",
           "// category but Unicode 14 left unassigned is listed here as a PCRE2 class fragment, and",
           "// the regex translation appends it to \\p{..}. Code points assigned in Unicode 14 have",
           "// the same category in both (the generator checks this), so appending is exact.",
           "#pragma once",
           "",
           "#include <string_view>",
           "",
           "namespace tessera::unicode_delta {",
           "",
           "struct PropertyDelta {",
           "  std::string_view property;  // general category, e.g. \"Lo\"",
           "  std::string_view additions;  // PCRE2 class fragment, e.g. \"\\\\x{31350}-\\\\x{323AF}\"",
           "};",
           "",
           "// Oniguruma's \\s: the Unicode White_Space property (PCRE2's \\s also matches U+180E).",
           "inline constexpr std::string_view kWhiteSpace =",
           "    %s;" % cpp_literal(white_space, 4),
           "",
           "inline constexpr PropertyDelta kAdditions[] = {"]
    for prop, points in header_entries:
        out.append('    {"%s",' % prop)
        out.append("     %s}," % cpp_literal(points, 5))
    out += ["};", "",
            "// Code points that (?i:x) matches in Oniguruma, for each ASCII letter x (s also",
            "// matches U+017F, k also U+212A), so that caseless groups need no PCRE2 case folding.",
            "inline constexpr std::string_view kCaselessAscii[26] = {"]
    for letter, points in caseless:
        out.append('    %s,  // %s' % (cpp_literal(points, 4), letter))
    out += ["};", "", "}  // namespace tessera::unicode_delta", ""]
    with open(header_path, "w", encoding="utf-8") as f:
        f.write("\n".join(out))


# ---------------------------------------------------------------------------------------------
# The corpus.

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world!",
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity.",
    "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in "
    "my purse, and nothing particular to interest me on shore, I thought I would sail about a "
    "little and see the watery part of the world.",
    "In 1905, Einstein published four groundbreaking papers. These outlined the theory of the "
    "photoelectric effect, explained Brownian motion, introduced special relativity, and "
    "demonstrated mass–energy equivalence.",
    "“Smart quotes” and ‘single ones’ — with em dashes – and en dashes… and ellipses.",
    "Mr. O'Neil's dog didn't bark; the Smiths' cat wouldn't stop.",
    "Ünïcödé äccents: café, naïve, façade, jalapeño, Ångström, Øresund, Łódź, Dvořák.",
    "Die Straße ist naß. Größere Übungen erfordern Geduld.",
    "Ça va? Très bien, merci! Où est la bibliothèque?",
    "¿Dónde está el baño? ¡Qué sorpresa!",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "Γρήγορη καφέ αλεπού πηδάει πάνω από το τεμπέλικο σκυλί.",
    "Ο Σωκράτης είπε: «ἓν οἶδα ὅτι οὐδὲν οἶδα».",
    "Türkçe: İstanbul'da ılık bir gün; I ı İ i.",
    "Tiếng Việt có nhiều dấu: Người Việt Nam yêu hòa bình.",
    "Kiswahili ni lugha ya Kibantu inayozungumzwa Afrika Mashariki.",
    "ALL CAPS SENTENCE WITH SOME WORDS AND ACRONYMS LIKE NASA, HTTP, and JSON.",
    "camelCaseIdentifier PascalCaseIdentifier snake_case_identifier SCREAMING_SNAKE_CASE kebab-case",
    "McDonald's iPhone eBay YouTube LaTeX macOS GmbH PhD",
    "A sentence with trailing spaces.   ",
    "   A sentence with leading spaces.",
    "Multiple\nlines\nof\ntext\n",
    "Paragraph one.\n\nParagraph two.\n\n\nParagraph three after two blank lines.",
    "Bullet list:\n- one\n- two\n  - nested\n* star\n1. numbered\n",
    "Q: What is 2 + 2?\nA: 4.",
    "Email me at someone@example.com or visit https://www.example.org/path?q=1&r=two#frag.",
    "C:\\Users\\name\\Documents\\file.txt and /usr/local/bin/tessera",
    "Hashtags #NLP #AI and mentions @user_name, $PRICE, 100% sure, 5° C, ±3, ×2, ÷4.",
]

CODE = [
    "#include <iostream>\n\nint main() {\n  std::cout << \"Hello, world!\\n\";\n  return 0;\n}\n",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "const x = {a: 1, b: [2, 3], c: {d: null}};\nconsole.log(JSON.stringify(x, null, 2));",
    "{\"name\": \"tessera\", \"version\": \"0.1.0\", \"ids\": [1, 2, 3], \"nested\": {\"ok\": true}}",
    "<html>\n  <body>\n    <p class=\"intro\">Hi &amp; welcome</p>\n  </body>\n</html>",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC;",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  echo \"$f\" | tr a-z A-Z\ndone\n",
    "x = a ** 2 + b // 3 - c % 4; y = x << 2 >> 1 | 0xFF & ~mask ^ flags",
    "if (a != b && c == d || !e) { return a <= b ? c : d; }",
    "    indented with four spaces\n\tindented with a tab\n\t\tand two tabs\n        and eight spaces",
    "// comment\n/* block\n   comment */\n/// doc comment\n# python comment\n-- sql comment",
    "regex = r\"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}]+\\s+(?!\\S)\"",
    "template <typename T>\nstd::vector<T> Map(const std::vector<T>& v, std::function<T(T)> f);",
    "a=1;b=2;c=a+b;d=[a,b,c];e={'k':'v'};f=lambda x:x+1",
    "git commit -m \"Fix bug #123\" && git push origin main --force-with-lease",
    "@@ -1,4 +1,5 @@\n-old line\n+new line\n+another\n context",
    "matrix = [[1, 2, 3],\n          [4, 5, 6],\n          [7, 8, 9]]",
    "key1=value1\nkey2 = value 2\n[section]\nname=\"quoted value\"\n",
    "```python\nprint('fenced')\n```\n\n| col1 | col2 |\n|------|------|\n| a    | b    |",
    "0x1F600 0b101010 0o777 1e-9 6.02e23 -42 +7 3.14f 10_000_000 1'000'000",
    "path/to/file.cpp:123:45: error: expected ';' before '}' token",
    "std::unordered_map<std::string, std::vector<int32_t>> m; m[\"key\"].push_back(-1);",
    "<|im_start|>user\nnot a special token here<|im_end|>",
]

NUMBERS = [
    "2024-06-28", "2025-01-01T12:34:56Z", "12/31/1999", "31.12.1999", "10:30 AM", "23:59:59.999",
    "1", "12", "123", "1234", "12345", "123456", "1234567", "12345678901234567890",
    "3.14159265358979323846", "1,234,567.89", "1.234.567,89", "-0.0001", "+1 (555) 123-4567",
    "$1,000,000", "€99.99", "£5", "¥1000", "100%", "50 km/h", "9.81 m/s²", "1/2 + 3/4 = 5/4",
    "Version 2.10.3-beta+build.45", "IPv4 192.168.0.1 and IPv6 2001:db8::ff00:42:8329",
    "ISBN 978-3-16-148410-0", "Call 911 or 112.", "Pi is approximately 3.14 and e is 2.718.",
    "Room 101, floor 7, building 42B", "The year 2000 problem (Y2K)",
    "٠١٢٣٤٥٦٧٨٩ ۰۱۲۳۴۵۶۷۸۹ ०१२३४५६७८९ ０１２３４５６７８９",
    "Ⅻ ⅷ ½ ¾ ⅓ ² ³ ¹ ⁴ ₀ ₁ ① ② ⑩ 𝟘 𝟙",
    "1st 2nd 3rd 4th 21st 100th",
    "0000000000000000000000000001",
    "3,14 2,71 1 000 000 1 000,5",
]

CJK = [
    "今天天气很好，我们去公园散步吧。",
    "中华人民共和国成立于1949年10月1日。",
    "我爱自然语言处理！你呢？",
    "東京は日本の首都です。ひらがなとカタカナと漢字を使います。",
    "吾輩は猫である。名前はまだ無い。",
    "コンピューターサイエンス、プログラミング、アルゴリズム",
    "한국어는 한글로 씁니다. 안녕하세요, 만나서 반갑습니다!",
    "대한민국의 수도는 서울입니다.",
    "繁體中文與简体中文混合使用。",
    "Mixed 中文 and English 混合 text 文本.",
    "全角ＡＢＣ　ｆｕｌｌｗｉｄｔｈ　（括弧）【注意】「引用」",
    "𠀀𠀁𠀂 𪚥 𰻞𰻞面 (CJK extensions B, G)",
    "々〆〇ヶ ー・「」『』",
    "漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字",
]

ARABIC = [
    "مرحبا بالعالم",
    "اللغة العربية جميلة جداً.",
    "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ",
    "العدد ١٢٣ والعدد 456 في نص واحد",
    "שלום עולם! עברית נכתבת מימין לשמאל.",
    "فارسی: سلام دنیا، حال شما چطور است؟",
    "اردو: یہ ایک جملہ ہے۔",
    "Mixed English and العربية in one line.",
    "\u200fRTL mark and \u200eLTR mark\u202a embedding\u202c",
]

DEVANAGARI = [
    "नमस्ते दुनिया",
    "हिन्दी भारत की राजभाषा है।",
    "संस्कृतम् एका प्राचीना भाषा अस्ति।",
    "क्षत्रिय ज्ञान श्री त्र द्ध",
    "मराठी: महाराष्ट्र राज्याची भाषा",
    "বাংলা ভাষা সুন্দর।",
    "தமிழ் ஒரு பழமையான மொழி.",
    "తెలుగు భాష",
    "ગુજરાતી ભાષા",
    "ਪੰਜਾਬੀ ਭਾਸ਼ਾ",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "ພາສາລາວ",
    "ខ្មែរ",
    "မြန်မာဘာသာ",
    "ქართული ენა",
    "Հայերեն լեզու",
    "አማርኛ ቋንቋ",
]

EMOJI = [
    "👨‍👩‍👧‍👦 family",
    "👍🏽 thumbs up medium skin tone, 👋🏿 wave dark, 🧑🏻‍💻 technologist light",
    "🏳️‍🌈 🏴‍☠️ ❤️‍🔥 🧑‍🤝‍🧑 👩‍❤️‍💋‍👨",
    "🇺🇸🇯🇵🇩🇪🇫🇷 flags",
    "1️⃣ 2️⃣ #️⃣ *️⃣ keycaps",
    "😀😃😄😁😆😅😂🤣🥲☺️😊",
    "I ❤ emoji ❤️ ✔ ✔️ ☀ ☀️",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿 tag sequence (Scotland)",
    "emoji🎉without🎉spaces🎉between",
    "🫨🫷🫸 (Unicode 15 emoji)",
    "👩🏽‍🦰👨🏻‍🦱👩🏿‍🦳🧔🏼‍♂️",
    "🤷‍♀️🤦🏻‍♂️🙆🏾‍♀️",
]

COMBINING = [
    "e\u0301 vs \u00e9 (decomposed vs composed)",
    "Zalgo: Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349a\u0308\u0310\u0352l\u0310g\u0334o\u0357",
    "n\u0303 a\u0300 o\u0302 u\u0308 c\u0327 a\u030a",
    "Vie\u0302\u0323t Nam",
    "\u0301 leading combining mark",
    "x\u20dd \u20e3 enclosing marks",
    "क\u093c ख\u093c (nukta)",
    "\u0915\u094d\u200d\u0937 zero-width joiner inside Devanagari",
    "a\u200bb\u200cc\u200dd (zero-width space, non-joiner, joiner)",
    "\ufeffBOM at start",
    "soft\u00adhyphen",
    "Hangul jamo: \u1100\u1161\u11a8 vs 각",
    "\u0e01\u0e34\u0e48 Thai with marks",
    "A\u0332B\u0332C\u0332 underlined",
]

WHITESPACE = [
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", " \n ", "\t\n\t",
    "word  word", "word   word", "word    word", "word\t\tword", "word \t word", "word\t word",
    "a \n\n b", "end with space ", "end with spaces    ", "end with newline\n",
    "end with newlines\n\n\n", "    ", "        leading", "trailing        ",
    "nbsp\u00a0here", "ideographic\u3000space", "line\u2028separator", "para\u2029separator",
    "nel\u0085char", "vt\u000bff\u000c", "mongolian\u180evowel separator",
    "thin\u2009space and hair\u200aspace and narrow\u202fnbsp", "figure\u2007space",
    "x  \n  y", "  \t  \n  \t  ", "a\n\n\n\n\nb", " a b  c   d    e     f",
    "\u00a0\u00a0 nbsp run", "\u3000\u3000全角スペース",
]

CRLF = [
    "line one\r\nline two\r\nline three\r\n",
    "mixed\r\nendings\nhere\rand there\r\n\r\n",
    "\r\n\r\n\r\n",
    "trailing space \r\n next",
    "\tindent\r\n\tindent\r\n",
    "a\r\rb\n\rc",
    "csv,data,here\r\n1,2,3\r\n4,5,6\r\n",
    "/path/\r\n",
    "text !\r\n?\r\n",
]

SPECIALS = [
    "<|start|>user<|message|>Hello<|end|>",
    "<|start|>assistant<|channel|>final<|message|>Hi there!<|return|>",
    "before<|endoftext|>after",
    "<|startoftext|><|endoftext|>",
    "<|start|><|start|><|start|>",
    "<<|end|>>",
    "<|start|",
    "|start|>",
    "<|star",
    "< |start| >",
    "<|START|>",
    "<|reserved_200000|> and <|reserved_200001|>",
    "<|constrain|>json<|message|>{\"a\": 1}<|call|>",
    "text<|endofprompt|>more text",
    "<|unknown_token|>",
    "<|channel|>analysis<|message|>thinking...<|end|><|start|>assistant<|channel|>final<|message|>42<|return|>",
    " <|end|> ",
    "\n<|end|>\n",
    "word<|end|>word",
    "   <|message|>   ",
    "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{\"temp\": 20}<|end|>",
    "<|<|end|>|>",
    "<|end|><|end|>",
    "x<|endoftext|",
    "'s<|end|>'s",
    "<|return|>\r\n<|call|>",
]

HARMONY = [
    # gpt-oss.md §4.3 (a): harmony test_simple_convo.txt rendering, 64 ids.
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, "
    "final. Channel must be included for every message.<|end|><|start|>user<|message|>What is "
    "2 + 2?<|end|><|start|>assistant",
    # gpt-oss.md §4.3 (b): HF chat template rendering with the date pinned, 81 ids.
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: medium\n\n# Valid "
    "channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
    "<|start|>developer<|message|># Instructions\n\nYou are a helpful assistant.<|end|><|start|>"
    "user<|message|>Hello<|end|><|start|>assistant",
]

UNICODE_NEW = [
    # Letters/numbers assigned after Unicode 14 (PCRE2 10.42 sees them as unassigned).
    "a\U00031350b CJK extension H",
    "x\U0002EBF0y CJK extension I",
    "\U00011F04\U00011F05\U00011F06 Kawi letters \U00011F50\U00011F51 Kawi digits",
    "\U00010D4A\U00010D4B Garay and \U000105C0 Todhri",
    "\U0001E4D0\U0001E4D1 Nag Mundari \U0001E4F0\U0001E4F1",
    "Kaktovik numerals \U0001D2C0\U0001D2C1\U0001D2C2",
    "Unassigned in 16: a\U00010940b \U000323B0",
    "private use \ue000\uf8ff \U000F0000",
    "noncharacters \ufdd0 \ufffe \U0001FFFF",
]


def contraction_texts():
    suffixes = ["s", "t", "re", "ve", "m", "ll", "d"]
    out = []
    for suffix in suffixes:
        variants = {suffix, suffix.upper(), suffix.capitalize()}
        if len(suffix) == 2:
            variants.add(suffix[0] + suffix[1].upper())
        for v in sorted(variants):
            out.append("it'%s THEY'%s We'%s 'x'%s" % (v, v, v, v))
    out += [
        "don't DON'T Don't dOn'T can't won't isn't",
        "I'm I'M you're YOU'RE we've WE'VE she'll SHE'LL he'd HE'D",
        "the cat's toy, the CAT'S TOY, the dogs' bones",
        "'s 's 'S 't 're 've 'm 'll 'd",
        "''s '''ll ' s 's's",
        "rock'n'roll o'clock y'all ma'am",
        "don’t (curly apostrophe) it’s we’re",
        "don'ſ x'K 'ſ (long s and Kelvin sign are not folded)",
        "L'ÉCOLE l'été d'Artagnan",
        "123's 1990's A's B'S",
        "'S'T'RE'VE'M'LL'D",
        "abc'sdef ABC'TEST x'reY",
        " 've 'LL",
        "'",
        "'s",
    ]
    return out


def long_texts(rng):
    words = ["alpha", "beta", "gamma", "delta", "épsilon", "ζήτα", "эта", "θ", "ιώτα", "καππα"]
    return [
        "a" * 3000,
        "supercalifragilisticexpialidocious" * 40,
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
        "".join(rng.choice("ACGT") for _ in range(2000)),
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/")
                for _ in range(1500)),
        "".join(str(rng.randrange(10)) for _ in range(1000)),
        " " * 1000 + "x",
        "\n" * 300,
        "\t" * 200 + "tabbed",
        "漢" * 1000,
        "😀" * 300,
        "é" * 500,
        "e\u0301" * 300,
        "-" * 500,
        "=" * 120 + "\n" + "#" * 120,
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAaaaa" * 20,
        "".join(rng.choice(words) for _ in range(400)),
        "http://example.com/" + "/".join("seg%d" % i for i in range(200)),
        "ＡＢＣ" * 300,
        "abc123" * 300,
        "🇺🇸" * 100,
    ]


def random_texts(rng, count):
    """Random code point soup from ranges that exercise every regex branch."""
    pools = [
        (0x20, 0x7E), (0x09, 0x0D), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x52F),
        (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x1E00, 0x1FFF),
        (0x2000, 0x206F), (0x2070, 0x2BFF), (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
        (0xE000, 0xE0FF), (0xFE00, 0xFFFD), (0x10000, 0x1FFFF), (0x1F300, 0x1FAFF),
        (0x20000, 0x323AF), (0xE0000, 0xE01EF), (0x80, 0x9F),
    ]
    specials = ["'s", "'LL", "'Re", "\r\n", "  ", "<|end|>", "<|start|>", "\u200d", "\ufe0f", "'"]
    out = []
    for i in range(count):
        n = rng.randrange(1, 60)
        chars = []
        ascii_only = i % 4 == 0
        for _ in range(n):
            r = rng.random()
            if r < 0.08:
                chars.append(rng.choice(specials))
            elif ascii_only or r < 0.45:
                chars.append(chr(rng.randrange(0x09, 0x7F)))
            else:
                lo, hi = rng.choice(pools)
                c = rng.randrange(lo, hi + 1)
                if 0xD800 <= c < 0xE000:
                    c = 0xFFFD
                chars.append(chr(c))
        out.append("".join(chars))
    return out


def misc_texts():
    return ["", "a", "A", "0", ".", "'", "\x00", "\x00\x01\x02\x7f", "\U0010FFFD", "\uFFFD",
            "ſ", "ǅ Dž ǈ ǋ (titlecase digraphs)", "ʰʲʷ ˢ ᵃ (modifier letters)",
            "Iñtërnâtiônàlizætiøn", "ÀÉÎÕÜ àéîõü", "ǅungla", "ᏣᎳᎩ Cherokee", "ꓮꓯ Lisu",
            "\U0001D400\U0001D401 math bold", "ℌℑℜ ℂℕℚℝℤ", "ﬁ ﬂ ﬀ ligatures", "ÆØÅ æøå"]


def build_corpus(rng):
    corpus = []

    def add(category, texts):
        for t in texts:
            corpus.append((category, t))

    add("prose", PROSE)
    add("code", CODE)
    add("numbers", NUMBERS)
    add("cjk", CJK)
    add("rtl", ARABIC)
    add("indic", DEVANAGARI)
    add("emoji", EMOJI)
    add("combining", COMBINING)
    add("whitespace", WHITESPACE)
    add("crlf", CRLF)
    add("contractions", contraction_texts())
    add("special", SPECIALS)
    add("harmony", HARMONY)
    add("unicode16", UNICODE_NEW)
    add("misc", misc_texts())
    # Mixed documents stitched from the categories above.
    pool = PROSE + CODE + NUMBERS + CJK + ARABIC + DEVANAGARI + EMOJI + COMBINING + CRLF
    mixed = []
    for _ in range(40):
        parts = rng.sample(pool, rng.randrange(2, 6))
        seps = [" ", "\n", "\n\n", "\t", "  ", "\r\n", ""]
        mixed.append("".join(p + rng.choice(seps) for p in parts))
    add("mixed", mixed)
    add("long", long_texts(rng))
    add("random", random_texts(rng, 120))
    return corpus


def decode_cases(tok, rng, corpus_ids):
    """Id sequences whose decoding needs lossy UTF-8 handling, plus ordinary ones."""
    vocab = tok.get_vocab()  # token string (byte-level) -> id
    byte_chars = bytes_to_unicode()
    char_to_byte = {c: b for b, c in byte_chars.items()}
    single_byte = {char_to_byte[t]: i for t, i in vocab.items() if len(t) == 1 and t in char_to_byte}
    high_tokens = sorted(i for t, i in vocab.items()
                         if all(c in char_to_byte for c in t) and any(char_to_byte[c] >= 0x80 for c in t))
    cases = []
    # Every single-byte token >= 0x80 alone (lone continuation/lead bytes).
    for b in range(0x80, 0x100):
        if b in single_byte:
            cases.append([single_byte[b]])
    sb = lambda *bs: [single_byte[b] for b in bs]
    fixed = [
        sb(0xE2, 0x82), sb(0xE2, 0x82, 0xAC), sb(0xE2, 0x82, 0x41), sb(0xF0, 0x9F, 0x98),
        sb(0xF0, 0x9F, 0x98, 0x80), sb(0xED, 0xA0, 0x80), sb(0xC0, 0xAF), sb(0xE0, 0x80, 0xAF),
        sb(0xF4, 0x90, 0x80, 0x80), sb(0xF5, 0x80), sb(0xC2), sb(0xC2, 0x41), sb(0xE1, 0x80),
        sb(0xF1, 0x80, 0x80), sb(0xF1, 0x80, 0x80, 0x41), sb(0xFF, 0xFE), sb(0x80, 0x80, 0x80),
        sb(0xE0, 0xA0), sb(0xE0, 0x9F, 0x80), sb(0xF0, 0x8F, 0x80, 0x80), sb(0xED, 0x9F, 0xBF),
        sb(0xEF, 0xBF, 0xBD), sb(0xC3) + [200006] + sb(0xA9), sb(0xE2) + [200007, 200008] + sb(0x82, 0xAC),
        [200006, 200007, 200008, 199998, 199999, 200018], [],
    ]
    cases += fixed
    # Pieces of real encodings, cut so that multi-byte characters are split.
    for ids in corpus_ids:
        if len(ids) >= 3 and rng.random() < 0.25:
            a = rng.randrange(len(ids))
            b = rng.randrange(a, min(len(ids), a + 12) + 1)
            cases.append(ids[a:b])
    # Random id soup.
    specials = sorted(tok.get_added_tokens_decoder().keys())
    for _ in range(60):
        n = rng.randrange(1, 10)
        seq = []
        for _ in range(n):
            r = rng.random()
            if r < 0.5:
                seq.append(rng.choice(high_tokens))
            elif r < 0.6:
                seq.append(rng.choice(specials))
            else:
                seq.append(rng.randrange(0, 199998))
        cases.append(seq)
    return cases


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# Added tokens appended to o200k_harmony for golden_extra.jsonl: (content, special, normalized).
EXTRA_ADDED = [
    ("xab", True, False),
    ("xabcd", True, False),
    ("bcdzz", True, False),
    ("o w", False, False),
    ("hello wor", False, True),
    ("abc", False, False),
    ("<|abc|>", True, False),
    ("hello", False, True),       # already a vocabulary token: keeps its model id
    ("\u0120space", False, False),  # "Ġspace": byte-level spelling, decodes to " space"
    ("\U0001F642\U0001F642", False, False),
]

EXTRA_TEXTS = [
    "1xabcdzz xabcq xbcdzz", "say hello world", "hello", "hello there", "Hello hello HELLO",
    "\u0120space and \u0120spaces", " space", "<|abc|> abc <|abc abc|>", "xab<|end|>xabcd",
    "\U0001F642\U0001F642\U0001F642", "o wo w", "hello wor hello world", "xa<|start|>bcdzz",
    "<|abc|><|start|>abc", "xxabcdd", "bcdz", "no added tokens here", "",
]

SPLIT_CASES = [
    (r"x*", ["abxxc", "", "xx", "x", "ab"]),
    (r"a?", ["bab", "aab", "b"]),
    (r"(?=a)", ["banana", "a", ""]),
    (r"(?<=a)", ["banana", "aa"]),
    (r"\s+", [" a  b ", "\u3000x\u00a0y\u180ez\x85w"]),
    (r"[^\s]+", ["ab c\u2028d"]),
    (r"\S+", ["ab c\u180ed"]),
    (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)", ["'S'T'\u017f'\u212a 'RE 'rE 'Ll 'LL 'D"]),
    (r"(?i:k)+", ["kK\u212ax", "abc"]),
    (r"\p{Lu}+", ["ABC d\u00e9F \u01c5 \u03a3\U00010D4A"]),
    (r"\p{N}{1,3}", ["12345 \u0663\u0664\u0665 \U00011F50"]),
    (r"\p{N}{,2}", ["12345"]),
    # Ruby's `$`: the end of a line (before any newline) or of the subject (DeepSeek LLM's \s+$).
    (r"\s+$", ["a  ", "a  \nb \n", "  \n\n ", " x \r\n", ""]),
    (r"b$|\s", ["ab\nab", "b b\r\nb"]),
    (r".", ["a\nb\r"]),
    (r"[a-c]+", ["abcdcba"]),
    (r"\x41|\u00e9|\x{1F600}", ["A\u00e9B\U0001F600"]),
    (r"\t|\v", ["a\tb\x0bc"]),
    (r"(a)(b)?", ["abab"]),
    (r"a|ab", ["abab"]),
    (r"a+?", ["aaa"]),
    (r"(?>a+)b", ["aaab aa"]),
    (r"\p{L}+(?!\p{N})", ["abc1 def ghi2"]),
    (r"[\p{L}\p{M}]+", ["e\u0301t\u00e9 na\u0308ive"]),
    # Oniguruma: an isolated option runs to the end of the group, alternatives included:
    # ab(?i)c|def|gh == ab(?i:c|def|gh). ((?i)st itself is refused: Oniguruma folds \ufb06 to st.)
    (r"ab(?i)c|def|gh", ["abC DEF gh abc xdEf GH"]),
    (r"(x(?i)y|z)+", ["xYZxyz XY"]),
    (r"[-a]+|[b-]", ["a-b-c"]),
    (r"\.|\||\(|\)", ["a.b|c(d)"]),
    (r"\p{P}+|\p{S}+", ["hi!? $5 + \u00a9"]),
    (r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", ["Hello  world 123!!  \n x"]),
]


def splice_added_tokens(raw_text, extra_entries):
    data = json.loads(raw_text)
    data["added_tokens"].extend(extra_entries)
    return json.dumps(data, ensure_ascii=False)


def write_extra(raw_text, out_path):
    base = json.loads(raw_text)
    vocab = base["model"]["vocab"]
    next_id = max(max(vocab.values()), max(t["id"] for t in base["added_tokens"])) + 1
    entries = []
    for content, special, normalized in EXTRA_ADDED:
        if content in vocab:
            token_id = vocab[content]
        else:
            token_id = next_id
            next_id += 1
        entries.append({"id": token_id, "content": content, "single_word": False, "lstrip": False,
                        "rstrip": False, "normalized": normalized, "special": special})
    tok = Tokenizer.from_str(splice_added_tokens(raw_text, entries))
    for e in entries:
        if tok.token_to_id(e["content"]) != e["id"]:
            sys.exit("tokenizers assigned %s to %r, expected %d" % (tok.token_to_id(e["content"]), e["content"], e["id"]))
    ordinary = Tokenizer.from_str(splice_added_tokens(raw_text, entries))
    ordinary.encode_special_tokens = True
    lines = [{"kind": "meta", "tokenizers": tokenizers.__version__, "added_tokens": entries}]
    for text in EXTRA_TEXTS:
        ids = tok.encode(text).ids
        # Not always the text: "Ġspace" is a byte-level spelling and decodes to " space".
        lines.append({"kind": "encode", "text": text, "ids": ids, "ordinary_ids": ordinary.encode(text).ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False)})
    euro = tok.encode("\u20ac").ids  # one token for three bytes
    for ids in [[e["id"] for e in entries], [entries[3]["id"], entries[8]["id"]], [entries[9]["id"]] + euro,
                [entries[8]["id"], 200006, entries[3]["id"]]]:
        lines.append({"kind": "decode", "ids": ids, "text": tok.decode(ids, skip_special_tokens=False)})
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        for entry in lines:
            f.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")


def write_bytelevel(raw_text, corpus, out_path):
    """o200k_harmony with GPT-2's pre-tokenizer (ByteLevel with use_regex: true) instead."""
    data = json.loads(raw_text)
    data["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                             "use_regex": True}
    tok = Tokenizer.from_str(json.dumps(data, ensure_ascii=False))
    lines = [{"kind": "meta", "tokenizers": tokenizers.__version__, "pre_tokenizer": data["pre_tokenizer"]}]
    for category, text in corpus:
        if category in ("long", "random", "mixed"):
            continue
        lines.append({"kind": "encode", "text": text, "ids": tok.encode(text).ids})
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        for entry in lines:
            f.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")


def write_split_cases(out_path):
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        for pattern, texts in SPLIT_CASES:
            split = pre_tokenizers.Split(Regex(pattern), "isolated")
            for text in texts:
                pieces = [text[a:b] for _, (a, b) in split.pre_tokenize_str(text)]
                f.write(json.dumps({"pattern": pattern, "text": text, "pieces": pieces},
                                   ensure_ascii=False, separators=(",", ":")) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer-json", default=DEFAULT_JSON)
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "tests", "data", "tokenizer"))
    parser.add_argument("--header", default=os.path.join(ROOT, "src", "tokenizer", "unicode_delta.h"))
    parser.add_argument("--skip-unicode", action="store_true", help="only write golden.jsonl")
    args = parser.parse_args()

    if unicodedata.unidata_version != "14.0.0":
        sys.exit("needs Python's unicodedata 14.0.0 (Python 3.11), the Unicode version of PCRE2 "
                 "10.42; found %s" % unicodedata.unidata_version)
    os.makedirs(args.out_dir, exist_ok=True)
    if not args.skip_unicode:
        write_unicode_tables(os.path.join(args.out_dir, "onig_classes.txt"), args.header)

    with open(args.tokenizer_json, "rb") as f:
        raw = f.read()
    tok = Tokenizer.from_str(raw.decode("utf-8"))
    ordinary = Tokenizer.from_str(raw.decode("utf-8"))
    ordinary.encode_special_tokens = True

    rng = random.Random(20250628)
    corpus = build_corpus(rng)
    lines = []
    all_ids = []
    for category, text in corpus:
        ids = tok.encode(text).ids
        decoded = tok.decode(ids, skip_special_tokens=False)
        if decoded != text:
            sys.exit("round trip failed for %r" % text)
        entry = {"kind": "encode", "category": category, "text": text, "ids": ids}
        if "<|" in text:
            entry["ordinary_ids"] = ordinary.encode(text).ids
        lines.append(entry)
        all_ids.append(ids)
    n_encode = len(lines)
    for ids in decode_cases(tok, rng, all_ids):
        lines.append({"kind": "decode", "ids": ids, "text": tok.decode(ids, skip_special_tokens=False)})
    meta = {"kind": "meta", "tokenizers": tokenizers.__version__,
            "tokenizer_json_sha256": hashlib.sha256(raw).hexdigest(),
            "encode_cases": n_encode, "decode_cases": len(lines) - n_encode}
    path = os.path.join(args.out_dir, "golden.jsonl")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for entry in [meta] + lines:
            f.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")
    print("wrote %s: %d encode cases, %d decode cases, %d bytes"
          % (path, n_encode, len(lines) - n_encode, os.path.getsize(path)))
    write_extra(raw.decode("utf-8"), os.path.join(args.out_dir, "golden_extra.jsonl"))
    write_split_cases(os.path.join(args.out_dir, "split_cases.jsonl"))
    write_bytelevel(raw.decode("utf-8"), corpus, os.path.join(args.out_dir, "golden_bytelevel.jsonl"))


if __name__ == "__main__":
    main()
