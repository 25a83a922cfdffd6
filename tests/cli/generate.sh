#!/usr/bin/env bash
# generate / chat / logits / bench: the spellings of the issue's CLI contract, the JSON fields,
# the .npy output, reproducibility across thread counts, and exit code 2 with one line on bad
# input. Runs on the committed golden tiny model and a synthetic one.
# Usage: generate.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"
golden="$SRC/tests/data/gpt_oss_golden/tiny_a"
M="$WORK/tiny"
run_ok "synth" "$BIN" synth --preset tiny --out "$M" --seed 5

# generate --json: fields, token count, same output with 1 and 2 threads for a fixed seed.
run_ok "generate --json" "$BIN" generate -m "$M" -p "Hello" -n 6 --seed 7 --json -t 2
first=$(cat "$WORK/out")
for key in text tokens prompt_tokens timings prefill_ms decode_ms prefill_tok_s decode_tok_s; do
  grep -q "\"$key\"" <<<"$first" || fail "generate --json lacks $key: $first"
done
tokens=$(sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p' <<<"$first" | tr ',' '\n' | grep -c .)
{ [ "$tokens" -ge 1 ] && [ "$tokens" -le 6 ]; } || fail "expected 1..6 tokens, got $tokens"
run_ok "generate -t 1" "$BIN" generate -m "$M" -p "Hello" -n 6 --seed 7 --json -t 1
strip() { sed 's/"timings":{[^}]*}//' <<<"$1"; }
[ "$(strip "$first")" = "$(strip "$(cat "$WORK/out")")" ] || fail "same seed, different output with 1 and 2 threads"

# --raw streams text; llama.cpp-style timing lines go to stderr.
run_ok "generate --raw" "$BIN" generate -m "$M" -p "Hello" -n 4 --raw --temp 0
grep -q "tokens per second" "$WORK/err" || fail "generate --raw: no timings on stderr"

# chat answers every stdin line.
run_ok "chat" sh -c "printf 'Hi\nAnd again\n/exit\n' | '$BIN' chat -m '$M' -n 4 --seed 1"
[ "$(wc -l <"$WORK/out")" -ge 2 ] || fail "chat printed fewer than two replies"

# logits --out writes a float32 .npy of shape [n, vocab].
run_ok "logits" "$BIN" logits -m "$golden" --ids 1,2,3,4,5 --out "$WORK/l.npy"
head -c 128 "$WORK/l.npy" | grep -q "'shape': (5, 384)" || fail "logits: .npy header"
[ "$(stat -c %s "$WORK/l.npy")" -eq $((128 + 5 * 384 * 4)) ] || fail "logits: .npy size"

# bench prints the llama-bench table, or JSON.
run_ok "bench" "$BIN" bench -m "$golden" -p 16 -n 4 -r 2
for text in '| model ' 'pp16' 'tg4' ' ± '; do grep -qF -- "$text" "$WORK/out" || fail "bench table lacks '$text'"; done
run_ok "bench --json" "$BIN" bench -m "$golden" -p 8 -n 0 -r 1 --json
grep -q '"avg_ts"' "$WORK/out" || fail "bench --json lacks avg_ts"
# -d: both tests after a prefilled depth, named as llama-bench names them; the byte model counts
# the depth's keys and values (the roofline's bytes per token grow with it).
run_ok "bench -d" "$BIN" bench -m "$golden" -p 8 -n 3 -r 1 -d 600 --json
grep -q '"test": "tg3 @ d600"' "$WORK/out" || fail "bench -d: $(cat "$WORK/out")"
grep -q '"n_depth": 600' "$WORK/out" || fail "bench -d lacks n_depth"
run_ok "bench -d --profile" "$BIN" bench -m "$golden" -n 2 -r 1 -d 40 --profile
grep -qF 'from position 40' "$WORK/out" || fail "bench -d --profile: $(cat "$WORK/out")"
run_err "bench -d --sequences" "-d applies to the pp and tg tests" "$BIN" bench -m "$golden" -n 2 -d 4 --sequences 2
# --sequences: B sequences decoded together (one batched forward per step).
run_ok "bench --sequences" "$BIN" bench -m "$golden" -n 4 -r 1 --sequences 3
grep -qE '^tg4 x3: [0-9.]+ ± [0-9.]+ t/s aggregate \(3 sequences\)' "$WORK/out" || fail "bench --sequences: $(cat "$WORK/out")"
run_ok "bench --sequences --json" "$BIN" bench -m "$golden" -n 4 -r 1 --sequences 2 --json
grep -q '"roofline_fraction"' "$WORK/out" || fail "bench --sequences --json lacks roofline_fraction"
run_err "bench --sequences without -n" "needs -n >= 1" "$BIN" bench -m "$golden" -n 0 --sequences 2
# bench --profile: the operations' table next to the probe, and the pool's per-thread table.
run_ok "bench --profile" "$BIN" bench -m "$golden" -n 4 -r 1 --profile
for text in 'read probe' '| attention | ' '| lm_head | ' '| norm | ' '| **all** |' '| thread |' 'parallel runs per token'; do
  grep -qF -- "$text" "$WORK/out" || fail "bench --profile lacks '$text': $(cat "$WORK/out")"
done
run_ok "bench --profile --json" "$BIN" bench -m "$golden" -n 2 -r 1 --profile --json
grep -q '"idle_in_runs_ms_per_token"' "$WORK/out" || fail "bench --profile --json lacks the pool"
run_err "bench --profile without -n" "needs -n >= 1" "$BIN" bench -m "$golden" -n 0 --profile
# bench --profile-prefill: one prefill's operations with their compute rate against the peaks.
run_ok "bench --profile-prefill" "$BIN" bench -m "$golden" -p 24 -r 1 -d 8 --profile-prefill
for text in 'prefill profile: 24 tokens from position 8' '| attention | ' '| linear | ' 'GOP/s' ' f32 |' '| **all** |' 'parallel runs per prefill'; do
  grep -qF -- "$text" "$WORK/out" || fail "bench --profile-prefill lacks '$text': $(cat "$WORK/out")"
done
run_ok "bench --profile-prefill --json" "$BIN" bench -m "$golden" -p 8 -r 1 --profile-prefill --json
grep -q '"of_peak"' "$WORK/out" || fail "bench --profile-prefill --json lacks of_peak"
grep -q '"idle_in_runs_ms_per_prefill"' "$WORK/out" || fail "bench --profile-prefill --json lacks the pool"
run_err "bench --profile-prefill without -p" "needs -p >= 1" "$BIN" bench -m "$golden" -p 0 --profile-prefill
run_err "bench --profile with --profile-prefill" "excludes" "$BIN" bench -m "$golden" --profile --profile-prefill

# Bad input.
run_err "unknown id" "outside the vocabulary" "$BIN" logits -m "$golden" --ids 1,99999
run_err "bad id list" "is not a token id" "$BIN" logits -m "$golden" --ids 1,,2
run_err "prompt over context" "exceeds the context size 4" "$BIN" generate -m "$M" -p "one two three four five" -c 4 -n 1
run_err "missing model" "config.json" "$BIN" generate -m "$WORK/none" -p hi
mkdir "$WORK/bad" && cp "$M/config.json" "$WORK/bad/" && printf 'garbage' >"$WORK/bad/model.safetensors"
run_err "corrupt weights" "model.safetensors" "$BIN" generate -m "$WORK/bad" -p hi
sed 's/"gpt_oss"/"mamba"/' "$M/config.json" >"$WORK/bad/config.json"
run_err "unknown architecture" "mamba" "$BIN" generate -m "$WORK/bad" -p hi
finish generate.sh
