#!/usr/bin/env python3
"""Writes tests/data/harmony/goldens.json: gpt-oss chat requests rendered by openai-harmony itself.

The C++ side (tests/harmony_tools_test.cpp) must produce the same token ids for the same request
bodies, the same `# Tools` text for each parameter schema, and the same parsed messages for the
same model output (serving.md section 6).

- "render": OpenAI chat request bodies (messages, tools, tool_choice, reasoning_effort) mapped to
  harmony messages the way vLLM does (serving.md section 6, written out below in to_harmony) and
  rendered with `render_conversation_for_completion(..., Role.ASSISTANT)`: "ids" and "text".
- "schemas": one function tool per JSON schema, rendered as the content of a developer message
  with no instructions: "text" is that content (the `# Tools` section).
- "parse": model output after the prompt's `<|start|>assistant`, as text, its ids
  (`encode(text, allowed_special="all")`) and what
  `parse_messages_from_completion_tokens(ids, Role.ASSISTANT)` makes of them.

harmony loads o200k_base.tiktoken from TIKTOKEN_ENCODINGS_BASE (or downloads it); the file is
rebuilt here from shared/models/o200k_harmony/tokenizer.json into a temporary directory and
checked against harmony's pinned SHA-256, so nothing is downloaded.

Run: tools/.venv/bin/python tools/make_harmony_goldens.py   (openai-harmony 0.0.8)
"""
import base64
import copy
import hashlib
import importlib.metadata
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER_JSON = os.path.join(os.path.dirname(ROOT), "shared", "models", "o200k_harmony", "tokenizer.json")
OUT = os.path.join(ROOT, "tests", "data", "harmony", "goldens.json")
TIKTOKEN_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

sys.path.insert(0, os.path.join(ROOT, "tools"))
from bench_tokenizers import unicode_to_bytes  # noqa: E402  (GPT-2's byte <-> character table)


def write_tiktoken_file(directory):
    """o200k_base.tiktoken (base64 token bytes, rank) from the tokenizer.json vocabulary."""
    with open(TOKENIZER_JSON, encoding="utf-8") as f:
        vocab = json.load(f)["model"]["vocab"]
    char_to_byte = unicode_to_bytes()
    ranked = sorted((rank, bytes(char_to_byte[c] for c in token)) for token, rank in vocab.items())
    text = "".join(f"{base64.b64encode(b).decode()} {rank}\n" for rank, b in ranked if rank < 199998)
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert digest == TIKTOKEN_SHA256, digest
    with open(os.path.join(directory, "o200k_base.tiktoken"), "w") as f:
        f.write(text)


TIKTOKEN_DIR = tempfile.mkdtemp()
write_tiktoken_file(TIKTOKEN_DIR)
os.environ["TIKTOKEN_ENCODINGS_BASE"] = TIKTOKEN_DIR

from openai_harmony import (  # noqa: E402
    Author,
    Conversation,
    DeveloperContent,
    HarmonyEncodingName,
    Message,
    ReasoningEffort,
    RenderConversationConfig,
    Role,
    SystemContent,
    ToolDescription,
    load_harmony_encoding,
)

HARMONY_VERSION = importlib.metadata.version("openai-harmony")
assert HARMONY_VERSION == "0.0.8", HARMONY_VERSION
ENC = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


def text_of(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part["text"] for part in content)


