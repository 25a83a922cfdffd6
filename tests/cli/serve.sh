#!/usr/bin/env bash
# `tessera serve` over loopback with curl (serving.md §3, §4, §8): the routes, non-streaming and
# SSE replies (role chunk first, usage chunk with no choices, [DONE]), the OpenAI error object for
# bad requests (400, 404, 413, 401), concurrent requests batched with no sequence left running,
# a client that disconnects mid-stream, SIGTERM ending the process with exit 0, and --spec ngram.
# Usage: serve.sh <tessera-binary> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash" "$@"
command -v curl >/dev/null || { echo "serve: SKIP: curl is not installed (scripts/setup.sh installs it)"; exit 0; }

# post PATH JSON: status in $WORK/code, body in $WORK/body.
post() {
  curl -s -o "$WORK/body" -w '%{http_code}' -H 'Content-Type: application/json' "$URL$1" -d "$2" >"$WORK/code"
}
expect_status() {  # NAME STATUS [TEXT]
  [ "$(cat "$WORK/code")" = "$2" ] || fail "$1: status $(cat "$WORK/code"), expected $2: $(head -c 400 "$WORK/body")"
  grep -q '"error":{' "$WORK/body" || [ "$2" = 200 ] || fail "$1: no error object: $(head -c 400 "$WORK/body")"
  [ $# -lt 3 ] || grep -qF -- "$3" "$WORK/body" || fail "$1: body lacks '$3': $(head -c 400 "$WORK/body")"
}
metric() { curl -s "$URL/metrics" | sed -n "s/^tessera:$1 //p"; }

start_server gptoss -m "$SRC/models/tiny-gpt-oss" --parallel 4 -c 4096
grep -q '127.0.0.1' <<<"$URL" || fail "default bind is not 127.0.0.1: $URL"

curl -s "$URL/health" | grep -q '"status":"ok"' || fail "health"
curl -s "$URL/v1/models" | grep -q '"id":"tiny-gpt-oss"' || fail "models: $(curl -s "$URL/v1/models")"
curl -s "$URL/" | grep -q '<title>tessera chat</title>' || fail "chat page"

post /v1/chat/completions '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":8,"seed":3,"reasoning_effort":"low"}'
expect_status "chat" 200 '"object":"chat.completion"'
grep -q '"finish_reason":"length"' "$WORK/body" || fail "chat: finish_reason: $(cat "$WORK/body")"
grep -q '"completion_tokens":8' "$WORK/body" || fail "chat: usage: $(cat "$WORK/body")"
# The same seed gives the same reply, the second time from the slot's cached prompt.
content() { sed 's/.*"message":\({[^}]*}\).*/\1/' "$WORK/body"; }
first=$(content)
post /v1/chat/completions '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":8,"seed":3,"reasoning_effort":"low"}'
[ "$first" = "$(content)" ] || fail "seeded chat replies differ: $first / $(content)"
grep -q '"cached_tokens":[1-9]' "$WORK/body" || fail "the repeated prompt was not served from the cache: $(cat "$WORK/body")"

curl -sN -H 'Content-Type: application/json' "$URL/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}}' >"$WORK/sse"
head -1 "$WORK/sse" | grep -q '"delta":{"role":"assistant","content":""}' || fail "sse: first chunk: $(head -1 "$WORK/sse")"
grep -q '"finish_reason":"length"' "$WORK/sse" || fail "sse: no finish chunk"
grep -q '"choices":\[\],"usage":{"prompt_tokens":[0-9]*,"completion_tokens":6' "$WORK/sse" || fail "sse: no usage chunk: $(tail -5 "$WORK/sse")"
[ "$(grep -v '^$' "$WORK/sse" | tail -1)" = "data: [DONE]" ] || fail "sse: does not end with [DONE]"
grep -v '^$' "$WORK/sse" | grep -qv '^data: ' && fail "sse: a line that is not a data event"

post /v1/completions '{"prompt":"def f(x):","max_tokens":5,"temperature":0,"logprobs":2}'
expect_status "completions" 200 '"object":"text_completion"'
grep -q '"token_logprobs":\[' "$WORK/body" || fail "completions: no logprobs: $(cat "$WORK/body")"
post /v1/completions '{"prompt":"def f(x):","max_tokens":40,"temperature":0}'
text=$(sed 's/.*"text":"\([^"]*\)".*/\1/' "$WORK/body")
stop=${text:6:3}
post /v1/completions "{\"prompt\":\"def f(x):\",\"max_tokens\":40,\"temperature\":0,\"stop\":[\"$stop\"]}"
grep -q '"finish_reason":"stop"' "$WORK/body" || fail "stop string: $(cat "$WORK/body")"
grep -qF "$stop" <<<"$(sed 's/.*"text":"\([^"]*\)".*/\1/' "$WORK/body")" && fail "stop string returned in the text"

# Errors: the OpenAI error object with the right status.
post /v1/chat/completions '{not json'
expect_status "bad json" 400 "not valid JSON"
post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}'
expect_status "wrong type" 400 "'temperature' must be a number"
post /v1/chat/completions '{"messages":[]}'
expect_status "no messages" 400 "'messages' must be a non-empty array"
post /v1/chat/completions '{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}'
expect_status "unknown model" 404 "model_not_found"
post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"max_tokens":600,"seed":4,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":99}},"required":["n"]}}}}'
expect_status "json schema" 200
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["choices"][0]["message"]["content"]; v=json.loads(m); assert 0 <= v["n"] <= 99 and list(v) == ["n"], v' "$WORK/body" ||
  fail "json schema reply: $(cat "$WORK/body")"
post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"array","uniqueItems":true}}}}'
expect_status "unsupported schema feature" 400 "'uniqueItems' at response_format.json_schema.schema is not supported"
post /v1/completions "{\"prompt\":\"$(printf 'word %.0s' $(seq 5000))\"}"
expect_status "prompt beyond the context" 400 "context_length_exceeded"
post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"tool_choice":"sometimes"}'
expect_status "tool_choice value" 400 "is not one of none, auto, required, or a function"
# max_tokens 0 generates nothing on both routes; max_completion_tokens applies to completions too.
post /v1/completions '{"prompt":"def f(x):","max_tokens":0}'
expect_status "completions max_tokens 0" 200 '"completion_tokens":0'
post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"max_tokens":0}'
expect_status "chat max_tokens 0" 200 '"completion_tokens":0'
post /v1/completions '{"prompt":"def f(x):","max_tokens":9,"max_completion_tokens":3}'
expect_status "completions max_completion_tokens" 200 '"completion_tokens":3'
# n > 1: one choice per index, the prompt counted once.
post /v1/completions '{"prompt":"def f(x):","max_tokens":4,"n":3,"seed":1}'
expect_status "n=3" 200 '"index":2'
grep -q '"completion_tokens":12' "$WORK/body" || fail "n=3: usage: $(cat "$WORK/body")"
grep -q '"prompt_tokens":[0-9]*,"completion' "$WORK/body" || fail "n=3: no prompt count"
curl -sN -H 'Content-Type: application/json' "$URL/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"n":2,"stream":true}' >"$WORK/sse2"
[ "$(grep -c '"finish_reason":"length"' "$WORK/sse2")" = 2 ] || fail "n=2 stream: finish chunks: $(cat "$WORK/sse2")"
grep -q '"index":1' "$WORK/sse2" || fail "n=2 stream: no choice 1"
# logit_bias +100 on one token makes it the greedy choice every time.
post /v1/completions '{"prompt":"def f(x):","max_tokens":4,"temperature":0,"logit_bias":{"42":100},"logprobs":0}'
expect_status "logit_bias" 200
python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); lp=b["choices"][0]["logprobs"]; t=lp["tokens"]; assert len(set(t))==1 and len(t)==4, t' "$WORK/body" 2>/dev/null ||
  fail "logit_bias: the biased token was not chosen every time: $(cat "$WORK/body")"
