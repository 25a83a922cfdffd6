# Shared helpers of the CLI contract scripts (tests/cli/*.sh). Source it after `set -u`:
#   source "$(dirname "$0")/lib/common.bash" "$@"
# It reads the script's arguments (<tessera-binary> <source-dir>) into BIN and SRC and makes a
# scratch directory WORK that is removed on exit.
BIN="$1"
SRC="${2:-}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# run_ok NAME CMD...: must exit 0; stdout in $WORK/out, stderr in $WORK/err.
run_ok() {
  local name="$1"
  shift
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "$name: exit $rc (stderr: $(cat "$WORK/err"))"
}

# run_err NAME TEXT CMD...: must exit 2 with exactly one stderr line containing TEXT.
run_err() {
  local name="$1" text="$2"
  shift 2
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  [ "$rc" -eq 2 ] || fail "$name: exit $rc, expected 2 (stderr: $(cat "$WORK/err"))"
  [ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "$name: stderr is not one line: $(cat "$WORK/err")"
  grep -qF -- "$text" "$WORK/err" || fail "$name: stderr lacks '$text': $(cat "$WORK/err")"
}

# finish NAME: the script's verdict and exit status.
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$1: $failures check(s) failed" >&2
    exit 1
  fi
  echo "$1: all checks passed"
}

# start_server NAME ARGS...: runs the server on a free port; sets URL and PID.
start_server() {
  local name="$1"
  shift
  "$BIN" serve --port 0 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PID=$!
  for _ in $(seq 300); do
    grep -q '^listening on ' "$WORK/$name.out" 2>/dev/null && break
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  URL=$(sed -n 's/^listening on //p' "$WORK/$name.out")
  [ -n "$URL" ] || { fail "$name: server did not start: $(cat "$WORK/$name.err")"; finish "$(basename "$0" .sh)"; }
}