def to_harmony(body, date):
    """vLLM's mapping of a chat request to harmony messages (serving.md section 6)."""
    tools = [] if body.get("tool_choice") == "none" else [t["function"] for t in body.get("tools", [])]
    system = SystemContent.new()
    effort = body.get("reasoning_effort", "medium")
    system = system.with_reasoning_effort({"low": ReasoningEffort.LOW, "medium": ReasoningEffort.MEDIUM,
                                           "high": ReasoningEffort.HIGH}[effort])
    if date:
        system = system.with_conversation_start_date(date)
    instructions = "\n\n".join(text_of(m.get("content")) for m in body["messages"]
                               if m["role"] in ("system", "developer"))
    messages = [Message.from_role_and_content(Role.SYSTEM, system)]
    if instructions or tools:
        developer = DeveloperContent.new()
        if instructions:
            developer = developer.with_instructions(instructions)
        if tools:
            developer = developer.with_function_tools([
                ToolDescription.new(f["name"], f.get("description", ""), parameters=f.get("parameters"))
                for f in tools])
        messages.append(Message.from_role_and_content(Role.DEVELOPER, developer))
    call_names = {}
    for m in body["messages"]:
        role = m["role"]
        if role == "user":
            messages.append(Message.from_role_and_content(Role.USER, text_of(m.get("content"))))
        elif role == "assistant":
            reasoning = m.get("reasoning_content") or m.get("reasoning")
            if reasoning:
                messages.append(Message.from_role_and_content(Role.ASSISTANT, reasoning).with_channel("analysis"))
            for call in m.get("tool_calls", []):
                fn = call["function"]
                call_names[call["id"]] = fn["name"]
                messages.append(Message.from_role_and_content(Role.ASSISTANT, fn.get("arguments", "{}"))
                                .with_channel("commentary").with_recipient("functions." + fn["name"])
                                .with_content_type("json"))
            if text_of(m.get("content")):
                messages.append(Message.from_role_and_content(Role.ASSISTANT, text_of(m["content"]))
                                .with_channel("final"))
        elif role == "tool":
            name = m.get("name") or call_names[m["tool_call_id"]]
            messages.append(Message.from_author_and_content(Author.new(Role.TOOL, "functions." + name),
                                                            text_of(m.get("content")))
                            .with_channel("commentary").with_recipient("assistant"))
    # vLLM's auto_drop_analysis_messages: analysis before the last final answer is dropped.
    last_final = max((i for i, m in enumerate(messages)
                      if m.author.role == Role.ASSISTANT and m.channel == "final"), default=-1)
    return [m for i, m in enumerate(messages) if not (i < last_final and m.channel == "analysis")]


def render_case(name, body, date=""):
    messages = to_harmony(body, date)
    ids = ENC.render_conversation_for_completion(Conversation.from_messages(messages), Role.ASSISTANT,
                                                 RenderConversationConfig(auto_drop_analysis=False))
    return {"name": name, "body": body, "current_date": date, "ids": list(ids), "text": ENC.decode_utf8(ids)}


def function(name, description=None, parameters=None):
    fn = {"name": name}
    if description is not None:
        fn["description"] = description
    if parameters is not None:
        fn["parameters"] = parameters
    return {"type": "function", "function": fn}


WEATHER = function("get_weather", "Get the weather for a city", {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"},
                   "unit": {"type": "string", "enum": ["c", "f"], "default": "c"}},
    "required": ["city"]})
SEARCH = function("search_docs", "Search the documentation.\nReturns at most `limit` hits.", {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5},
                   "sections": {"type": "array", "items": {"type": "string", "enum": ["api", "guide"]}}},
    "required": ["query"]})
PING = function("ping", "Check that the service is up.")
NO_DESCRIPTION = function("list_files", None, {"type": "object", "properties": {}})

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}

RENDER = [
    render_case("serving_md_example", {
        "messages": [{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "Weather in Paris?"},
                     {"role": "assistant", "content": None, "reasoning_content": "Need weather.", "tool_calls": [CALL]},
                     {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\":18}"}],
        "tools": [WEATHER]}, "2025-06-28"),
    render_case("several_tools_no_instructions", {
        "messages": [{"role": "user", "content": "Find the install guide."}],
        "tools": [SEARCH, PING, NO_DESCRIPTION], "tool_choice": "auto", "reasoning_effort": "high"}),
    render_case("tool_choice_none_declares_nothing", {
        "messages": [{"role": "developer", "content": "Answer briefly."}, {"role": "user", "content": "Hi"}],
        "tools": [WEATHER], "tool_choice": "none"}),
    render_case("completed_turn_then_ongoing_calls", {
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "reasoning": "Call the tool.", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18"},
            {"role": "assistant", "reasoning": "It said 18.", "content": "18 °C."},
            {"role": "user", "content": "And Rome and Oslo?"},
            {"role": "assistant", "reasoning": "Two calls.", "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}},
                {"id": "c3", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"f\"}"}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "24"},
            {"role": "tool", "tool_call_id": "c3", "content": [{"type": "text", "text": "50"}]}],
        "tools": [WEATHER], "reasoning_effort": "low"}),
]

