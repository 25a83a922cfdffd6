#!/usr/bin/env bash
# GGUF files at the command line (issue 30): `inspect -m FILE.gguf` reads the header (metadata,
# types, bits per weight; --json too), a damaged file is one error line, the commands that run
# models name what the file lacks in one line (here a metadata key), and the converters refuse a
# GGUF input in one line. Running real GGUF models is tests/gguf_model_test.cpp's.
# The file is written byte by byte here (layout: io/gguf.h), so the test needs no converter.
# Usage: gguf.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"

le() {  # le BYTES VALUE: VALUE as BYTES little-endian bytes
  local n="$1" v="$2" i
  for ((i = 0; i < n; i++)); do printf "\\x$(printf %02x $(((v >> (8 * i)) & 255)))"; done
}
str() { le 8 "${#1}"; printf '%s' "$1"; }

G="$WORK/tiny.gguf"
{
  printf 'GGUF'; le 4 3; le 8 2; le 8 3                        # version 3, 2 tensors, 3 keys
  str general.architecture; le 4 8; str llama
  str llama.block_count; le 4 4; le 4 1
  str tokenizer.ggml.tokens; le 4 9; le 4 8; le 8 2; str a; str b
  str token_embd.weight; le 4 2; le 8 32; le 8 2; le 4 0; le 8 0       # f32 [2, 32] at 0
  str blk.0.attn_q.weight; le 4 1; le 8 64; le 4 8; le 8 256           # q8_0 [64] at 256
} >"$G"
size=$(stat -c %s "$G")
head -c $(((32 - size % 32) % 32)) /dev/zero >>"$G"
head -c 256 /dev/urandom >>"$G"   # the f32 tensor
head -c 68 /dev/zero >>"$G"       # two q8_0 blocks
head -c 28 /dev/zero >>"$G"

run_ok "inspect gguf" "$BIN" inspect -m "$G"
for want in "format: GGUF v3 (alignment 32), 3 metadata keys, 2 tensors" "architecture: 'llama'" \
  "'llama.block_count' = 1" "'tokenizer.ggml.tokens' = [string × 2]" "parameters: 128" \
  "q8_0          1 tensors  68 bytes  8.500 bits per weight" "f32           1 tensors  256 bytes  32.000 bits per weight" \
  "'blk.{}.attn_q.weight'" "config: not read (" "metadata 'llama.embedding_length' is missing" "loading: every command takes the file"; do
  grep -qF -- "$want" "$WORK/out" || fail "inspect gguf: no '$want' in: $(cat "$WORK/out")"
done
run_ok "inspect gguf --json" "$BIN" inspect -m "$G" --json
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["format"]=="gguf" and r["parameters"]==128 and r["bytes_by_type"]["q8_0"]["bits_per_weight"]==8.5 and r["metadata"]["\u0027llama.block_count\u0027"]==1, r' "$WORK/out" ||
  fail "inspect gguf --json: $(cat "$WORK/out")"

head -c 100 "$G" >"$WORK/cut.gguf"
run_err "truncated gguf" "cut.gguf: metadata 'llama.block_count': the file ends at byte 100 (truncated?)" "$BIN" inspect -m "$WORK/cut.gguf"
for cmd in "generate -p hi -n 1" "bench -p 4 -n 2 -r 1" "logits --ids 1,2" "perplexity -f $G"; do
  # shellcheck disable=SC2086
  run_err "gguf: $cmd" "tiny.gguf: metadata 'llama.embedding_length' is missing" "$BIN" ${cmd%% *} -m "$G" ${cmd#* }
done
run_err "gguf: quantize" "tiny.gguf: a GGUF file; int4 quantization reads Hugging Face checkpoint directories" \
  "$BIN" quantize -m "$G" -o "$WORK/q" --to int4-rtn
run_err "gguf: sparsify" "tiny.gguf: a GGUF file; sparsify reads Hugging Face checkpoint directories" \
  "$BIN" sparsify -m "$G" -o "$WORK/s"

# Hostile files (issue 44). An empty or 3-byte .gguf file is a truncated GGUF file (it was looked
# for as a directory: "x.gguf/config.json: Not a directory").
: >"$WORK/empty.gguf"
printf 'GGU' >"$WORK/three.gguf"
run_err "empty gguf" "empty.gguf: truncated GGUF file: 0 bytes, a header needs at least 24" "$BIN" inspect -m "$WORK/empty.gguf"
run_err "3-byte gguf" "three.gguf: truncated GGUF file: 3 bytes, a header needs at least 24" \
  "$BIN" generate -m "$WORK/three.gguf" -p hi -n 1
# A gpt-oss file of 2^40 layers: every command, inspect included, allocated until memory ran out.
# Under a 2 GB address-space limit: inspect reports the config as not read, the others refuse.
H="$WORK/layers.gguf"
{
  printf 'GGUF'; le 4 3; le 8 0; le 8 6
  str general.architecture; le 4 8; str gpt-oss
  str gpt-oss.block_count; le 4 10; le 8 $((1 << 40))
  str gpt-oss.context_length; le 4 4; le 4 4096
  str gpt-oss.embedding_length; le 4 4; le 4 2880
  str gpt-oss.attention.head_count; le 4 4; le 4 64
  str gpt-oss.attention.layer_norm_rms_epsilon; le 4 6; le 4 $((0x3727C5AC))   # float32 1e-5
} >"$H"
huge="layers.gguf: metadata 'gpt-oss.block_count' is 1099511627776, more than the limit of 1024"
# 2 GB of address space at most; not under AddressSanitizer (scripts/test.sh --sanitize sets
# ASAN_OPTIONS), whose shadow memory alone reserves terabytes of it.
vm_limit="ulimit -v 2000000;"
[ -n "${ASAN_OPTIONS:-}" ] && vm_limit=""
run_ok "inspect 2^40 layers" bash -c "$vm_limit exec '$BIN' inspect -m '$H'"
grep -qF "config: not read ($WORK/$huge)" "$WORK/out" || fail "inspect 2^40 layers: $(cat "$WORK/out")"
run_err "generate 2^40 layers" "$huge" bash -c "$vm_limit exec '$BIN' generate -m '$H' -p hi -n 1"

# A path that is not UTF-8 is printed with U+FFFD by --json (it was nlohmann's type_error.316,
# an internal error).
cp "$G" "$WORK/"$'\xff'".gguf"
run_ok "inspect --json of a non-UTF-8 path" "$BIN" inspect -m "$WORK/"$'\xff'".gguf" --json
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["path"].endswith("\ufffd.gguf"), r["path"]' "$WORK/out" ||
  fail "inspect --json of a non-UTF-8 path: $(cat "$WORK/out")"

finish "gguf"
