#!/usr/bin/env bash
# The chat page of `tessera serve` (GET /) in headless Chromium (Debian's `chromium`): the page
# sends a message (/?q=…), and the DOM after the page ran must hold the user's bubble and an
# assistant bubble with streamed text. Skips with a message when chromium is not installed.
# Usage: serve_browser.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "serve_browser: SKIP: chromium is not installed (scripts/setup.sh installs it)"; exit 0; }
"$BIN" serve --port 0 -m "$SRC/models/tiny-gpt-oss" -c 1024 >"$WORK/out" 2>"$WORK/err" &
PID=$!
for _ in $(seq 300); do grep -q '^listening on ' "$WORK/out" && break; sleep 0.1; done
URL=$(sed -n 's/^listening on //p' "$WORK/out")
[ -n "$URL" ] || { fail "server did not start: $(cat "$WORK/err")"; finish serve_browser; }
# Root needs --no-sandbox; a private profile keeps runs apart. --dump-dom takes the DOM after a
# virtual-time budget that does not wait for a streaming fetch, so on a busy machine the first
# token may not be in yet: up to 10 tries.
for attempt in $(seq 10); do
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$WORK/profile" \
    --virtual-time-budget=$((attempt * 5000)) --dump-dom "$URL/?q=Hello%20there" >"$WORK/dom" 2>"$WORK/chromium.err" ||
    { fail "chromium failed: $(tail -3 "$WORK/chromium.err")"; break; }
  grep -q '<div class="msg assistant"><div class="reasoning">[^<]*</div><div class="content">[^<]' "$WORK/dom" && break
  sleep 1
done
grep -q '<div class="msg user"><div class="reasoning"></div><div class="content">Hello there</div>' "$WORK/dom" ||
  fail "the page shows no user message: $(grep -o '<div id="log">.\{0,300\}' "$WORK/dom")"
reply=$(grep -o '<div class="msg assistant"><div class="reasoning">[^<]*</div><div class="content">[^<]*' "$WORK/dom" |
  sed 's/.*<div class="content">//')
[ -n "$reply" ] || fail "no streamed reply in the page: $(grep -o '<div id="log">.\{0,400\}' "$WORK/dom")"
grep -q 'class="content error"' "$WORK/dom" && fail "the page shows an error: $(grep -o 'error: [^<]*' "$WORK/dom")"
kill -TERM "$PID"
wait "$PID" || fail "server exit $?"
echo "serve_browser: streamed reply in the page (try $attempt): ${reply:0:60}"
finish serve_browser
