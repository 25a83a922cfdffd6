#!/usr/bin/env python3
"""Structured outputs of a running `tessera serve`, checked against a JSON Schema validator
(issue 27 point 5): N random schemas, each with its own random seed, sent as
response_format json_schema; every reply must parse and validate (jsonschema, Draft 2020-12,
with format checking). The schemas bound their values (string and array lengths, number
ranges, nesting) so that a reply fits in max_tokens; a reply cut by max_tokens counts as a
failure. Also checks that unsupported features are refused with a 400 naming the feature.

Usage: structured_output_check.py BASE_URL [--count 200] [--route chat|completions] [--seed S]
"""
import argparse
import json
import random
import sys
import urllib.error
import urllib.request

import jsonschema


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def random_schema(rng, depth=0):
    """A random schema of the supported features, bounded so that values stay short."""
    kinds = ["string", "integer", "number", "boolean", "enum", "const", "null"]
    if depth < 2:
        kinds += ["object", "object", "array", "anyOf"]
    kind = rng.choice(kinds)
    if kind == "string":
        s = {"type": "string", "maxLength": rng.randint(0, 12)}
        r = rng.random()
        if r < 0.15:
            s = {"type": "string", "format": rng.choice(["date", "time", "uuid", "ipv6", "email", "date-time"])}
        elif r < 0.3:
            s = {"type": "string", "pattern": rng.choice(["^[a-z]{1,5}$", "^[0-9]{3}-[0-9]{2}$", "^(yes|no)$"])}
        elif rng.random() < 0.3:
            s["minLength"] = rng.randint(0, s["maxLength"])
        return s
    if kind == "integer":
        lo = rng.randint(-1000, 1000)
        return {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 5000)}
    if kind == "number":
        lo = rng.randint(-100, 100)
        s = {"type": "number", "minimum": lo, "maximum": lo + rng.randint(1, 500)}
        return s
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "null":
        return {"type": "null"}
    if kind == "enum":
        pool = ["red", "green", "blue", 1, 2, 3.5, True, None, "a b", "ü"]
        return {"enum": rng.sample(pool, rng.randint(1, 4))}
    if kind == "const":
        return {"const": rng.choice(["x", 7, False, "tessera"])}
    if kind == "array":
        s = {"type": "array", "items": random_schema(rng, depth + 1), "maxItems": rng.randint(0, 3)}
        if rng.random() < 0.3:
            s["minItems"] = rng.randint(0, s["maxItems"])
        return s
    if kind == "anyOf":
        return {"anyOf": [random_schema(rng, depth + 1) for _ in range(rng.randint(2, 3))]}
    names = rng.sample(["id", "name", "city", "count", "items", "ok", "when", "tag", "x_y", "note"], rng.randint(1, 4))
    props = {n: random_schema(rng, depth + 1) for n in names}
    s = {"type": "object", "properties": props,
         "required": [n for n in names if rng.random() < 0.6], "additionalProperties": False}
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--route", choices=["chat", "completions"], default="completions")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--max-tokens", type=int, default=1500)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    failures = 0
    for i in range(a.count):
        schema = random_schema(rng)
        if rng.random() < 0.5 and schema.get("type") != "object":
            schema = {"type": "object", "properties": {"value": schema}, "required": ["value"],
                      "additionalProperties": False}
        fmt = {"type": "json_schema", "json_schema": {"name": f"s{i}", "schema": schema, "strict": True}}
        body = {"max_tokens": a.max_tokens, "seed": rng.randrange(1 << 31), "temperature": 1.0,
                "response_format": fmt}
        if a.route == "chat":
            body["messages"] = [{"role": "user", "content": "Answer in JSON."}]
            status, reply = post(a.base, "/v1/chat/completions", body)
            text = reply["choices"][0]["message"]["content"] if status == 200 else None
        else:
            body["prompt"] = "data = "
            status, reply = post(a.base, "/v1/completions", body)
            text = reply["choices"][0]["text"] if status == 200 else None
        problem = None
        if status != 200:
            problem = f"status {status}: {reply}"
        elif reply["choices"][0]["finish_reason"] != "stop":
            problem = f"finish_reason {reply['choices'][0]['finish_reason']}: {text[:200]!r}"
        else:
            try:
                jsonschema.validate(json.loads(text), schema, cls=jsonschema.Draft202012Validator,
                                    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
            except (ValueError, jsonschema.ValidationError) as e:
                problem = f"{type(e).__name__}: {str(e)[:300]} in {text[:300]!r}"
        if problem:
            failures += 1
            print(f"FAIL schema {i} {json.dumps(schema)}: {problem}", file=sys.stderr)

    refusals = 0
    for feature, schema in [("uniqueItems", {"type": "array", "uniqueItems": True}),
                            ("oneOf", {"oneOf": [{"type": "string"}, {"type": "integer"}]}),
                            ("if", {"if": {"type": "string"}, "then": {"maxLength": 3}}),
                            ("format \"ipv4\"", {"type": "string", "format": "ipv4"})]:
        body = {"prompt": "x", "max_tokens": 4,
                "response_format": {"type": "json_schema", "json_schema": {"name": "bad", "schema": schema}}}
        status, reply = post(a.base, "/v1/completions", body)
        if status != 400 or f"'{feature}'" not in reply["error"]["message"]:
            failures += 1
            print(f"FAIL unsupported {feature}: {status} {reply}", file=sys.stderr)
        else:
            refusals += 1
    print(f"structured_output_check: {a.count} schemas on /v1/{a.route}, {failures} failure(s); "
          f"{refusals} unsupported features refused by name")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
