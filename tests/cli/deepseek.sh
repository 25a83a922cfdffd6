#!/usr/bin/env bash
# DeepSeek-V2/V3 through the CLI (issue 29): synth of the tiny presets, inspect's MLA and routing
# lines, generate (--raw, a small tokenizer), logits through both MLA forms, bench and its
# decode profile, and the one-line refusals of the conversions that do not apply to MLA yet.
# Usage: deepseek.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"

for preset in tiny-deepseek-v2 tiny-deepseek-v3; do
  M="$WORK/$preset"
  run_ok "$preset: synth" "$BIN" synth --preset "$preset" --out "$M" --seed 3
  cp "$SRC/tests/data/tokenizer/families/llama3/tokenizer.json" "$SRC/tests/data/tokenizer/families/llama3/tokenizer_config.json" "$M/"
  run_ok "$preset: inspect" "$BIN" inspect -m "$M"
  grep -q "validation: ok" "$WORK/out" || fail "$preset: inspect did not validate: $(cat "$WORK/out")"
  grep -q "MLA: .*latent 32 + rope 8 per token (cached)" "$WORK/out" || fail "$preset: inspect prints no MLA line"
  grep -q "^shared experts: 1" "$WORK/out" || fail "$preset: inspect prints no shared experts"
  run_ok "$preset: generate --raw" "$BIN" generate -m "$M" -p "Hello there" -n 6 --raw --temp 0 --json
  grep -q '"tokens"' "$WORK/out" || fail "$preset: generate printed no tokens"
  run_ok "$preset: logits" "$BIN" logits -m "$M" --ids 1,2,3,4,5 --out "$WORK/a.npy"
  run_ok "$preset: logits --mla naive" "$BIN" logits -m "$M" --ids 1,2,3,4,5 --mla naive --out "$WORK/n.npy"
  run_ok "$preset: bench" "$BIN" bench -m "$M" -p 16 -n 4 -r 1
  grep -q "tg4 roofline" "$WORK/out" || fail "$preset: bench prints no decode roofline"
  run_ok "$preset: bench --profile" "$BIN" bench -m "$M" --profile -n 4 -r 1
  grep -q "^| attention |" "$WORK/out" || fail "$preset: the profile has no attention row"
  run_err "$preset: quantize refused" "is not supported for deepseek" \
    "$BIN" quantize -m "$M" --to int4-rtn --out "$WORK/q-$preset"
  run_err "$preset: sparsify refused" "is not supported for deepseek" \
    "$BIN" sparsify -m "$M" --pattern 2:4 -o "$WORK/s-$preset"
done
finish deepseek
