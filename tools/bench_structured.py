#!/usr/bin/env python3
"""Throughput of a running `tessera serve` with structured outputs against without (issue 27
point 5): C client threads each send R non-streaming /v1/completions requests, all constrained
(response_format json_schema, a schema whose values are long enough to fill the reply) or all
free; reported: completion tokens per second over the wall time of each round, rounds
interleaved (free, constrained, free, ...) so that a busy host hurts both alike, and the median
ratio constrained / free. Standard library only.

--schema list (default): a list of objects; constrained replies end when their JSON is complete,
often before --max-tokens, so the constrained rounds also run fewer sequences at their end.
--schema long-string: one string with a minLength no reply reaches, so both sides generate
exactly --max-tokens per request and the ratio is the per-step cost of the mask alone.

Usage: bench_structured.py BASE_URL [--concurrency 8] [--per-client 2] [--max-tokens 128]
                           [--rounds 3] [--prompt TEXT] [--schema list|long-string]
"""
import argparse
import json
import statistics
import threading
import time
import urllib.request

SCHEMA = {"type": "object", "properties": {
    "items": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 40}, "count": {"type": "integer", "minimum": 0, "maximum": 10**9},
        "note": {"type": "string", "maxLength": 200}}, "required": ["name", "count", "note"],
        "additionalProperties": False}, "maxItems": 50}},
    "required": ["items"], "additionalProperties": False}
LONG_STRING = {"type": "object", "properties": {"text": {"type": "string", "minLength": 100000}},
               "required": ["text"], "additionalProperties": False}


def one(base, prompt, max_tokens, seed, constrained):
    body = {"prompt": prompt, "max_tokens": max_tokens, "seed": seed, "temperature": 1.0}
    if constrained:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA}}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as res:
        return json.loads(res.read())["usage"]["completion_tokens"]


def level(base, prompt, c, per_client, max_tokens, constrained, seed0):
    tokens = [0] * c

    def client(i):
        for r in range(per_client):
            tokens[i] += one(base, prompt, max_tokens, seed0 + i * 1000 + r, constrained)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(c)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    return sum(tokens) / seconds, sum(tokens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--per-client", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt", default="inventory = ")
    ap.add_argument("--schema", choices=["list", "long-string"], default="list")
    a = ap.parse_args()
    global SCHEMA
    if a.schema == "long-string":
        SCHEMA = LONG_STRING
    one(a.base, a.prompt, 4, 1, True)  # compile the schema (cached afterwards), warm the slots
    ratios = []
    for r in range(a.rounds):
        free, free_tokens = level(a.base, a.prompt, a.concurrency, a.per_client, a.max_tokens, False, 10 * r)
        shaped, shaped_tokens = level(a.base, a.prompt, a.concurrency, a.per_client, a.max_tokens, True, 10 * r)
        ratios.append(shaped / free)
        print(f"round {r + 1}: free {free:.1f} tok/s ({free_tokens} tokens), constrained {shaped:.1f} tok/s "
              f"({shaped_tokens} tokens), ratio {shaped / free:.3f}")
    print(f"C={a.concurrency}: constrained / free, median of {a.rounds}: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
