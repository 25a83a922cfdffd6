#!/usr/bin/env bash
# The dense families and Qwen3-MoE through the CLI (issue 14 point 8): synth, inspect, generate and
# chat in each family's chat template (tests/data/chat_templates) with a small tokenizer of the
# family's pipeline (tests/data/tokenizer/families), --spec ngram, logits and bench, and the
# one-line errors for an unknown template (--raw still works).
# Usage: families.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"

# preset, tokenizer variant, template file
for row in "tiny-llama llama3 llama3.1" "tiny-qwen3 qwen3 qwen3" "tiny-qwen3-moe qwen3 qwen2.5"; do
  read -r preset tok tpl <<<"$row"
  M="$WORK/$preset"
  run_ok "$preset: synth" "$BIN" synth --preset "$preset" --out "$M" --seed 3
  cp "$SRC/tests/data/tokenizer/families/$tok/tokenizer.json" "$SRC/tests/data/tokenizer/families/$tok/tokenizer_config.json" "$M/"
  cp "$SRC/tests/data/chat_templates/$tpl.jinja" "$M/chat_template.jinja"
  run_ok "$preset: inspect" "$BIN" inspect -m "$M"
  grep -q "validation: ok" "$WORK/out" || fail "$preset: inspect did not validate: $(cat "$WORK/out")"
  grep -q "^layout: " "$WORK/out" || fail "$preset: inspect prints no layout"

  run_ok "$preset: generate --json" "$BIN" generate -m "$M" -p "Hello there" -n 6 --temp 0 --json
  out=$(cat "$WORK/out")
  prompt_tokens=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' <<<"$out")
  # The template wraps the two words in headers / ChatML markers: many more than two tokens.
  [ "${prompt_tokens:-0}" -gt 6 ] || fail "$preset: prompt of $prompt_tokens tokens, the template was not applied: $out"
  run_ok "$preset: generate --spec ngram" "$BIN" generate -m "$M" -p "a b a b a b" -n 8 --temp 0 --spec ngram --json
  grep -q '"spec"' "$WORK/out" || fail "$preset: no spec statistics"
  run_ok "$preset: generate --raw" "$BIN" generate -m "$M" -p "Hello" -n 4 --raw --temp 0
  run_ok "$preset: chat" sh -c "printf 'Hi\nAgain\n/exit\n' | '$BIN' chat -m '$M' -n 4 --temp 0"
  [ "$(wc -l <"$WORK/out")" -ge 2 ] || fail "$preset: chat printed fewer than two replies"
  run_ok "$preset: logits" "$BIN" logits -m "$M" --ids 1,2,3 --out "$WORK/l.npy"
  run_ok "$preset: bench" "$BIN" bench -m "$M" -p 16 -n 4 -r 1
  grep -q "pp16 ceiling" "$WORK/out" || fail "$preset: bench prints no prefill ceiling"
done

# Qwen3 without thinking: the generation prompt pre-fills the empty think block (4 more tokens).
M="$WORK/tiny-qwen3"
run_ok "qwen3 think" "$BIN" generate -m "$M" -p "Hi" -n 1 --temp 0 --json
with=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$WORK/out")
run_ok "qwen3 --no-think" "$BIN" generate -m "$M" -p "Hi" -n 1 --temp 0 --json --no-think
without=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$WORK/out")
[ "${without:-0}" -gt "${with:-0}" ] || fail "--no-think did not add the empty think block ($with vs $without)"

# An unknown template is one line naming --raw; --raw ignores it.
echo '{{ messages }}' >"$M/chat_template.jinja"
run_err "unknown template" "unknown chat template" "$BIN" generate -m "$M" -p "Hi" -n 2
grep -q -- "--raw" "$WORK/err" || fail "the unknown-template error does not name --raw"
run_ok "unknown template, --raw" "$BIN" generate -m "$M" -p "Hi" -n 2 --raw

# A real-size family preset validates without writing 16 GB: inspect of the config alone.
run_err "unknown model_type" "supported: deepseek_v2, deepseek_v3, gpt_oss, llama, mistral, qwen2, qwen3, qwen3_moe" \
  sh -c "mkdir -p '$WORK/x' && echo '{\"model_type\": \"phi3\"}' > '$WORK/x/config.json' && '$BIN' inspect -m '$WORK/x'"
finish families
