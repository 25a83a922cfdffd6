#!/usr/bin/env bash
# `tessera info` and the TESSERA_ISA cap: every level can be asked for (a level above the
# machine's best falls back to the best), an unknown name is a one-line error with exit code 2,
# and -t / TESSERA_THREADS size the pool.
# Usage: info.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"

run_ok "info" "$BIN" info
grep -q '^system_info: AVX2 = ' "$WORK/out" || fail "no system_info line"
grep -q '^architectures: deepseek_v2 (DeepseekV2ForCausalLM), deepseek_v3 (DeepseekV3ForCausalLM), gemma3_text (Gemma3ForCausalLM), glm4_moe (Glm4MoeForCausalLM), gpt_oss (GptOssForCausalLM), llama (LlamaForCausalLM), mistral' "$WORK/out" || fail "no architectures line"
grep -q '^weight formats: bf16, f16, f32, int8, mxfp4, mxfp4-q8' "$WORK/out" || fail "no weight formats line"
best=$(sed -n 's/^isa: best=\([a-z0-9]*\).*/\1/p' "$WORK/out")
[ -n "$best" ] || fail "no isa line"

levels=(scalar avx2 avx512 amx)
rank() { local i; for i in "${!levels[@]}"; do [ "${levels[$i]}" = "$1" ] && echo "$i"; done; }
for level in "${levels[@]}"; do
  run_ok "TESSERA_ISA=$level" env TESSERA_ISA="$level" "$BIN" info
  active=$(sed -n 's/^isa: best=[a-z0-9]* active=\([a-z0-9]*\).*/\1/p' "$WORK/out")
  expect=$level
  [ "$(rank "$level")" -gt "$(rank "$best")" ] && expect=$best
  [ "$active" = "$expect" ] || fail "TESSERA_ISA=$level gave active=$active, expected $expect"
done

run_err "unknown ISA" "unknown instruction set 'sse9'" env TESSERA_ISA=sse9 "$BIN" info
run_ok "info -t 3" "$BIN" info -t 3
grep -q '^threads: 3 ' "$WORK/out" || fail "-t 3 not honoured"
run_ok "TESSERA_THREADS" env TESSERA_THREADS=1 "$BIN" info
grep -q '^threads: 1 ' "$WORK/out" || fail "TESSERA_THREADS not honoured"
"$BIN" info -t 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "-t 0 should exit 2"
"$BIN" bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown subcommand should exit 2"
run_ok "info --help" "$BIN" info --help
finish info.sh
