#!/usr/bin/env python3
"""Drives a running `tessera serve` with the official OpenAI Python client (issue 17 point 6).

Checks what a client sees: a chat reply, a streamed chat reply with the usage chunk, a
tool round trip (tools declared, a call and its result in the history; the streamed tool-call
deltas accumulate to the non-streamed message), a completion with logprobs, models.retrieve,
n > 1, logit_bias, max_tokens 0, structured outputs (response_format json_schema / json_object /
a pydantic model through chat.completions.parse, tool_choice "required" and a named function), the SDK's exception classes for bad requests (400), an unknown model
(404) and a missing API key (401, with --api-key), and a bounded load test (N requests at
concurrency C) that must end with no error and no sequence left running (/metrics).

Usage: serve_client_check.py BASE_URL [--api-key KEY] [--requests 200] [--concurrency 16]
"""
import argparse
import concurrent.futures
import json
import sys
import urllib.request

import openai
import pydantic


def metric(base, name, key):
    req = urllib.request.Request(base + "/metrics", headers={"Authorization": f"Bearer {key}"} if key else {})
    for line in urllib.request.urlopen(req).read().decode().splitlines():
        if line.startswith(f"tessera:{name} "):
            return float(line.split()[1])
    raise AssertionError(f"/metrics has no tessera:{name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args()
    client = openai.OpenAI(base_url=a.base + "/v1", api_key=a.api_key or "none", max_retries=0, timeout=120)
    model = client.models.list().data[0].id

    chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello"}],
                                          max_tokens=8, seed=1, temperature=0.7)
    assert chat.object == "chat.completion", chat
    assert chat.choices[0].message.role == "assistant"
    assert chat.choices[0].finish_reason in ("stop", "length"), chat
    assert chat.usage.completion_tokens == 8 or chat.choices[0].finish_reason == "stop", chat.usage

    text, usage, finish = "", None, None
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello"}],
                                            max_tokens=8, seed=1, temperature=0.7, stream=True,
                                            stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert usage and usage.completion_tokens == chat.usage.completion_tokens, usage
    assert finish == chat.choices[0].finish_reason
    assert text == (chat.choices[0].message.content or ""), (text, chat.choices[0].message.content)

    done = client.completions.create(model=model, prompt="def f(x):", max_tokens=6, temperature=0, logprobs=2)
    assert done.object == "text_completion" and done.choices[0].logprobs.token_logprobs, done

    # models.retrieve, n > 1, logit_bias, max_tokens 0.
    assert client.models.retrieve(model).id == model
    several = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello"}],
                                             max_tokens=4, n=3, seed=5)
    assert [c.index for c in several.choices] == [0, 1, 2], several
    assert several.usage.completion_tokens <= 3 * 4, several
    biased = client.completions.create(model=model, prompt="def f(x):", max_tokens=3, temperature=0,
                                       logit_bias={"42": 100}, logprobs=0)
    assert len(set(biased.choices[0].logprobs.tokens)) == 1, biased
    empty = client.completions.create(model=model, prompt="def f(x):", max_tokens=0)
    assert empty.usage.completion_tokens == 0 and empty.choices[0].text == "", empty

    # Tools: declared, a call in the history and its result sent back; the streamed reply, its
    # tool-call deltas accumulated by index as SDK users do, equals the non-streamed one.
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                        "unit": {"type": "string", "enum": ["c", "f"]}},
                       "required": ["city"]}}}]
    turns = [{"role": "system", "content": "You are a helpful assistant."},
             {"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
             {"role": "tool", "tool_call_id": "call_a", "content": "{\"temp_c\": 18}"}]
    reply = client.chat.completions.create(model=model, messages=turns, tools=tools, tool_choice="auto",
                                           max_tokens=12, seed=3, temperature=0.9)
    message = reply.choices[0].message
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls"), reply
    assert (reply.choices[0].finish_reason == "tool_calls") == bool(message.tool_calls), reply
    calls, text = {}, ""
    for chunk in client.chat.completions.create(model=model, messages=turns, tools=tools, tool_choice="auto",
                                                max_tokens=12, seed=3, temperature=0.9, stream=True):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for d in choice.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"id": d.id, "name": d.function.name, "arguments": ""})
                call["arguments"] += d.function.arguments or ""
    assert text == (message.content or ""), (text, message.content)
    expected = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or []]
    assert [calls[i] for i in sorted(calls)] == expected, (calls, expected)
    # Structured outputs: the SDK's response_format forms and forced tool calls.
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        forced = client.chat.completions.create(model=model, messages=turns[:2], tools=tools, tool_choice=choice,
                                                max_tokens=1500, seed=4)
        call = forced.choices[0].message.tool_calls
        assert forced.choices[0].finish_reason == "tool_calls" and len(call) == 1, forced
        assert call[0].function.name == "get_weather" and "city" in json.loads(call[0].function.arguments), forced
    weather = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                "temp_c": {"type": "integer", "minimum": -50, "maximum": 60}},
               "required": ["city", "temp_c"], "additionalProperties": False}
    shaped = client.chat.completions.create(
        model=model, messages=turns[:2], max_tokens=1500, seed=5,
        response_format={"type": "json_schema", "json_schema": {"name": "weather", "schema": weather, "strict": True}})
    value = json.loads(shaped.choices[0].message.content)
    assert set(value) == {"city", "temp_c"} and -50 <= value["temp_c"] <= 60, value
    obj = client.chat.completions.create(model=model, messages=turns[:2], max_tokens=1500, seed=6,
                                         response_format={"type": "json_object"})
    assert isinstance(json.loads(obj.choices[0].message.content), dict), obj

    class Weather(pydantic.BaseModel):
        city: str = pydantic.Field(max_length=20)
        temp_c: int = pydantic.Field(ge=-50, le=60)

    parsed = client.chat.completions.parse(model=model, messages=turns[:2], max_tokens=1500, seed=7,
                                           response_format=Weather)
    assert isinstance(parsed.choices[0].message.parsed, Weather), parsed

    for bad in ({"tools": [{"type": "retrieval"}]}, {"tools": tools, "tool_choice": "sometimes"}):
        try:
            client.chat.completions.create(model=model, messages=turns[:2], max_tokens=4, **bad)
            raise AssertionError(f"{bad} accepted")
        except openai.BadRequestError as e:
            assert "tool" in str(e), e

    try:
        client.chat.completions.create(model=model, messages=[], max_tokens=4)
        raise AssertionError("empty messages accepted")
    except openai.BadRequestError as e:
        assert "messages" in str(e), e
    try:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
        raise AssertionError("unknown model accepted")
    except openai.NotFoundError:
        pass
    if a.api_key:
        try:
            openai.OpenAI(base_url=a.base + "/v1", api_key="wrong", max_retries=0).models.list()
            raise AssertionError("wrong key accepted")
        except openai.AuthenticationError:
            pass

    def one(i):
        r = client.completions.create(model=model, prompt=f"Request {i}:", max_tokens=8 + i % 9, seed=i)
        return r.usage.completion_tokens

    with concurrent.futures.ThreadPoolExecutor(a.concurrency) as pool:
        tokens = sum(pool.map(one, range(a.requests)))
    running = metric(a.base, "num_requests_running", a.api_key)
    waiting = metric(a.base, "num_requests_waiting", a.api_key)
    assert running == 0 and waiting == 0, (running, waiting)
    print(f"openai {openai.__version__}: chat, stream, tools, completions, errors and {a.requests} requests at "
          f"concurrency {a.concurrency} ({tokens} tokens) passed; nothing left running")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e!r}", file=sys.stderr)
        sys.exit(1)
