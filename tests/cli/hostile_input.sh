#!/usr/bin/env bash
# Hostile input and resource limits at the command line (issue 13, points 2, 3, 7 and 8): every
# case used to crash (SIGSEGV), hang, allocate until killed, or leave half-written output. Each
# must now be one `tessera: error:` line with exit code 2, at once.
# Usage: hostile_input.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"

M="$WORK/tiny"
run_ok "synth" "$BIN" synth --preset tiny --out "$M" --seed 3
G="$SRC/tests/data/gpt_oss_golden/tiny_a"
# Every command below must end within this many seconds (a hang is a failure, not a stuck CI).
T=(timeout 60)

# ---- point 2: JSON nested 100,000 levels deep, in every JSON file a command reads ----
deep_objects=$(printf '{"a":%.0s' $(seq 100000); printf 1; printf '}%.0s' $(seq 100000))
deep_arrays=$(printf '[%.0s' $(seq 100000); printf ']%.0s' $(seq 100000))
for file in config.json generation_config.json; do
  for deep in "$deep_objects" "$deep_arrays"; do
    D="$WORK/deep"
    rm -rf "$D" && cp -r "$M" "$D"
    # Insert the nested value as a new last key of the top-level object.
    sed -i '$ s/}[[:space:]]*$//' "$D/$file"
    printf ', "deep": %s}\n' "$deep" >>"$D/$file"
    # (quantize reads config.json only; it copies generation_config.json as it is.)
    commands=("inspect -m $D" "generate -m $D -p hi -n 2" "logits -m $D --ids 1,2" "bench -m $D -p 4 -n 2 -r 1")
    [ "$file" = config.json ] && commands+=("quantize -m $D --to mxfp4 --out $WORK/q")
    for cmd in "${commands[@]}"; do
      # shellcheck disable=SC2086
      run_err "$file deep: $cmd" "nested deeper than 128 levels" "${T[@]}" "$BIN" $cmd
    done
    # shellcheck disable=SC2086
    run_err "$file deep: chat" "nested deeper than 128 levels" "${T[@]}" "$BIN" chat -m "$D" </dev/null
  done
done
D="$WORK/deep"
rm -rf "$D" && cp -r "$M" "$D"
printf '{"model": %s}' "$deep_arrays" >"$D/tokenizer.json"
run_err "tokenizer.json deep" "nested deeper than 128 levels" "${T[@]}" "$BIN" generate -m "$D" -p hi -n 1
run_err "detokenize deep stdin" "nested deeper than 128 levels" "${T[@]}" "$BIN" detokenize -m "$M" <<<"$deep_arrays"

# ---- point 8: a config.json that is a FIFO (or a directory) is refused, not waited on ----
F="$WORK/fifo"
rm -rf "$F" && cp -r "$M" "$F"
rm "$F/config.json" && mkfifo "$F/config.json"
run_err "fifo inspect" "config.json: not a regular file" "${T[@]}" "$BIN" inspect -m "$F"
run_err "fifo generate" "config.json: not a regular file" "${T[@]}" "$BIN" generate -m "$F" -p hi -n 1
rm "$F/config.json" && mkdir "$F/config.json"
run_err "directory config" "config.json" "${T[@]}" "$BIN" generate -m "$F" -p hi -n 1
# Argument errors use the same one-line form.
run_err "unknown option" "tessera: error: " "$BIN" generate -m "$M" --no-such-option
run_err "missing --model" "tessera: error: --model is required" "$BIN" generate -p hi
run_err "bad number" "tessera: error: " "$BIN" generate -m "$M" -p hi -n lots

# ---- point 3: limits are checked before anything is allocated or run ----
run_err "context beyond the model" "context of 1073741824 positions exceeds the model's max_position_embeddings 131072" \
  "${T[@]}" "$BIN" generate -m "$M" -p hi -n 1 -c 1073741824
run_err "bench beyond the model" "reaches 1048576 positions, beyond the model's context of 131072" \
  "${T[@]}" "$BIN" bench -m "$M" -p 1048576 -n 0
run_err "spec-cost beyond the model" "beyond the model's context of 131072" \
  "${T[@]}" "$BIN" bench -m "$M" -p 131070 --spec-cost
long_prompt=$(printf 'word %.0s' $(seq 300))
run_err "prompt beyond -c" "exceeds the context size 64" "${T[@]}" "$BIN" generate -m "$M" --raw -p "$long_prompt" -c 64 -n 1
grep -qE "prompt of [0-9]+ tokens" "$WORK/err" || fail "prompt beyond -c: the prompt's length is not named: $(cat "$WORK/err")"
run_err "prompt + n beyond -c" "plus 100 new tokens exceeds the context size 64" \
  "${T[@]}" "$BIN" generate -m "$M" --raw -p "hello" -c 64 -n 100
# chat: a conversation that outgrows the context ends that turn with the error, not the session.
turns=$'hello there my friend how are you\nand another long line to overflow the context size here\n/reset\nhi\n'
run_ok "chat beyond -c" "${T[@]}" "$BIN" chat -m "$M" -c 80 -n 8 --temp 0 <<<"$turns"
grep -q "exceeds the context size 80 (raise it with -c); /reset starts a new conversation" "$WORK/err" \
  || fail "chat beyond -c: no error for the overflowing turn: $(cat "$WORK/err")"
[ "$(grep -c '' "$WORK/out")" -ge 2 ] || fail "chat beyond -c: the turn after /reset did not run: $(cat "$WORK/out")"
# A large context the sequence does not use costs nothing: -c 131072 (12 GiB of f32 rows for a
# gpt-oss-20b-sized cache; here 4 layers) starts at once.
run_ok "large unused context" "${T[@]}" "$BIN" generate -m "$M" --raw -p "hello" -c 131072 -n 2 --kv-type f32

# ---- point 7: an interrupted writer leaves no temporary files and nothing that looks complete ----
S="$WORK/synth_int"
TESSERA_FAIL_POINT=write.tensor:10:sigint "$BIN" synth --preset tiny --out "$S" --seed 1 >"$WORK/out" 2>"$WORK/err"
rc=$?
[ "$rc" -eq 130 ] || fail "synth interrupted: exit $rc, expected 130 (SIGINT): $(cat "$WORK/err")"
[ -z "$(find "$S" -name '*.tmp')" ] || fail "synth interrupted: temporary files left: $(ls "$S")"
[ ! -e "$S/config.json" ] || fail "synth interrupted: config.json written, the directory looks complete"
printf 'half a shard' >"$S/model.safetensors.tmp"  # as a writer killed with SIGKILL leaves it
run_ok "synth after an interrupted run" "$BIN" synth --preset tiny --out "$S" --seed 1
[ -z "$(find "$S" -name '*.tmp')" ] || fail "synth rerun: temporary files left: $(ls "$S")"
[ -e "$S/config.json" ] || fail "synth rerun: no config.json"
run_ok "inspect the rerun" "$BIN" inspect -m "$S"

finish hostile_input
