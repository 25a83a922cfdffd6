#!/usr/bin/env bash
# The dense families and Qwen3-MoE through the CLI (issue 14 point 8): synth, inspect, generate and
# chat in each family's chat template (tests/data/chat_templates) with a small tokenizer of the
# family's pipeline (tests/data/tokenizer/families), --spec ngram, logits and bench; any template
# through the Jinja engine, the one-line error for one that does not parse, --chat-template,
# chat --raw and the ChatML fallback.
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

# Gemma 3 (text): synth, inspect, and generate / chat through a Gemma Hub template by name.
M="$WORK/tiny-gemma3"
run_ok "tiny-gemma3: synth" "$BIN" synth --preset tiny-gemma3 --out "$M" --seed 3
cp "$SRC/tests/data/tokenizer/families/llama3/tokenizer.json" "$SRC/tests/data/tokenizer/families/llama3/tokenizer_config.json" "$M/"
run_ok "tiny-gemma3: inspect" "$BIN" inspect -m "$M"
grep -q "validation: ok" "$WORK/out" || fail "tiny-gemma3: inspect did not validate: $(cat "$WORK/out")"
run_ok "tiny-gemma3: generate" "$BIN" generate -m "$M" -p "Hello there" -n 6 --temp 0 --json --chat-template google-gemma-2-2b-it
grep -q '"prompt_tokens"' "$WORK/out" || fail "tiny-gemma3: generate printed no JSON"
run_ok "tiny-gemma3: chat" sh -c "printf 'Hi\n/exit\n' | '$BIN' chat -m '$M' -n 4 --temp 0 --chat-template google-gemma-2-2b-it"

# Qwen3 without thinking: the generation prompt pre-fills the empty think block (4 more tokens).
M="$WORK/tiny-qwen3"
run_ok "qwen3 think" "$BIN" generate -m "$M" -p "Hi" -n 1 --temp 0 --json
with=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$WORK/out")
run_ok "qwen3 --no-think" "$BIN" generate -m "$M" -p "Hi" -n 1 --temp 0 --json --no-think
without=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$WORK/out")
[ "${without:-0}" -gt "${with:-0}" ] || fail "--no-think did not add the empty think block ($with vs $without)"

# Any template renders through the Jinja engine; one that does not parse is one line naming
# --chat-template and --raw, which both get past it.
printf '%s' '{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>' >"$M/chat_template.jinja"
run_ok "any template" "$BIN" generate -m "$M" -p "Hi" -n 2 --temp 0 --json
echo '{% for m in messages %}{{ m.content }' >"$M/chat_template.jinja"
run_err "unparsable template" "the chat template does not parse" "$BIN" generate -m "$M" -p "Hi" -n 2
grep -q -- "--chat-template" "$WORK/err" || fail "the parse error does not name --chat-template"
[ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "the parse error is not one line: $(cat "$WORK/err")"
run_ok "unparsable template, --raw" "$BIN" generate -m "$M" -p "Hi" -n 2 --raw
run_ok "unparsable template, --chat-template chatml" "$BIN" generate -m "$M" -p "Hi" -n 2 --chat-template chatml
printf 'Hi\n' >"$WORK/hi.txt"
run_ok "chat --raw" sh -c "printf 'Hi\nAgain\n/exit\n' | '$BIN' chat -m '$M' -n 4 --temp 0 --raw"
[ "$(wc -l <"$WORK/out")" -ge 2 ] || fail "chat --raw printed fewer than two replies"
run_err "unknown --chat-template" "neither a file nor a known name" "$BIN" generate -m "$M" -p "Hi" -n 2 --chat-template nope
# No template at all: ChatML, with a warning (llama-server's rule).
rm "$M/chat_template.jinja"
python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c.pop('chat_template', None); json.dump(c, open(p, 'w'))" \
  "$M/tokenizer_config.json"
run_ok "no template: ChatML" "$BIN" generate -m "$M" -p "Hi" -n 2 --temp 0
grep -q "using ChatML" "$WORK/err" || fail "no warning about the ChatML fallback: $(cat "$WORK/err")"
run_ok "names" "$BIN" info --chat-templates
grep -qx "chatml" "$WORK/out" || fail "info --chat-templates does not list chatml"
grep -qx "google-gemma-2-2b-it" "$WORK/out" || fail "info --chat-templates does not list the Hub templates"

# A real-size family preset validates without writing 16 GB: inspect of the config alone.
run_err "unknown model_type" "supported: deepseek_v2, deepseek_v3, gemma3_text, glm4_moe, gpt_oss, llama, mistral, phi3, qwen2, qwen3, qwen3_moe, smollm3" \
  sh -c "mkdir -p '$WORK/x' && echo '{\"model_type\": \"olmo2\"}' > '$WORK/x/config.json' && '$BIN' inspect -m '$WORK/x'"
finish families
