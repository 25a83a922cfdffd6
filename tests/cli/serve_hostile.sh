#!/usr/bin/env bash
# `tessera serve` against a hostile client (tools/hostile_http_client.py over raw sockets, with
# Debian's python3): 100k-deep JSON in every field of every route answered with 400 while a long
# stream goes on; RFC 9112 §6.3 framing (two Content-Lengths, Transfer-Encoding with
# Content-Length, negative and overflowing lengths: 400 and closed; a short body: 408 after the
# read timeout); HTTP/1.0 without chunked encoding; a half-closed client answered in full. Then
# the listen backlog is the one sized from --parallel and --queue, and the server still serves.
# Usage: serve_hostile.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"
command -v python3 >/dev/null || { echo "serve_hostile: SKIP: python3 is not installed"; exit 0; }

start_server hostile -m "$SRC/models/tiny-llama" --parallel 2 --queue 16 -c 4096 --timeout 2
PORT=${URL##*:}

python3 "$SRC/tools/hostile_http_client.py" 127.0.0.1 "$PORT" 2 || fail "hostile client (above)"

# The accept queue: 2 x (2 slots + 16 queued) + 64 = 100 (ss shows a listener's backlog as Send-Q).
if command -v ss >/dev/null; then
  backlog=$(ss -ltnH "sport = :$PORT" | awk '{print $3}' | head -1)
  [ "$backlog" = 100 ] || fail "listen backlog $backlog, expected 100"
fi
kill -0 "$PID" 2>/dev/null || fail "the server died: $(tail -5 "$WORK/hostile.err")"
kill -TERM "$PID"
wait "$PID" || fail "server exit $?: $(tail -3 "$WORK/hostile.err")"
finish serve_hostile
