#!/usr/bin/env bash
# `tessera sparsify` and the sparse formats from the command line (issue 18): both output forms
# of the shipped Llama load, inspect names the pattern, bench labels the run "2:4 sparse",
# perplexity is the same with the sparse kernels on and off (same weights), --layers/--modules
# restrict the pruning, and bad options exit 2 with one line on stderr.
# Usage: sparsify.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"

LLAMA="$SRC/models/tiny-llama"
TEXT="$SRC/tests/data/trained/heldout_sample.txt"

run_ok "sparsify dense" "$BIN" sparsify -m "$LLAMA" --pattern 2:4 -o "$WORK/d24"
run_ok "sparsify bitmask" "$BIN" sparsify -m "$LLAMA" --pattern 2:4 --format sparse-24-bitmask -o "$WORK/b24"
[ -e "$WORK/b24/config.json" ] || fail "bitmask: no config.json"
grep -q '"sparse-24-bitmask"' "$WORK/b24/config.json" || fail "bitmask: no sparsity_config"

run_ok "inspect bitmask" "$BIN" inspect -m "$WORK/b24"
grep -q "^sparsity: 2:4 (compressed-tensors sparse-24-bitmask); 28 modules" "$WORK/out" || fail "inspect: no sparsity line"

# The same weights with the sparse kernels and without (only the summation order differs), and
# the bitmask form (the same kernels as the dense form's sparse run): perplexity within 0.001.
ppl() { "$BIN" perplexity -m "$1" -f "$TEXT" -c 256 "${@:2}" 2>/dev/null | sed -n 's/^perplexity: \([0-9.]*\).*/\1/p'; }
on=$(ppl "$WORK/d24" --sparse on)
off=$(ppl "$WORK/d24" --sparse off)
bitmask=$(ppl "$WORK/b24")
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; exit !(a != "" && d < 0.001 && d > -0.001) }'; }
close "$on" "$off" && close "$on" "$bitmask" || fail "perplexity differs: on $on, off $off, bitmask $bitmask"

run_ok "bench label" "$BIN" bench -m "$WORK/d24" -p 8 -n 4 -r 1
grep -q "2:4 sparse" "$WORK/out" || fail "bench: no '2:4 sparse' label"

# Only the attention of layers 0-1: 8 modules, listed in the config.
run_ok "layers and modules" "$BIN" sparsify -m "$LLAMA" --pattern 4:8 --layers 0-1 --modules attention -o "$WORK/part"
grep -q "pruned 8 modules" "$WORK/out" || fail "--layers 0-1 --modules attention: expected 8 modules"
grep -q '"model.layers.1.self_attn.o_proj"' "$WORK/part/config.json" || fail "no module_names in the config"
run_ok "inspect partial" "$BIN" inspect -m "$WORK/part"
grep -q "^sparsity: 4:8 .*; 8 modules" "$WORK/out" || fail "inspect partial: expected 8 modules"

run_err "bad --layers" "--layers '1-x': expected layer indices and ranges such as 0-3,7" \
  "$BIN" sparsify -m "$LLAMA" --layers 1-x -o "$WORK/bad1"
run_err "bitmask needs 2:4" "--format sparse-24-bitmask stores 2:4 only, not 4:8" \
  "$BIN" sparsify -m "$LLAMA" --pattern 4:8 --format sparse-24-bitmask -o "$WORK/bad2"
[ -e "$WORK/bad2" ] && fail "bitmask needs 2:4: output directory created"
"$BIN" sparsify -m "$LLAMA" --modules heads -o "$WORK/bad3" >/dev/null 2>&1
[ $? -eq 2 ] || fail "--modules heads: expected exit 2"
finish sparsify
