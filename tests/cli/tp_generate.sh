#!/usr/bin/env bash
# `mpirun -np P tessera generate ... --tp P` prints exactly what one process prints (greedy and
# sampled, P = 2 and 4, exact and fast precision, tensor- and expert-parallel experts; and chat)
# on a synthetic tiny gpt-oss (4 heads, 2 kv heads, 8 experts, the real tokenizer), and the TP
# errors are clear (issue 7: TP execution of gpt-oss; the logits-level comparison on the golden
# models is tests/parallel/tp_model_test.cpp).
set -u
source "$(dirname "$0")/lib/common.bash" "$@"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN=(mpirun --oversubscribe)
G="$SRC/tests/data/gpt_oss_golden"
run_ok "synth" "$BIN" synth --preset tiny --out "$WORK/tiny" --seed 11

for model in tiny; do
  for precision in exact fast; do
    run_ok "$model one process" "$BIN" generate -m "$WORK/$model" --raw -p "the quick brown fox" -n 24 --temp 0 \
      --precision "$precision" --json
    one=$(cat "$WORK/out")
    for np in 2 4; do
      for experts in tensor expert; do
        run_ok "$model tp $np $experts" "${MPIRUN[@]}" -np "$np" "$BIN" generate -m "$WORK/$model" --raw \
          -p "the quick brown fox" -n 24 --temp 0 --precision "$precision" --json --tp "$np" --tp-experts "$experts"
        tp=$(cat "$WORK/out")
        # Same tokens and text; timings differ.
        strip() { grep -o '"tokens": *\[[^]]*\]\|"text": *"[^"]*"' <<<"$1"; }
        [ "$(strip "$one")" = "$(strip "$tp")" ] || fail "$model $precision tp $np $experts: output differs: $tp vs $one"
        [ -n "$(strip "$tp")" ] || fail "$model $precision tp $np $experts: no tokens in the output"
      done
    done
  done
done

# Sampling: every rank draws the same numbers (rank 0's seed), so the job still matches.
run_ok "sampled one" "$BIN" generate -m "$WORK/tiny" --raw -p "abc" -n 16 --temp 0.8 --seed 7 --json
one=$(grep -o '"tokens": *\[[^]]*\]' "$WORK/out")
run_ok "sampled tp" "${MPIRUN[@]}" -np 2 "$BIN" generate -m "$WORK/tiny" --raw -p "abc" -n 16 --temp 0.8 --seed 7 --json --tp 2
tp=$(grep -o '"tokens": *\[[^]]*\]' "$WORK/out")
[ "$one" = "$tp" ] || fail "sampled output differs under --tp 2: $tp vs $one"

# Errors: the degree must match the job and divide the heads (tiny_b has 6 heads).
run_err "tp without mpirun" "MPI ranks but this job has 1" "$BIN" generate -m "$WORK/tiny" -p x -n 1 --tp 2
"${MPIRUN[@]}" -np 4 "$BIN" generate -m "$G/tiny_b" -p x -n 1 --tp 4 >"$WORK/out" 2>"$WORK/err"
[ $? -ne 0 ] || fail "tp 4 on 6 heads: exit 0"
grep -q "tensor parallel degree 4 does not divide the 6 attention heads" "$WORK/err" \
  || fail "tp 4 on 6 heads: no clear error: $(head -3 "$WORK/err")"
# An unknown expert split is refused before anything loads.
"$BIN" generate -m "$WORK/tiny" -p x -n 1 --tp-experts rows >"$WORK/out" 2>"$WORK/err"
[ $? -ne 0 ] || fail "--tp-experts rows: exit 0"
grep -q "tp-experts: rows not in {tensor,expert}" "$WORK/err" || fail "--tp-experts rows: $(head -2 "$WORK/err")"

# chat under --tp: mpirun gives stdin to rank 0 only; rank 0 hands each line to the others, and the
# job prints what one process prints (commands included), once.
turns=$'hello there\n/reset\nwhat is two plus two\n/analysis\nand three?\n'
run_ok "chat one process" "$BIN" chat -m "$WORK/tiny" --temp 0 -n 12 <<<"$turns"
cp "$WORK/out" "$WORK/chat_one"
run_ok "chat tp 2" "${MPIRUN[@]}" -np 2 "$BIN" chat -m "$WORK/tiny" --temp 0 -n 12 --tp 2 <<<"$turns"
cmp -s "$WORK/chat_one" "$WORK/out" || fail "chat --tp 2 output differs: $(head -c 300 "$WORK/out") vs $(head -c 300 "$WORK/chat_one")"
[ "$(grep -c '' "$WORK/chat_one")" -ge 3 ] || fail "chat printed fewer than 3 turns: $(cat "$WORK/chat_one")"
[ "$(grep -c 'tessera chat:' "$WORK/err")" -eq 1 ] || fail "chat --tp 2: banner not printed once: $(cat "$WORK/err")"

finish tp_generate
