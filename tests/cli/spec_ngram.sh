#!/usr/bin/env bash
# generate --spec ngram (../shared/reference/speculative-ngram.md): the same tokens as plain
# decoding (greedy, and sampling with a fixed seed), the JSON "spec" object, one-line errors with
# exit code 2 for bad values, and bench --spec-cost. Runs on a synthetic tiny model and the
# committed golden tiny model.
# Usage: spec_ngram.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"
golden="$SRC/tests/data/gpt_oss_golden/tiny_a"
M="$WORK/tiny"
run_ok "synth" "$BIN" synth --preset tiny --out "$M" --seed 5

tokens_of() { sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p' <<<"$1"; }
repeat="one two three four five six. one two three four five six. one two three four five six. one two three"

# Greedy, raw prompt with repetition: identical tokens with every spelling of the options.
run_ok "plain greedy" "$BIN" generate -m "$M" -p "$repeat" -n 24 --temp 0 --raw --json
plain=$(cat "$WORK/out")
grep -q '"spec"' <<<"$plain" && fail "plain generate reports a spec object: $plain"
for opts in "--spec ngram" "--spec ngram --spec-k 3 --spec-fixed-k" "--spec ngram --spec-k 8 --spec-min-n 1 --spec-max-n 3" \
            "--spec ngram --spec-max-n 1" "--spec ngram --spec-k 0"; do
  # shellcheck disable=SC2086
  run_ok "greedy $opts" "$BIN" generate -m "$M" -p "$repeat" -n 24 --temp 0 --raw --json $opts
  out=$(cat "$WORK/out")
  [ "$(tokens_of "$out")" = "$(tokens_of "$plain")" ] || fail "greedy $opts: tokens differ from plain: $out"
  for key in spec proposed accepted acceptance_rate mean_accepted_len verify_steps; do
    grep -q "\"$key\"" <<<"$out" || fail "greedy $opts: --json lacks $key: $out"
  done
done
# --spec-k 0 never drafts.
grep -qE '"proposed":0[,}]' <<<"$out" || fail "--spec-k 0 drafted tokens: $out"
# min_n 1 with every draft tried: verification steps happen (the random model's output repeats
# single tokens now and then; its drafts are rejected, which must not change the output above).
run_ok "fixed k" "$BIN" generate -m "$M" -p "$repeat" -n 24 --temp 0 --raw --json --spec ngram --spec-min-n 1 --spec-fixed-k
grep -qE '"verify_steps":0[,}]' <<<"$(cat "$WORK/out")" && fail "--spec-min-n 1 --spec-fixed-k never verified: $(cat "$WORK/out")"

# Harmony prompt, and sampling with a seed: the same output as without speculation.
run_ok "plain harmony" "$BIN" generate -m "$M" -p "$repeat" -n 16 --seed 3 --json
harmony=$(cat "$WORK/out")
run_ok "spec harmony" "$BIN" generate -m "$M" -p "$repeat" -n 16 --seed 3 --json --spec ngram --spec-min-n 1
[ "$(tokens_of "$(cat "$WORK/out")")" = "$(tokens_of "$harmony")" ] || fail "sampled tokens differ with --spec ngram"
run_ok "plain top-k" "$BIN" generate -m "$M" -p "$repeat" -n 16 --seed 9 --temp 0.7 --top-k 40 --raw --json
topk=$(cat "$WORK/out")
run_ok "spec top-k" "$BIN" generate -m "$M" -p "$repeat" -n 16 --seed 9 --temp 0.7 --top-k 40 --raw --json --spec ngram --spec-k 4
[ "$(tokens_of "$(cat "$WORK/out")")" = "$(tokens_of "$topk")" ] || fail "top-k sampled tokens differ with --spec ngram"

# Streaming output prints the speculation line with the timings.
run_ok "spec stream" "$BIN" generate -m "$M" -p "$repeat" -n 8 --temp 0 --raw --spec ngram
grep -q "speculation = ngram" "$WORK/err" || fail "no speculation line on stderr: $(cat "$WORK/err")"

# Bad values: one line, exit 2.
run_err "negative k" "--spec-k must be >= 0" "$BIN" generate -m "$M" -p hi --spec ngram --spec-k -1
run_err "min over max" "--spec-min-n 5 is larger than --spec-max-n 3" "$BIN" generate -m "$M" -p hi --spec ngram --spec-min-n 5 --spec-max-n 3
run_err "zero min" "--spec-min-n must be >= 1" "$BIN" generate -m "$M" -p hi --spec ngram --spec-min-n 0
run_err "unknown method" "unknown --spec method 'eagle'" "$BIN" generate -m "$M" -p hi --spec eagle
run_err "k without spec" "--spec-k needs --spec ngram" "$BIN" generate -m "$M" -p hi --spec-k 4
run_err "k over rollback" "can roll back only 64 positions" "$BIN" generate -m "$M" -p hi -n 4 --spec ngram --spec-k 65

# bench --spec-cost: the c(k) table for k = 0..8 and the speedup table, or JSON.
run_ok "bench --spec-cost" "$BIN" bench -m "$golden" --spec-cost -p 16 -r 2 --precision exact
for text in 'c(k)' 'bytes ratio' '|  8 |      9 |' 'best speedup' '| 0.9 |'; do
  grep -qF -- "$text" "$WORK/out" || fail "bench --spec-cost lacks '$text': $(cat "$WORK/out")"
done
run_ok "bench --spec-cost --json" "$BIN" bench -m "$golden" --spec-cost -p 8 -r 1 --json
for key in c_over_bytes_ratio bytes_ratio median_ms speedup; do
  grep -q "\"$key\"" "$WORK/out" || fail "bench --spec-cost --json lacks $key"
done
finish spec_ngram.sh
