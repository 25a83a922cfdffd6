#!/usr/bin/env python3
"""A hostile client of `tessera serve`, over raw sockets (standard library only: the suite runs
it with Debian's python3, tests/cli/serve_hostile.sh).

Checks, against a server started with `--timeout READ_TIMEOUT`:
  * 100,000-deep arrays and objects in every field of every POST route (and as the whole body)
    are answered with 400, while a long stream on another connection goes on to its end;
  * request framing (RFC 9112 §6.3): two different Content-Length values, Transfer-Encoding with
    Content-Length, a negative or overflowing Content-Length are a 400 at once and the connection
    is closed; a body shorter than its Content-Length is a 408 after the read timeout, closed;
  * an HTTP/1.0 request gets no chunked encoding; a client that half-closes after a complete
    request gets the whole reply;
  * the server still answers /health at the end.
Prints one line per failed check and exits 1 when any failed.

Usage: hostile_http_client.py HOST PORT READ_TIMEOUT
"""
import json
import socket
import sys
import threading
import time

HOST, PORT, READ_TIMEOUT = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
DEPTH = 100_000
failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message, file=sys.stderr)


def exchange(raw, half_close=False, timeout=None, wait_close=False):
    """Sends raw bytes; returns (reply bytes, whether the server closed, seconds). With
    wait_close, waits up to a second after a complete reply to see whether the server closes."""
    s = socket.create_connection((HOST, PORT))
    s.settimeout(timeout or READ_TIMEOUT + 10)
    start = time.time()
    s.sendall(raw)
    if half_close:
        s.shutdown(socket.SHUT_WR)
    out, closed = b"", False
    try:
        while True:
            data = s.recv(65536)
            if not data:
                closed = True
                break
            out += data
            if not half_close and reply_complete(out):
                if not wait_close:
                    break
                s.settimeout(1.0)
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    s.close()
    return out, closed, time.time() - start


def reply_complete(out):
    head, sep, body = out.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return body.endswith(b"0\r\n\r\n")


