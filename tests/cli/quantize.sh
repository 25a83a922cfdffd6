#!/usr/bin/env bash
# `tessera quantize` command-line contract: --help exits 0; bad input exits 2 with exactly one line
# on stderr. The successful conversion itself (a dense-expert checkpoint written from the golden
# tiny_a model) runs in tests/quantize_test.cpp, which also calls this binary.
# Usage: quantize.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"

TINY="$SRC/tests/data/gpt_oss_golden/tiny_a"

run_ok "quantize --help" "$BIN" quantize --help
grep -qF -- "--to" "$WORK/out" || fail "quantize --help: no --to"
grep -qF -- "mxfp4" "$WORK/out" || fail "quantize --help: no mxfp4"

# Already MXFP4, unsupported target, missing directory.
run_err "already mxfp4" "tessera: error: $TINY/config.json: the experts are already MXFP4" \
  "$BIN" quantize -m "$TINY" --to mxfp4 --out "$WORK/q1"
run_err "unsupported --to" "unsupported target format 'nvfp4' (supported: mxfp4, awq, int4-rtn)" \
  "$BIN" quantize -m "$TINY" --to nvfp4 --out "$WORK/q2"
run_err "awq of gpt-oss" "int4 quantization applies to the dense families" \
  "$BIN" quantize -m "$TINY" --to int4-rtn --out "$WORK/q2"
run_err "missing model dir" "tessera: error: $WORK/nope" "$BIN" quantize -m "$WORK/nope" --to mxfp4 --out "$WORK/q3"

# A dense config (no quantization_config) over MXFP4 tensors: the dense experts are missing.
D="$WORK/mixed"
mkdir -p "$D"
cp "$TINY/model.safetensors" "$TINY/generation_config.json" "$D/"
sed '/"quantization_config"/,$d' "$TINY/config.json" | sed '$ s/,$//' >"$D/config.json"
echo "}" >>"$D/config.json"
run_err "not expert-dense" "missing tensor 'model.layers.0.mlp.experts.gate_up_proj'" \
  "$BIN" quantize -m "$D" --to mxfp4 --out "$WORK/q4"
[ -e "$WORK/q4" ] && fail "not expert-dense: output directory created"

# The input directory is never the output, even with --force.
run_err "out is input" "must differ from the input" "$BIN" quantize -m "$D" --to mxfp4 --out "$D" --force

# Missing required options are usage errors (exit 2).
"$BIN" quantize -m "$TINY" --out "$WORK/q5" >/dev/null 2>&1
[ $? -eq 2 ] || fail "missing --to: expected exit 2"

# int4 of a dense model: both forms load, inspect reports the scheme; awq without text is an error.
L="$SRC/models/tiny-llama"
"$BIN" quantize -m "$L" --to int4-rtn --format compressed-tensors --group 64 --out "$WORK/q6" >"$WORK/out" 2>&1 ||
  fail "int4-rtn: $(cat "$WORK/out")"
grep -qF "28 int4 modules" "$WORK/out" || fail "int4-rtn: $(cat "$WORK/out")"
"$BIN" inspect -m "$WORK/q6" >"$WORK/out" 2>&1 || fail "inspect int4: $(cat "$WORK/out")"
grep -qF "int4: compressed-tensors int4 (asymmetric), group 64" "$WORK/out" || fail "inspect int4: $(cat "$WORK/out")"
"$BIN" generate -m "$WORK/q6" --raw -p "def main" -n 4 >"$WORK/out" 2>&1 || fail "generate int4: $(cat "$WORK/out")"
run_err "awq without --calib" "--to awq needs calibration text (--calib FILE)" \
  "$BIN" quantize -m "$L" --to awq --out "$WORK/q7"
[ -e "$WORK/q7" ] && fail "awq without --calib: output directory created"

# The output directory is checked before any loading or calibration (issue 44): a non-empty one
# is refused at once (awq calibrated for 11.5 s first) and left as it was.
mkdir -p "$WORK/full"
echo keep >"$WORK/full/notes.txt"
head -c 100000 "$SRC/README.md" >"$WORK/calib.txt"
start=$(date +%s%N)
run_err "awq into a non-empty directory" "$WORK/full: directory is not empty" \
  "$BIN" quantize -m "$L" --to awq --calib "$WORK/calib.txt" --out "$WORK/full"
run_err "int4-rtn into a non-empty directory" "$WORK/full: directory is not empty" \
  "$BIN" quantize -m "$L" --to int4-rtn --out "$WORK/full"
run_err "sparsify into a non-empty directory" "$WORK/full: directory is not empty" \
  "$BIN" sparsify -m "$L" --method wanda --calib "$WORK/calib.txt" -o "$WORK/full"
run_err "output is a file" "$WORK/full/notes.txt: exists and is not a directory" \
  "$BIN" quantize -m "$L" --to awq --calib "$WORK/calib.txt" --out "$WORK/full/notes.txt" --force
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
[ "$elapsed_ms" -lt 3000 ] || fail "refusing the output directory took $elapsed_ms ms"
[ "$(ls "$WORK/full")" = "notes.txt" ] || fail "the refused output directory changed: $(ls "$WORK/full")"

finish quantize
