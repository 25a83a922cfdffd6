#!/usr/bin/env bash
# `mpirun -np 2 tessera serve --tp 2` (issue 17 point 2): rank 0 serves HTTP and broadcasts each
# step's plan; rank 1 runs the same forward passes on its shard. The replies (greedy, seeded
# sampling, two requests batched, --spec ngram drafts) equal those of a one-process server, and
# SIGTERM stops the job through rank 0 (Open MPI 4.1's mpirun itself exits 1 after forwarding a
# signal, whatever its ranks return, so the test reads rank 0's log). Skips without mpirun.
# Usage: serve_tp.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"
command -v curl >/dev/null || { echo "serve_tp: SKIP: curl is not installed"; exit 0; }
command -v mpirun >/dev/null || { echo "serve_tp: SKIP: mpirun is not installed"; exit 0; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MODEL="$SRC/models/tiny-llama"
ARGS=(serve -m "$MODEL" --port 0 --parallel 2 -c 256 --spec ngram --spec-k 4)

wait_url() {  # FILE PID: prints the URL once the server listens
  for _ in $(seq 600); do
    grep -q '^listening on ' "$1" 2>/dev/null && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  sed -n 's/^listening on //p' "$1"
}
"$BIN" "${ARGS[@]}" >"$WORK/one.out" 2>"$WORK/one.err" &
ONE=$!
timeout 300 mpirun --oversubscribe -np 2 "$BIN" "${ARGS[@]}" --tp 2 >"$WORK/tp.out" 2>"$WORK/tp.err" &
TP=$!
U1=$(wait_url "$WORK/one.out" "$ONE")
U2=$(wait_url "$WORK/tp.out" "$TP")
[ -n "$U1" ] || { fail "one-process server did not start: $(cat "$WORK/one.err")"; finish serve_tp; }
[ -n "$U2" ] || { fail "--tp 2 server did not start: $(cat "$WORK/tp.err")"; kill "$ONE"; finish serve_tp; }

complete() {  # URL JSON OUT
  curl -s -H 'Content-Type: application/json' "$1/v1/completions" -d "$2" | python3 -c \
    'import json, sys; r = json.load(sys.stdin); print(r["choices"][0]["text"] if "choices" in r else r)' >"$3"
}
REQS=('{"prompt":"def add(a, b):\n    return a + b\n\n\ndef add(a, b):\n    return","max_tokens":32,"temperature":0}'
      '{"prompt":"import os\nimport","max_tokens":20,"temperature":0.8,"seed":5}'
      '{"prompt":"class Point:\n    def __init__(self","max_tokens":24,"temperature":1.0,"seed":9}')
for i in "${!REQS[@]}"; do complete "$U1" "${REQS[$i]}" "$WORK/one.$i"; done
# On the --tp job the requests run together (batched steps, plans with several sequences).
clients=()
for i in "${!REQS[@]}"; do complete "$U2" "${REQS[$i]}" "$WORK/tp.$i" & clients+=($!); done
wait "${clients[@]}"
for i in "${!REQS[@]}"; do
  [ -s "$WORK/tp.$i" ] || fail "request $i: no reply from the --tp job"
  cmp -s "$WORK/one.$i" "$WORK/tp.$i" || fail "request $i: --tp 2 replied '$(cat "$WORK/tp.$i")', one process '$(cat "$WORK/one.$i")'"
done
drafted=$(curl -s "$U2/metrics" | sed -n 's/^tessera:spec_decode_num_draft_tokens_total //p')
awk -v d="$drafted" 'BEGIN { exit !(d > 0) }' || fail "--tp 2 with --spec ngram drafted $drafted tokens"
running=$(curl -s "$U2/metrics" | sed -n 's/^tessera:num_requests_running //p')
[ "$running" = 0 ] || fail "--tp 2: $running sequences still running"

# The signal goes to mpirun itself (timeout, its parent, would pass it on to the whole group).
MPIRUN=$(pgrep -P "$TP" mpirun || echo "$TP")
kill -TERM "$ONE" "$MPIRUN"
wait "$ONE" || fail "one-process server: exit $?"
wait "$TP"
grep -q '^serve: stopped' "$WORK/tp.err" || fail "--tp 2: rank 0 did not stop cleanly: $(cat "$WORK/tp.err")"
grep -qi 'error' "$WORK/tp.err" && fail "--tp 2: errors on stop: $(cat "$WORK/tp.err")"
finish serve_tp