post /v1/completions '{"prompt":"x","logit_bias":{"-3":1}}'
expect_status "logit_bias key" 400 "is not a token id"
post /v1/completions '{"prompt":"x","logit_bias":{"5":101}}'
expect_status "logit_bias range" 400 "must be a number in [-100, 100]"
# models.retrieve, and the routes that are not served.
curl -s "$URL/v1/models/tiny-gpt-oss" | grep -q '"object":"model"' || fail "models/{id}"
curl -s -o "$WORK/body" -w '%{http_code}' "$URL/v1/models/gpt-4o" >"$WORK/code"
expect_status "models/{unknown}" 404 "model_not_found"
post /v1/embeddings '{"input":"x","model":"tiny-gpt-oss"}'
expect_status "embeddings" 404 "is not served"
printf '{"prompt":"\xff"}' >"$WORK/bad.json"
curl -s -o "$WORK/body" -w '%{http_code}' -H 'Content-Type: application/json' "$URL/v1/completions" --data-binary @"$WORK/bad.json" >"$WORK/code"
expect_status "invalid UTF-8" 400 "not valid UTF-8"
head -c $((17 << 20)) /dev/zero >"$WORK/big"
curl -s -o "$WORK/body" -w '%{http_code}' -H 'Content-Type: application/json' "$URL/v1/completions" --data-binary @"$WORK/big" >"$WORK/code"
expect_status "oversize body" 413 "larger than the server accepts"
curl -s -o "$WORK/body" -w '%{http_code}' "$URL/v1/nope" >"$WORK/code"
expect_status "unknown route" 404 "no route GET '/v1/nope'"

