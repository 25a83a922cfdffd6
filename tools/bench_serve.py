#!/usr/bin/env python3
"""Throughput and latency of a running `tessera serve` against concurrency (issue 17 point 7).

For each concurrency C: C client threads each send `--per-client` streaming completion requests
(`--prompt-tokens` prompt ids, `--gen` tokens; logprobs on, so that every token arrives as its
own chunk even when it has no text, as with a synthetic model's ids) and time, from the
SSE stream, the time to first token (TTFT) and the gaps between tokens (ITL). Reported per C:
aggregate decode tokens/s over the wall time, its ratio to C = 1, TTFT p50 and ITL p50/p99, and
the engine's decode-only steps from /metrics over the level (their mean time, the bytes each had
to read, the distinct experts per MoE layer), and with --bandwidth GB/s (a read probe run beside,
e.g. q8_bench read_bandwidth) the step time over the byte roofline. Standard library only.

Usage: bench_serve.py BASE_URL [--concurrency 1,2,4,8,16] [--gen 32] [--prompt-tokens 64]
                      [--per-client 2] [--bandwidth GBPS] [--json]
"""
import argparse
import json
import statistics
import threading
import time
import urllib.request


def stream_one(base, prompt_ids, gen, seed):
    body = json.dumps({"prompt": prompt_ids, "max_tokens": gen, "stream": True, "seed": seed,
                       "temperature": 1.0, "logprobs": 0}).encode()  # logprobs: one chunk per token, text or not
    req = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    times = []
    with urllib.request.urlopen(req, timeout=3600) as res:
        for raw in res:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(chunk["error"]["message"])
            for choice in chunk.get("choices", []):
                if choice.get("finish_reason") is None:
                    times.append(time.perf_counter())
    return start, times


def metrics(base):
    out = {}
    for line in urllib.request.urlopen(base + "/metrics", timeout=60).read().decode().splitlines():
        if line.startswith("tessera:decode_step"):
            name, value = line.split()
            out[name[len("tessera:"):]] = float(value)
    return out


def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--concurrency", default="1,2,4,8,16")
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--per-client", type=int, default=2)
    ap.add_argument("--bandwidth", type=float, default=0.0, help="read bandwidth in GB/s for step / roofline")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    base_rate = None
    for c in [int(x) for x in a.concurrency.split(",")]:
        results, errors = [], []

        def client(k):
            for j in range(a.per_client):
                ids = [(17 * (k * 131 + j) + i) % 1000 + 10 for i in range(a.prompt_tokens)]  # distinct prompts
                try:
                    results.append(stream_one(a.base, ids, a.gen, k * 1000 + j))
                except Exception as e:  # noqa: BLE001
                    errors.append(repr(e))

        before = metrics(a.base)
        wall0 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(c)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - wall0
        after = metrics(a.base)
        delta = {k: after[k] - before.get(k, 0.0) for k in after}
        steps = max(delta.get("decode_steps_total", 0.0), 1.0)
        step_ms = 1e3 * delta.get("decode_step_seconds_total", 0.0) / steps
        step_gb = delta.get("decode_step_bytes_total", 0.0) / steps / 1e9
        experts = delta.get("decode_step_experts_per_layer_total", 0.0) / steps
        if errors:
            raise SystemExit(f"concurrency {c}: {len(errors)} errors, first: {errors[0]}")
        tokens = sum(len(t) for _, t in results)
        ttft = [t[0] - s for s, t in results if t]
        itl = [b - a_ for _, t in results for a_, b in zip(t, t[1:])]
        # Decode rate: tokens after each request's first, over the span from the first first-token
        # to the last token (prefill of the first wave excluded).
        first = min(t[0] for _, t in results)
        last = max(t[-1] for _, t in results)
        decode_rate = (tokens - len(results)) / (last - first) if last > first else float("nan")
        if base_rate is None:
            base_rate = decode_rate
        row = {"concurrency": c, "requests": len(results), "tokens": tokens, "wall_s": wall,
               "aggregate_tok_s": decode_rate, "vs_c1": decode_rate / base_rate,
               "ttft_p50_ms": 1e3 * pct(ttft, 0.5), "ttft_p99_ms": 1e3 * pct(ttft, 0.99),
               "itl_p50_ms": 1e3 * pct(itl, 0.5), "itl_p99_ms": 1e3 * pct(itl, 0.99),
               "decode_steps": int(delta.get("decode_steps_total", 0)), "step_ms_mean": step_ms,
               "step_gb": step_gb, "experts_per_layer": experts}
        if a.bandwidth > 0:
            row["step_over_roofline"] = step_ms / 1e3 / (step_gb / a.bandwidth) if step_gb > 0 else float("nan")
        rows.append(row)
        if not a.json:
            roof = f", step/roofline {row['step_over_roofline']:.2f}" if "step_over_roofline" in row else ""
            print(f"C={c:3d}: {decode_rate:8.2f} tok/s aggregate ({row['vs_c1']:.2f}x C=1), "
                  f"TTFT p50 {row['ttft_p50_ms']:.0f} ms p99 {row['ttft_p99_ms']:.0f} ms, "
                  f"ITL p50 {row['itl_p50_ms']:.1f} ms p99 {row['itl_p99_ms']:.1f} ms; "
                  f"{row['decode_steps']} decode steps of {step_ms:.0f} ms, {step_gb:.2f} GB, "
                  f"{experts:.1f} experts/layer{roof}", flush=True)
    if a.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