def status_of(out):
    try:
        return int(out.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def post(path, body, extra_headers=b""):
    if isinstance(body, str):
        body = body.encode()
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" + extra_headers +
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


def long_stream(result):
    # Long streams back to back until the hostile requests are over (result["stop"], set by the
    # main thread): a faster server must not let the stream end before the attack is under way.
    body = json.dumps({"prompt": "def main():", "max_tokens": 2000, "stream": True, "temperature": 0})
    result["events"], result["done"] = 0, True
    while True:
        out, _, _ = exchange(post("/v1/completions", body), timeout=300)
        result["end"] = time.time()
        result["events"] += out.count(b"data: ")
        result["done"] = result["done"] and b"data: [DONE]" in out and b'"finish_reason":"length"' in out
        if result.get("stop") or not result["done"]:
            return


def nested_bodies():
    deep_array = "[" * DEPTH + "]" * DEPTH
    deep_object = '{"a":' * DEPTH + "1" + "}" * DEPTH
    hello = [{"role": "user", "content": "hi"}]
    fields = {
        "/v1/chat/completions": ["messages", "tools", "tool_choice", "response_format", "logit_bias", "stop",
                                 "stream_options", "chat_template_kwargs", "reasoning_effort", "seed", "unknown_field"],
        "/v1/completions": ["prompt", "logit_bias", "stop", "stream_options", "max_tokens", "unknown_field"],
    }
    for route, names in fields.items():
        for deep in (deep_array, deep_object):
            yield route, "the whole body", deep
            for name in names:
                base = {"messages": hello} if route.endswith("chat/completions") else {"prompt": "x"}
                base["max_tokens"] = 1
                base.pop(name, None)
                text = json.dumps(base)[:-1] + ', "%s": %s}' % (name, deep)
                yield route, name, text
        # inside a message and inside a tool schema
        if route.endswith("chat/completions"):
            yield route, "messages[0].content", '{"messages":[{"role":"user","content":%s}]}' % deep_array
            yield route, "messages[0].tool_calls", \
                '{"messages":[{"role":"assistant","tool_calls":%s}]}' % deep_array
            yield route, "tools[0].function.parameters", \
                '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":' \
                '{"name":"f","parameters":%s}}]}' % deep_object


def main():
    stream = {}
    streamer = threading.Thread(target=long_stream, args=(stream,))
    streamer.start()
    time.sleep(0.5)

    attack_start = time.time()
    for route, field, body in nested_bodies():
        out, _, _ = exchange(post(route, body))
        if status_of(out) != 400 or b"nested deeper than" not in out:
            fail("%s %s 100k-deep: %r" % (route, field, out[:300]))

    cases = [
        ("two Content-Length values", b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 15\r\n"
         b"Content-Length: 16\r\n\r\n{\"prompt\":\"x\"}", b"two different Content-Length"),
        ("Transfer-Encoding and Content-Length", b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
         b"Transfer-Encoding: chunked\r\nContent-Length: 15\r\n\r\nf\r\n{\"prompt\":\"x\"}\r\n0\r\n\r\n",
         b"both Transfer-Encoding and Content-Length"),
        ("negative Content-Length", b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n",
         b"is not a length"),
        ("overflowing Content-Length", b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
         b"Content-Length: 18446744073709551617\r\n\r\n", b"is not a length"),
    ]
    for name, raw, text in cases:
        out, closed, seconds = exchange(raw, wait_close=True)
        if status_of(out) != 400 or text not in out:
            fail("%s: %r" % (name, out[:300]))
        if not closed or b"Connection: close" not in out:
            fail("%s: the connection was not closed" % name)
        if seconds > 2:
            fail("%s: answered after %.1f s, not at once" % (name, seconds))
    # A smuggled second request behind a refused one must not be answered.
    smuggle = (b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\n"
               b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
    out, closed, _ = exchange(smuggle, wait_close=True)
    if out.count(b"HTTP/1.1 ") != 1 or b'"status":"ok"' in out:
        fail("smuggled request answered: %r" % out[:400])

    out, closed, seconds = exchange(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n"
                                    b"{\"prompt\":", wait_close=True)
    if status_of(out) != 408 or not closed:
        fail("short body: status %s, closed %s: %r" % (status_of(out), closed, out[:300]))
    if not (READ_TIMEOUT - 0.5 <= seconds <= READ_TIMEOUT + 3):
        fail("short body: answered after %.1f s with a read timeout of %.0f s" % (seconds, READ_TIMEOUT))

    body = b'{"prompt":"x","max_tokens":3}'
    out, closed, _ = exchange(b"POST /v1/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    head, _, reply = out.partition(b"\r\n\r\n")
    if status_of(out) != 200 or b"chunked" in head.lower() or not closed:
        fail("HTTP/1.0: %r" % out[:300])
    else:
        try:
            json.loads(reply)
        except ValueError:
            fail("HTTP/1.0: the reply is not one JSON object: %r" % reply[:300])
    out, closed, _ = exchange(post("/v1/completions", body), half_close=True)
    if status_of(out) != 200 or b'"text_completion"' not in out or b'"usage"' not in out:
        fail("half-closed client: %r" % out[:300])
    sse = b'{"prompt":"x","max_tokens":3,"stream":true}'
    out, closed, _ = exchange(post("/v1/completions", sse), half_close=True)
    if status_of(out) != 200 or b"data: [DONE]" not in out:
        fail("half-closed client, streaming: %r" % out[:300])

    # A path that is not UTF-8 (found by the fuzz target: the 404 message once threw while being
    # written and took the server down).
    out, _, _ = exchange(b"POST /v1/chat/completi\x87ns HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}")
    if status_of(out) != 404:
        fail("a path that is not UTF-8: %r" % out[:300])

    stream["stop"] = True
    streamer.join(timeout=300)
    if not stream.get("done"):
        fail("the long stream did not reach its end while the hostile requests ran: %r" % stream)
    elif stream["end"] < attack_start + 0.5:
        fail("the long stream ended before the hostile requests were under way: make it longer")
    out, _, _ = exchange(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
    if b'"status":"ok"' not in out:
        fail("the server does not answer /health afterwards: %r" % out[:200])
    print("hostile_http_client: %d failure(s), long stream %d events" % (len(failures), stream.get("events", 0)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
