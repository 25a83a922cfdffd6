#!/usr/bin/env bash
# `tessera perplexity` command-line contract: the text and JSON results, progress on stderr, and
# one-line errors (exit 2) for bad options and input. The numbers themselves are checked against
# transformers in tests/perplexity_test.cpp.
# Usage: perplexity.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"

M="$WORK/tiny"
run_ok "synth" "$BIN" synth --preset tiny --out "$M" --seed 4
text="$WORK/text.txt"
for i in $(seq 40); do echo "line $i: the quick brown fox jumps over the lazy dog, again and again."; done >"$text"

run_ok "perplexity" "$BIN" perplexity -m "$M" -f "$text" -c 128
grep -qE '^perplexity: [0-9.]+ \+/- [0-9.]+ \(mean NLL [0-9.]+ \+/- [0-9.]+ nats\) over [0-9]+ tokens of [0-9]+, [0-9]+ windows of 128' \
  "$WORK/out" || fail "perplexity: unexpected result line: $(cat "$WORK/out")"
grep -q '^\[1/' "$WORK/err" || fail "perplexity: no progress on stderr: $(cat "$WORK/err")"
run_ok "perplexity json" "$BIN" perplexity -m "$M" -f "$text" -c 128 --stride 64 --json --precision exact
for key in perplexity perplexity_stderr mean_nll nll_stderr tokens scored windows context stride tokens_per_second; do
  grep -q "\"$key\"" "$WORK/out" || fail "perplexity --json lacks $key: $(cat "$WORK/out")"
done
grep -q '"stride":64' "$WORK/out" || fail "perplexity --json: stride not 64: $(cat "$WORK/out")"

# --compare-model: the same checkpoint against itself is KL 0; another vocabulary is refused.
run_ok "compare-model" "$BIN" perplexity -m "$M" -f "$text" -c 128 --precision exact --compare-model "$M"
grep -q "^against $M: mean KL 0.000000 nats, max KL 0.000000, top-1 agreement 100.00 %" "$WORK/out" ||
  fail "perplexity --compare-model: unexpected comparison line: $(cat "$WORK/out")"
run_ok "compare-model json" "$BIN" perplexity -m "$M" -f "$text" -c 128 --precision exact --compare-model "$M" --json
grep -q '"vs_model":{' "$WORK/out" || fail "perplexity --compare-model --json lacks vs_model: $(cat "$WORK/out")"
L="$WORK/tiny-llama"
run_ok "synth tiny-llama" "$BIN" synth --preset tiny-llama --out "$L" --seed 4
run_err "compare-model of another vocabulary" "--compare-model $L has a vocabulary of" \
  "$BIN" perplexity -m "$M" -f "$text" -c 128 --compare-model "$L"
run_err "compare-exact with compare-model" "--compare-exact and --compare-model exclude each other" \
  "$BIN" perplexity -m "$M" -f "$text" --compare-exact --compare-model "$M"
run_err "missing file" "tessera: error: $WORK/nope: cannot open" "$BIN" perplexity -m "$M" -f "$WORK/nope"
run_err "stride beyond the window" "--stride 300 exceeds the window length 256" \
  "$BIN" perplexity -m "$M" -f "$text" -c 256 --stride 300
run_err "window beyond the model" "context 1000000 must lie in [2, 131072]" "$BIN" perplexity -m "$M" -f "$text" -c 1000000
printf 'a' >"$WORK/one.txt"
run_err "one token" "1 token(s); perplexity needs at least 2" "$BIN" perplexity -m "$M" -f "$WORK/one.txt"
run_err "no file option" "tessera: error: --file is required" "$BIN" perplexity -m "$M"

finish perplexity