# 16 concurrent requests on 4 slots: all answered, all batched, nothing left running.
pids=()
for i in $(seq 16); do
  curl -s -o "$WORK/c$i" -w '%{http_code}' -H 'Content-Type: application/json' "$URL/v1/completions" \
    -d "{\"prompt\":\"Story $i\",\"max_tokens\":24,\"seed\":$i}" >"$WORK/c$i.code" &
  pids+=($!)
done
wait "${pids[@]}"
for i in $(seq 16); do
  [ "$(cat "$WORK/c$i.code")" = 200 ] || fail "concurrent request $i: $(cat "$WORK/c$i.code") $(cat "$WORK/c$i")"
done
# Streams that must outlast the client or the server: tiny-gpt-oss's end-of-text token (id 0, its
# generation_config's eos) is banned, else a sampled one ends the stream early now and then.
ENDLESS='"prompt":"Go on","max_tokens":100000,"stream":true,"logit_bias":{"0":-100}'
# A client that leaves mid-stream: its sequence is cancelled and freed.
timeout 1 curl -sN -H 'Content-Type: application/json' "$URL/v1/completions" -d "{$ENDLESS,\"seed\":5}" >/dev/null
for _ in $(seq 50); do [ "$(metric num_requests_running)" = 0 ] && break; sleep 0.1; done
[ "$(metric num_requests_running)" = 0 ] || fail "sequences still running after the load: $(metric num_requests_running)"
[ "$(metric request_cancelled_total)" -ge 1 ] || fail "the disconnected stream was not cancelled"
steps=$(metric engine_steps_total)
tokens=$(metric generation_tokens_total)
[ "$steps" -lt "$tokens" ] || fail "no batching: $steps steps for $tokens tokens"

# SIGTERM mid-stream: the stream ends with an error event and [DONE]; the server exits 0.
curl -sN -H 'Content-Type: application/json' "$URL/v1/completions" -d "{$ENDLESS,\"seed\":6}" >"$WORK/term" &
curl_pid=$!
sleep 0.5
kill -TERM "$PID"
wait "$PID"
rc=$?
wait "$curl_pid"
[ "$rc" -eq 0 ] || fail "SIGTERM: exit $rc: $(cat "$WORK/gptoss.err")"
grep -q 'data: {"error":' "$WORK/term" || fail "SIGTERM: the stream has no error event: $(tail -c 300 "$WORK/term")"
[ "$(grep -v '^$' "$WORK/term" | tail -1)" = "data: [DONE]" ] || fail "SIGTERM: the stream does not end with [DONE]"

