#!/usr/bin/env bash
# `tessera synth` and `tessera inspect` end to end: a tiny model is written (single file and
# sharded), inspected (text and --json), and broken in several ways; every failure must exit 2
# with exactly one line on stderr.
# Usage: synth_inspect.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"

expect_out() {  # expect_out NAME PATTERN: the last stdout contains PATTERN (fixed string)
  grep -qF -- "$2" "$WORK/out" || fail "$1: stdout lacks '$2'"
}

# --help on both subcommands.
run_ok "synth --help" "$BIN" synth --help
expect_out "synth --help" "--preset"
expect_out "synth --help" "gpt-oss-20b"
run_ok "inspect --help" "$BIN" inspect --help
expect_out "inspect --help" "--model"

# Tiny model, single file.
M="$WORK/tiny"
run_ok "synth tiny" "$BIN" synth --preset tiny --out "$M" --seed 3
expect_out "synth tiny" "wrote 79 tensors"
for f in config.json generation_config.json tokenizer.json tokenizer_config.json special_tokens_map.json \
         model.safetensors; do
  [ -s "$M/$f" ] || fail "synth tiny: $f missing"
done
run_ok "inspect tiny" "$BIN" inspect -m "$M"
expect_out "inspect tiny" "architecture: GptOssForCausalLM (model_type gpt_oss)"
expect_out "inspect tiny" "layers: 4 (2 sliding window 16, 2 full)"
expect_out "inspect tiny" "head_dim: 32"
expect_out "inspect tiny" "tensors: 79"
expect_out "inspect tiny" "files: 1 "
expect_out "inspect tiny" "model.layers.{0..3}.mlp.experts.down_proj_blocks"
expect_out "inspect tiny" "[8, 64, 3, 16]"
expect_out "inspect tiny" "validation: ok (79 tensors match the gpt_oss description)"
run_ok "inspect --json" "$BIN" inspect -m "$M" --json
expect_out "inspect --json" '"num_tensors": 79'
expect_out "inspect --json" '"problems": []'

# Same seed, same bytes; the directory must be empty unless --force.
run_err "synth into non-empty dir" "directory is not empty" "$BIN" synth --preset tiny --out "$M"
run_ok "synth again" "$BIN" synth --preset tiny --out "$WORK/tiny2" --seed 3
cmp -s "$M/model.safetensors" "$WORK/tiny2/model.safetensors" || fail "same seed gave different bytes"
run_ok "synth --force" "$BIN" synth --preset tiny --out "$WORK/tiny2" --seed 4 --force
cmp -s "$M/model.safetensors" "$WORK/tiny2/model.safetensors" && fail "another seed gave the same bytes"

# Sharded: a 20 MB limit splits the ~52 MB model; the index resolves every tensor.
S="$WORK/sharded"
run_ok "synth sharded" "$BIN" synth --preset tiny --out "$S" --seed 3 --max-shard-bytes 20000000
[ -s "$S/model.safetensors.index.json" ] || fail "sharded: no index"
[ -e "$S/model.safetensors" ] && fail "sharded: unexpected single file"
[ -s "$S/model-00001-of-00004.safetensors" ] || fail "sharded: first shard missing"
run_ok "inspect sharded" "$BIN" inspect -m "$S"
expect_out "inspect sharded" "files: 4 "
expect_out "inspect sharded" "validation: ok"
run_ok "synth --force over sharded" "$BIN" synth --preset tiny --out "$S" --force
[ -e "$S/model-00000-of-00003.safetensors" ] && fail "--force left a stale shard"
run_ok "inspect after --force" "$BIN" inspect -m "$S"
expect_out "inspect after --force" "files: 1 "

# Errors: unknown preset (usage error), missing directory, corrupt file, tensors that do not
# match the config.
"$BIN" synth --preset gpt-oss-7b --out "$WORK/x" >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown preset: expected exit 2"
run_err "inspect missing dir" "tessera: error: $WORK/nope: " "$BIN" inspect -m "$WORK/nope"

C="$WORK/corrupt"
cp -r "$M" "$C"
truncate -s 100000 "$C/model.safetensors"
run_err "inspect truncated file" "tessera: error: $C/model.safetensors: " "$BIN" inspect -m "$C"
printf 'not a safetensors file' >"$C/model.safetensors"
run_err "inspect garbage file" "tessera: error: $C/model.safetensors: " "$BIN" inspect -m "$C"

B="$WORK/mismatch"
cp -r "$M" "$B"
sed -i 's/"intermediate_size": 96/"intermediate_size": 128/' "$B/config.json"
run_err "inspect misshapen" \
  "tensor 'model.layers.0.mlp.experts.gate_up_proj_bias': shape [8, 192], expected [8, 256]" \
  "$BIN" inspect -m "$B"
expect_out "inspect misshapen" "validation: 20 problems"

finish synth_inspect
