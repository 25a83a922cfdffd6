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
run_err "unsupported --to" "unsupported target format 'awq' (supported: mxfp4)" \
  "$BIN" quantize -m "$TINY" --to awq --out "$WORK/q2"
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

finish quantize