# --api-key: every route but /health needs the Bearer key.
start_server keyed -m "$SRC/models/tiny-llama" --api-key sesame --parallel 1 -c 128
curl -s "$URL/health" | grep -q '"status":"ok"' || fail "keyed: health needs no key"
curl -s -o "$WORK/body" -w '%{http_code}' "$URL/v1/models" >"$WORK/code"
expect_status "no key" 401 "needs an API key"
curl -s -o "$WORK/body" -w '%{http_code}' -H 'Authorization: Bearer wrong' "$URL/v1/models" >"$WORK/code"
expect_status "wrong key" 401 "invalid API key"
curl -s -o "$WORK/body" -w '%{http_code}' -H 'Authorization: Bearer sesame' "$URL/v1/models" >"$WORK/code"
expect_status "right key" 200
post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}]}'
expect_status "keyed chat without a key" 401
curl -s -o "$WORK/body" -w '%{http_code}' -X OPTIONS -H 'Origin: http://app.example' "$URL/v1/chat/completions" >"$WORK/code"
expect_status "preflight without --cors" 405 "cross-origin requests"
kill -TERM "$PID"
wait "$PID" || fail "keyed server: exit $?"

# --cors: preflights are answered without a key; replies carry the origin.
start_server cors -m "$SRC/models/tiny-llama" --api-key sesame --parallel 1 -c 128 --cors http://app.example
curl -s -D "$WORK/head" -o "$WORK/body" -w '%{http_code}' -X OPTIONS -H 'Origin: http://app.example' \
  -H 'Access-Control-Request-Method: POST' "$URL/v1/chat/completions" >"$WORK/code"
[ "$(cat "$WORK/code")" = 204 ] || fail "cors preflight: $(cat "$WORK/code") $(cat "$WORK/body")"
grep -qi '^Access-Control-Allow-Origin: http://app.example' "$WORK/head" || fail "cors: no allow-origin: $(cat "$WORK/head")"
grep -qi '^Access-Control-Allow-Headers: .*Authorization' "$WORK/head" || fail "cors: no allow-headers"
curl -s -D "$WORK/head" -o /dev/null -H 'Origin: http://app.example' -H 'Authorization: Bearer sesame' "$URL/v1/models"
grep -qi '^Access-Control-Allow-Origin: http://app.example' "$WORK/head" || fail "cors: GET without allow-origin"
curl -s -D "$WORK/head" -o /dev/null -H 'Origin: http://evil.example' -H 'Authorization: Bearer sesame' "$URL/v1/models"
grep -qi '^Access-Control-Allow-Origin' "$WORK/head" && fail "cors: another origin was allowed"
kill -TERM "$PID"
wait "$PID" || fail "cors server: exit $?"

# --spec ngram: a reply that copies from its prompt confirms drafts (/metrics counts them).
start_server spec -m "$SRC/models/tiny-llama" --parallel 2 -c 256 --spec ngram --spec-k 4
post /v1/completions '{"prompt":"def add(a, b):\n    return a + b\n\n\ndef add(a, b):\n    return a + b\n\n\ndef add(","max_tokens":40,"temperature":0}'
expect_status "spec completion" 200
drafted=$(metric spec_decode_num_draft_tokens_total)
accepted=$(metric spec_decode_num_accepted_tokens_total)
awk -v d="$drafted" -v a="$accepted" 'BEGIN { exit !(d > 0 && a > 0 && a <= d) }' ||
  fail "spec: drafted $drafted, accepted $accepted"
kill -TERM "$PID"
wait "$PID" || fail "spec server: exit $?"

run_err "serve: bad port" "--port 70000 must lie in [0, 65535]" "$BIN" serve -m "$SRC/models/tiny-llama" --port 70000
run_err "serve: spec rows without spec" "--spec-rows needs --spec ngram" "$BIN" serve -m "$SRC/models/tiny-llama" --spec-rows 4
run_err "serve: spec k without spec" "--spec-k needs --spec ngram" "$BIN" serve -m "$SRC/models/tiny-llama" --spec-k 4
finish serve
