#!/usr/bin/env python3
"""Single-thread tokenizer throughput: tessera vs tiktoken vs Hugging Face tokenizers.

All three encode the same 1 MiB of mixed text, built exactly as bench/tokenizer_bench.cpp
builds it (the "encode" texts of tests/data/tokenizer/golden.jsonl except the categories
"long" and "random", in file order, each followed by "\\n", repeated to 1 MiB and cut at a
character boundary); the FNV-1a 64 hash of the text is printed by both programs.

tiktoken gets the same vocabulary: an Encoding built from tokenizer.json (mergeable ranks from
the byte-level vocabulary, pat_str = the Split regex, special tokens from added_tokens). Before
timing, its ids are checked against HF tokenizers on every golden text and on the bench text.

Usage (pinned versions in tools/requirements.txt):
  tools/.venv/bin/python tools/bench_tokenizers.py --tessera-bench build/tokenizer_bench
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# One thread for HF tokenizers (rayon); tiktoken's encode() is single-threaded already.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tiktoken  # noqa: E402
import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from make_tokenizer_golden import bytes_to_unicode  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT_BYTES = 1 << 20


def bench_text(golden_path):
    unit = []
    with open(golden_path, encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            if entry["kind"] != "encode" or entry["category"] in ("long", "random"):
                continue
            unit.append(entry["text"] + "\n")
    unit = "".join(unit).encode("utf-8")
    data = unit * (TEXT_BYTES // len(unit) + 1)
    cut = TEXT_BYTES
    while data[cut] & 0xC0 == 0x80:
        cut -= 1
    return data[:cut].decode("utf-8"), [json.loads(l) for l in open(golden_path, encoding="utf-8")]


def fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def unicode_to_bytes():
    """The inverse of GPT-2's byte -> character table (the one make_tokenizer_golden.py uses)."""
    return {c: b for b, c in bytes_to_unicode().items()}


def tiktoken_encoding(tokenizer_json):
    with open(tokenizer_json, encoding="utf-8") as f:
        data = json.load(f)
    char_to_byte = unicode_to_bytes()
    ranks = {bytes(char_to_byte[c] for c in token): rank for token, rank in data["model"]["vocab"].items()}
    steps = data["pre_tokenizer"]["pretokenizers"]
    pattern = steps[0]["pattern"]["Regex"]
    specials = {t["content"]: t["id"] for t in data["added_tokens"]}
    return tiktoken.Encoding(name="o200k_harmony_from_tokenizer_json", pat_str=pattern,
                             mergeable_ranks=ranks, special_tokens=specials)


def median_times(fn, repeats):
    """Median wall and CPU seconds of fn() (the machine may be shared: CPU time is the steadier)."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def run_tessera(binary, repeats):
    out = subprocess.run(
        [binary, "--benchmark_filter=^BM_Encode/|^BM_LoadTokenizerJson", "--benchmark_repetitions=%d" % repeats,
         "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
        check=True, capture_output=True, text=True).stdout
    results = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            results[b["run_name"]] = b
    encode = results["BM_Encode/real_time"]
    load = results["BM_LoadTokenizerJson/real_time"]
    # Google Benchmark reports times in the benchmark's unit (milliseconds here).
    return encode["real_time"] / 1e3, encode["cpu_time"] / 1e3, encode["label"], load["real_time"] / 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer-json", default="/work/shared/models/o200k_harmony/tokenizer.json")
    parser.add_argument("--golden", default=os.path.join(ROOT, "tests", "data", "tokenizer", "golden.jsonl"))
    parser.add_argument("--tessera-bench", help="path of the built tokenizer_bench binary")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()

    text, golden = bench_text(args.golden)
    raw = text.encode("utf-8")
    print("text: %d bytes, fnv1a=%s" % (len(raw), fnv1a(raw)))

    hf, hf_load = timed(lambda: Tokenizer.from_file(args.tokenizer_json))
    enc, tt_load = timed(lambda: tiktoken_encoding(args.tokenizer_json))

    # Same ids as HF on the whole golden corpus and on the bench text, before any timing.
    mismatches = 0
    for entry in golden:
        if entry.get("kind") != "encode":
            continue
        if enc.encode(entry["text"], allowed_special="all") != entry["ids"]:
            mismatches += 1
            print("tiktoken differs on %r" % entry["text"][:60])
    hf_ids = hf.encode(text).ids
    tt_ids = enc.encode(text, allowed_special="all")
    print("golden texts where tiktoken differs from HF: %d; bench text: %s (%d tokens)"
          % (mismatches, "identical" if hf_ids == tt_ids else "DIFFERENT", len(hf_ids)))

    rows = []  # name, wall s, cpu s, load s
    if args.tessera_bench:
        wall, cpu, label, load = run_tessera(args.tessera_bench, args.repeats)
        print("tessera bench label: %s" % label)
        rows.append(("tessera", wall, cpu, load))
    wall, cpu = median_times(lambda: enc.encode(text, allowed_special="all"), args.repeats)
    rows.append(("tiktoken %s" % tiktoken.__version__, wall, cpu, tt_load))
    wall, cpu = median_times(lambda: hf.encode(text), args.repeats)
    rows.append(("tokenizers %s" % tokenizers.__version__, wall, cpu, hf_load))
    # HF is much slower on one long string than on many short ones; for reference, the same
    # bytes as separate lines (one thread; ids differ at line ends, so this is not the same task).
    lines = text.splitlines(keepends=True)
    wall, cpu = median_times(lambda: hf.encode_batch(lines), args.repeats)
    rows.append(("tokenizers %s, encode_batch of the %d lines" % (tokenizers.__version__, len(lines)), wall, cpu,
                 hf_load))

    mb = len(raw) / 1e6
    print()
    print("| implementation | MB/s (wall) | MB/s (CPU) | ms per 1 MiB (wall) | load tokenizer.json (s) |")
    print("|---|---|---|---|---|")
    for name, wall, cpu, load in rows:
        print("| %s | %.1f | %.1f | %.1f | %.2f |" % (name, mb / wall, mb / cpu, wall * 1e3, load))
    print("(medians of %d runs; 1 MB = 10^6 bytes)" % args.repeats)
    if mismatches or hf_ids != tt_ids:
        sys.exit(1)


if __name__ == "__main__":
    main()
