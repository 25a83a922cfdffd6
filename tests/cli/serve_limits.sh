#!/usr/bin/env bash
# `tessera serve`'s request budgets (issue 44, README "Limits"): a second server on a port in use
# exits 2 with one line (the socket is bound without SO_REUSEPORT); then
# tools/hostile_limits_client.py (Debian's python3): oversized schemas, enums and tool lists, a
# prompt past the context with a forced tool call, a POST without Content-Length and a null
# user message refused within 2 s; a grammar past --grammar-timeout refused while another stream
# flows; a client leaving during a compile leaves the server idle within 1 s; 200 distinct
# schemas keep RSS under --grammar-cache + 300 MB. Last, SIGTERM during a compile: the server
# exits within 3 s.
# Usage: serve_limits.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"
command -v python3 >/dev/null || { echo "serve_limits: SKIP: python3 is not installed"; exit 0; }
if ! "$BIN" info 2>/dev/null | grep -q "structured outputs: yes"; then
  echo "serve_limits: SKIP: this build has no grammar engine (scripts/setup_xgrammar.sh)"
  exit 0
fi

start_server limits -m "$SRC/models/tiny-gpt-oss" --parallel 2 -c 1024 --grammar-timeout 3 --grammar-cache 64
PORT=${URL##*:}

# One port, one server.
run_err "a second server on the port" "the port is in use" "$BIN" serve -m "$SRC/models/tiny-llama" --port "$PORT"

python3 "$SRC/tools/hostile_limits_client.py" 127.0.0.1 "$PORT" "$PID" 3 64 || fail "limits client (above)"

# SIGTERM while a grammar compiles: the compile is stopped and the server exits at once.
python3 - "$PORT" <<'PY' &
import json, socket, sys, time
props = {"q%d" % i: {"type": "integer"} for i in range(1500)}
body = json.dumps({"prompt": "x", "max_tokens": 1, "response_format": {"type": "json_schema",
                   "json_schema": {"name": "s", "schema": {"type": "object", "properties": props}}}}).encode()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
s.settimeout(10)
try:
    s.recv(65536)
except OSError:
    pass
PY
client=$!
sleep 1
kill -0 "$PID" 2>/dev/null || fail "the server died: $(tail -5 "$WORK/limits.err")"
start=$(date +%s.%N)
kill -TERM "$PID"
wait "$PID" || fail "server exit $?: $(tail -3 "$WORK/limits.err")"
seconds=$(echo "$(date +%s.%N) - $start" | bc)
[ "$(echo "$seconds < 3" | bc)" = 1 ] || fail "SIGTERM during a compile: the server took $seconds s to exit"
wait "$client" 2>/dev/null
finish serve_limits
