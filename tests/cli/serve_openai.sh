#!/usr/bin/env bash
# `tessera serve` driven by the official openai Python client (tools/serve_client_check.py,
# pinned in tools/requirements-serve.txt): chat, streaming, completions, structured outputs, error
# classes, and a bounded load test of 200 requests at concurrency 16 on loopback; then
# tools/structured_output_check.py (200 random schemas validated with jsonschema). The client's venv is made
# once under build/ (or $TESSERA_CLIENT_VENV); without python3-venv or PyPI the test skips.
# Usage: serve_openai.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"
VENV="${TESSERA_CLIENT_VENV:-$(dirname "$BIN")/openai-venv}"
REQ="$SRC/tools/requirements-serve.txt"
if ! cmp -s "$REQ" "$VENV/requirements-serve.txt" 2>/dev/null; then
  rm -rf "$VENV"
  if ! python3 -m venv "$VENV" >"$WORK/venv.log" 2>&1 ||
     ! timeout 300 "$VENV/bin/pip" install -q -r "$REQ" >>"$WORK/venv.log" 2>&1; then
    echo "serve_openai: SKIP: cannot make the openai client venv (python3-venv and PyPI needed): $(tail -1 "$WORK/venv.log")"
    rm -rf "$VENV"
    exit 0
  fi
  cp "$REQ" "$VENV/requirements-serve.txt"
fi
"$BIN" serve --port 0 -m "$SRC/models/tiny-gpt-oss" --parallel 8 -c 1024 --api-key k3y >"$WORK/out" 2>"$WORK/err" &
PID=$!
for _ in $(seq 300); do grep -q '^listening on ' "$WORK/out" && break; sleep 0.1; done
URL=$(sed -n 's/^listening on //p' "$WORK/out")
[ -n "$URL" ] || { fail "server did not start: $(cat "$WORK/err")"; finish serve_openai; }
timeout 600 "$VENV/bin/python" "$SRC/tools/serve_client_check.py" "$URL" --api-key k3y --requests 200 --concurrency 16 ||
  fail "the openai client check failed"
kill -TERM "$PID"
wait "$PID" || fail "server exit $?"
# Structured outputs against a JSON Schema validator: 200 random schemas with random seeds on
# /v1/completions, 20 through harmony chat (reasoning, then the final message).
"$BIN" serve --port 0 -m "$SRC/models/tiny-gpt-oss" --parallel 4 -c 4096 >"$WORK/out" 2>"$WORK/err" &
PID=$!
for _ in $(seq 300); do grep -q '^listening on ' "$WORK/out" && break; sleep 0.1; done
URL=$(sed -n 's/^listening on //p' "$WORK/out")
timeout 600 "$VENV/bin/python" "$SRC/tools/structured_output_check.py" "$URL" --count 200 --route completions ||
  fail "structured outputs on /v1/completions"
timeout 600 "$VENV/bin/python" "$SRC/tools/structured_output_check.py" "$URL" --count 20 --route chat --seed 3 ||
  fail "structured outputs on /v1/chat/completions"
kill -TERM "$PID"
wait "$PID" || fail "server exit $?"
finish serve_openai