SCHEMAS = [
    {"type": "object", "properties": {}},
    {"type": "object", "description": "Top-level description.", "properties": {
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
        "city": {"type": "string", "description": "City name", "title": "City", "examples": ["Paris", "Oslo"]},
        "n": {"type": "number", "default": 1.0}, "ratio": {"type": "number", "default": 0.25},
        "count": {"type": "integer", "default": 3, "minimum": 1}, "flag": {"type": "boolean", "default": False},
        "label": {"type": "string", "default": "none"},
        "tags": {"type": "array", "items": {"type": "string"}, "default": ["a", "b"]},
        "any_list": {"type": "array"},
        "opts": {"type": "object", "description": "nested", "properties": {
            "z": {"type": "integer"}, "a": {"type": ["string", "null"]},
            "deep": {"type": "object", "properties": {"k": {"type": "boolean", "nullable": True}}}}},
        "when": {"type": ["integer", "string"]},
        "maybe": {"type": "string", "nullable": True},
        "mystery": {"description": "no type"},
        "choice": {"description": "A or B", "oneOf": [
            {"type": "string", "description": "A or B"}, {"type": "integer", "description": "a number", "default": 2}]},
        "either": {"description": "prop", "default": "x", "oneOf": [
            {"type": "string", "description": "first"}, {"type": "object", "properties": {"q": {"type": "string"}},
                                                           "nullable": True}]},
        "colour": {"oneOf": [{"type": "string", "enum": ["red", "blue"], "default": "red"}, {"type": "null"}]},
        "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}},
                                             "required": ["id"]}},
    }, "required": ["city", "when", "items"]},
    {"oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "description": "as text"},
               {"type": "string", "enum": ["x"], "default": "x"}, {"type": "number", "nullable": True}]},
    {"type": "object", "properties": {"big": {"type": "number", "default": 1e21}, "tiny": {"type": "number", "default": 1e-7},
                                      "obj": {"type": "object", "default": {"k": [1, 2.5, "é"]}}}},
]

PARSE = [
    ("analysis_then_call", "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
                           "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>"),
    ("call_with_plain_json_type", "<|channel|>commentary to=functions.get_weather json<|message|>{}<|call|>"),
    ("recipient_in_role_header", " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
                                 "{\"city\": \"Oslo\"}<|call|>"),
    ("preamble_then_call", "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant<|channel|>commentary "
                           "to=functions.ping <|constrain|>json<|message|>{}<|call|>"),
    ("call_from_analysis", "<|channel|>analysis to=functions.search_docs <|constrain|>json<|message|>"
                           "{\"query\":\"install\"}<|call|>"),
    ("final_answer", "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>"
                     "It is 18 °C in Paris.<|return|>"),
]


def message_json(m):
    return {"role": m.author.name if m.author.role == Role.TOOL else m.author.role.value,
            "channel": m.channel or "", "recipient": m.recipient or "", "content_type": m.content_type or "",
            "content": "".join(c.text for c in m.content)}


def main():
    schema_cases = []
    for schema in SCHEMAS:
        developer = DeveloperContent.new().with_function_tools([ToolDescription.new("f", "A tool.", parameters=schema)])
        ids = ENC.render(Message.from_role_and_content(Role.DEVELOPER, developer))
        text = ENC.decode_utf8(ids)
        prefix, suffix = "<|start|>developer<|message|>", "<|end|>"
        assert text.startswith(prefix) and text.endswith(suffix), text
        schema_cases.append({"parameters": schema, "text": text[len(prefix):-len(suffix)]})
    parse_cases = []
    for name, text in PARSE:
        ids = ENC.encode(text, allowed_special="all")
        messages = ENC.parse_messages_from_completion_tokens(ids, Role.ASSISTANT)
        parse_cases.append({"name": name, "text": text, "ids": list(ids),
                            "messages": [message_json(m) for m in messages]})
    out = {"meta": {"openai_harmony": HARMONY_VERSION, "o200k_base_sha256": TIKTOKEN_SHA256,
                    "script": "tools/make_harmony_goldens.py"},
           "render": RENDER, "schemas": schema_cases, "parse": parse_cases}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(RENDER)} renderings, {len(schema_cases)} schemas, {len(parse_cases)} parses")


if __name__ == "__main__":
    main()
