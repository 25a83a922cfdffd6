#!/usr/bin/env python3
"""Request budgets of `tessera serve` under hostile requests (issue 44; standard library only:
the suite runs it with Debian's python3, tests/cli/serve_limits.sh).

Against a server on a model with tool calls (tiny-gpt-oss), started with
`--grammar-timeout GRAMMAR_TIMEOUT --grammar-cache CACHE_MIB`, checks:
  * refusals within 2 s, each a 4xx naming the limit: a schema of 5,000 properties, an enum of
    100,000 values, 10,000 tools with tool_choice "required", 300 KB of schema, a prompt longer
    than the context with a forced tool call (the length is checked before any grammar is
    built), a POST without Content-Length (an empty body, RFC 9112 §6.3), a user message whose
    content is null;
  * a schema that compiles for longer than the deadline (1,500 optional properties) is a 400
    grammar_timeout after about GRAMMAR_TIMEOUT seconds, while a stream on another connection
    keeps flowing (no gap over 1 s);
  * a client that disconnects during such a compile leaves the server idle within 1 s (no
    compile process left, under 0.1 s of CPU in the next second);
  * 200 distinct 1,000-property schemas: the server's RSS stays under the cache bound + 300 MB
    (not checked under AddressSanitizer).
Prints one line per failed check and exits 1 when any failed.

Usage: hostile_limits_client.py HOST PORT SERVER_PID GRAMMAR_TIMEOUT CACHE_MIB
"""
import json
import os
import socket
import sys
import threading
import time

HOST, PORT, PID = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
GRAMMAR_TIMEOUT, CACHE_MIB = float(sys.argv[4]), int(sys.argv[5])
TICKS = os.sysconf("SC_CLK_TCK")
failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message, file=sys.stderr)


def request(raw, timeout=60):
    """Sends raw bytes, reads until the reply is complete or the server closes; returns
    (status, body bytes, seconds)."""
    s = socket.create_connection((HOST, PORT))
    s.settimeout(timeout)
    start = time.time()
    s.sendall(raw)
    out = b""
    try:
        while True:
            data = s.recv(65536)
            if not data:
                break
            out += data
            head, sep, body = out.partition(b"\r\n\r\n")
            if sep and b"content-length:" in head.lower():
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(body) >= length:
                    break
            if sep and b"chunked" in head.lower() and body.endswith(b"0\r\n\r\n"):
                break
    except socket.timeout:
        pass
    s.close()
    try:
        status = int(out.split(b" ", 2)[1])
    except (IndexError, ValueError):
        status = None
    return status, out.partition(b"\r\n\r\n")[2], time.time() - start


def post(path, body):
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(data) + data)


def schema_of(properties, required=True, tag=""):
    props = {"p%d%s" % (i, tag): {"type": "integer"} for i in range(properties)}
    schema = {"type": "object", "properties": props}
    if required:
        schema["required"] = list(props)
    return schema


def completion_with_schema(schema, max_tokens=1):
    return {"prompt": "x", "max_tokens": max_tokens,
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def children(pid):
    """The processes whose parent is `pid` (forked by any of its threads)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(entry)
        except (OSError, ValueError, IndexError):
            pass
    return found


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def expect_refusal(name, raw, status, text):
    got, body, seconds = request(raw)
    if got != status or text.encode() not in body:
        fail("%s: status %s, expected %d with %r: %r" % (name, got, status, text, body[:300]))
    if seconds > 2:
        fail("%s: answered after %.1f s (at most 2)" % (name, seconds))


def refusals():
    hello = [{"role": "user", "content": "hi"}]
    expect_refusal("5,000 properties", post("/v1/completions", completion_with_schema(schema_of(5000))), 400,
                   "object properties; at most")
    enum = {"type": "string", "enum": ["v%d" % i for i in range(100_000)]}
    expect_refusal("an enum of 100,000 values", post("/v1/completions", completion_with_schema(enum)), 400,
                   "enum/const values; at most")
    tools = [{"type": "function", "function": {"name": "f%d" % i, "parameters": {"type": "object"}}}
             for i in range(10_000)]
    expect_refusal("10,000 tools, required", post("/v1/chat/completions",
                                                  {"messages": hello, "tools": tools, "tool_choice": "required"}),
                   400, "tools; at most 128")
    big = {"type": "object", "properties": {"p": {"type": "string", "description": "d" * 300_000}}}
    expect_refusal("300 KB of schema", post("/v1/completions", completion_with_schema(big)), 400, "bytes; at most")
    long_prompt = [{"role": "user", "content": "def f(): return 1\n" * 3000}]
    few_tools = [{"type": "function", "function": {"name": "f%d" % i, "parameters": schema_of(15, tag=str(i))}}
                 for i in range(100)]
    expect_refusal("a prompt past the context, tool_choice required",
                   post("/v1/chat/completions", {"messages": long_prompt, "tools": few_tools,
                                                 "tool_choice": "required"}),
                   400, "leaves no room for a reply")
    expect_refusal("POST without Content-Length",
                   b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\r\n", 400,
                   "not valid JSON")
    expect_refusal("content null", post("/v1/chat/completions", {"messages": [{"role": "user", "content": None}]}),
                   400, "content' is required")


def slow_schema():
    # Optional properties: the grammar engine's work grows about cubically with their number.
    return completion_with_schema(schema_of(1500, required=False, tag="_%f" % time.time()))


def deadline_with_stream():
    gaps, done = [], {}

    def stream():
        # Streams back to back until the compile has ended: on an idle machine one stream of 400
        # tokens of the tiny model is over in well under a second.
        body = json.dumps({"prompt": "def main():", "max_tokens": 400, "stream": True, "temperature": 0,
                           "logit_bias": {"0": -100}}).encode()
        last, finished = None, True
        while "compile_end" not in done and finished:
            s = socket.create_connection((HOST, PORT))
            s.settimeout(60)
            s.sendall(post("/v1/completions", body))
            out = b""
            while b"data: [DONE]" not in out:
                data = s.recv(65536)
                if not data:
                    break
                now = time.time()
                if last is not None and "compile_start" in done and "compile_end" not in done:
                    gaps.append(now - last)
                last = now
                out += data
            s.close()
            finished = b"data: [DONE]" in out
        done["stream"] = finished

    streamer = threading.Thread(target=stream)
    streamer.start()
    time.sleep(0.3)
    done["compile_start"] = time.time()
    status, body, seconds = request(post("/v1/completions", slow_schema()), timeout=GRAMMAR_TIMEOUT + 30)
    done["compile_end"] = time.time()
    streamer.join(timeout=120)
    if status != 400 or b"grammar_timeout" not in body:
        fail("a compile past the deadline: status %s: %r" % (status, body[:300]))
    if not GRAMMAR_TIMEOUT - 0.5 <= seconds <= GRAMMAR_TIMEOUT + 2:
        fail("a compile past the deadline: answered after %.1f s (deadline %.1f s)" % (seconds, GRAMMAR_TIMEOUT))
    if not done.get("stream"):
        fail("the stream beside the compile did not finish")
    elif not gaps:
        fail("the stream beside the compile ended before the compile began: make it longer")
    elif max(gaps) > 1.0:
        fail("the stream stalled for %.2f s during the compile" % max(gaps))
    return len(gaps)


def disconnect_during_compile():
    s = socket.create_connection((HOST, PORT))
    s.sendall(post("/v1/completions", slow_schema()))
    time.sleep(0.7)
    if not children(PID):
        fail("no compile process while a slow schema compiles")
    s.close()
    time.sleep(1.0)
    left = children(PID)
    if left:
        fail("compile processes %s still running 1 s after the client left" % left)
    before = cpu_seconds(PID)
    time.sleep(1.0)
    used = cpu_seconds(PID) - before
    if used > 0.1:
        fail("the server used %.2f s of CPU in the second after the client left" % used)


def cache_bound():
    # Under AddressSanitizer (scripts/test.sh --sanitize) the heap's redzones and quarantine
    # make RSS meaningless: fewer schemas, no bound.
    sanitized = "ASAN_OPTIONS" in os.environ
    start = rss_mib(PID)
    for i in range(40 if sanitized else 200):
        status, body, _ = request(post("/v1/completions", completion_with_schema(schema_of(1000, tag="_%d" % i))),
                                  timeout=120)
        if status != 200:
            fail("1,000-property schema %d: status %s: %r" % (i, status, body[:300]))
            return start, start
    end = rss_mib(PID)
    if not sanitized and end > CACHE_MIB + 300:
        fail("RSS after 200 distinct schemas: %.0f MiB (from %.0f; bound %d + 300)" % (end, start, CACHE_MIB))
    return start, end


def main():
    refusals()
    gaps = deadline_with_stream()
    disconnect_during_compile()
    start, end = cache_bound()
    print("hostile_limits_client: %d failure(s); stream events during the compile %d; RSS %.0f -> %.0f MiB after "
          "200 schemas" % (len(failures), gaps, start, end))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
