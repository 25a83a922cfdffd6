#!/usr/bin/env python3
"""Writes tests/data/chat_templates/goldens.json: chat prompts rendered by transformers itself.

Each of the four family templates in tests/data/chat_templates/<kind>.jinja (the real Hub
template text; see the README there) is set as the chat template of the matching small family
tokenizer in tests/data/tokenizer/families/<variant>/ (loaded with AutoTokenizer, so bos_token
and eos_token come from its tokenizer_config.json as in the real model directories), and every
conversation below is rendered with `tokenizer.apply_chat_template(..., tokenize=False)`, which
runs transformers' own Jinja environment (trim_blocks, lstrip_blocks, its tojson and
raise_exception). The rendered text is then encoded with `tokenizers.Tokenizer.from_file(
tokenizer.json).encode(text, add_special_tokens=False)`: the ids HF and vLLM feed the model for
a chat prompt (the template writes the BOS text itself; dense-decoders.md section 7.3).

Like vLLM (vllm/entrypoints/chat_utils.py, _postprocess_messages), the JSON-string `arguments`
of assistant tool calls are json.loads-ed before rendering (an empty or missing one becomes {}),
which is what tessera's ChatTemplate does too; the goldens keep the messages as the client sent
them (OpenAI style, arguments as a string), so the C++ test feeds the same input.

Output: {"meta": {...}, "cases": [{"template", "tokenizer", "name", "messages", "options",
"text" and "ids", or "error" (the template's raise_exception message)}], "tokenizer_config_cases":
[...]}. "options" holds add_generation_prompt, enable_thinking, and tools / date_string when
given. The tokenizer_config cases (see CONFIG_EDITS) record `tokenizer(text)["input_ids"]` of
AutoTokenizer over tokenizer.json with an edited tokenizer_config.json, and the class it chose.
"python" holds json.dumps and str.strip() results the renderers must reproduce.

Run: tools/.venv/bin/python tools/make_chat_goldens.py   (transformers 4.57.1, jinja2 3.1.6)
"""
import copy
import hashlib
import json
import os
import shutil
import tempfile

import jinja2
import tokenizers
import transformers
from transformers import AutoTokenizer

assert transformers.__version__ == "4.57.1", transformers.__version__
assert jinja2.__version__ == "3.1.6", jinja2.__version__

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = os.path.join(ROOT, "tests", "data", "chat_templates")
FAMILIES = os.path.join(ROOT, "tests", "data", "tokenizer", "families")
OUT = os.path.join(TEMPLATES, "goldens.json")

# template kind -> family tokenizer variant. DeepSeek-V2's own tokenizer (the DeepSeek-LLM
# pre-tokenizer) is not among the family tokenizers; its template's text needs only BOS and EOS,
# which the deepseek3 tokenizer spells the same.
KINDS = {"llama3.1": "llama3", "mistral-v0.3": "mistral", "qwen2.5": "qwen2", "qwen3": "qwen3",
         "deepseek-v2": "deepseek3", "deepseek-v3": "deepseek3", "deepseek-r1": "deepseek3"}
# DeepSeek's templates concatenate tool-call arguments as strings: rendered as the client sent
# them (vLLM's json.loads would make them dicts, which these templates cannot concatenate).
DEEPSEEK = {"deepseek-v2", "deepseek-v3", "deepseek-r1"}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city (°C)",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": []},
        "return": {"type": "string"},
    },
}


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def sys(text):
    return {"role": "system", "content": text}


def user(text):
    return {"role": "user", "content": text}


def assistant(text, **extra):
    return {"role": "assistant", "content": text, **extra}


def tool(text, call_id="call12345"):
    return {"role": "tool", "content": text, "tool_call_id": call_id}


SPEC_81 = [sys("You are a helpful assistant."), user("Hello"), assistant("Hi there!"), user("What is 2+2?")]
WEATHER_CALL = assistant("", tool_calls=[call("call12345", "get_weather", "{\"city\": \"Paris\"}")])
TOOL_ROUND = [sys("You are a weather bot."), user("Weather in Paris?"), WEATHER_CALL, tool("{\"temp_c\": 18}")]

# (name, messages, options); every conversation goes through every template, so each template
# also meets the inputs it refuses (the error cases record the template's own message).
COMMON = [
    ("spec_8_1", SPEC_81, {}),
    ("spec_8_1_no_generation_prompt", SPEC_81, {"add_generation_prompt": False}),
    ("no_system", [user("Hello")], {}),
    ("system_only", [sys("You are terse.")], {}),
    ("system_only_no_generation_prompt", [sys("You are terse.")], {"add_generation_prompt": False}),
    ("multi_turn", [user("a"), assistant("b"), user("c"), assistant("d")], {"add_generation_prompt": False}),
    ("ends_with_assistant_with_system", [sys("Be kind."), user("Hi"), assistant("Hello!")],
     {"add_generation_prompt": False}),
    ("whitespace_trimmed", [sys("  Be brief.\n"), user("\n  Hello  \n"), assistant("  Hi!  \n\n"),
                            user("\tBye\u3000\u00a0")], {}),
    ("unicode", [user("Grüße, 世界! 😀 e\u0301"), assistant("¡Hola! ☃"), user("naïve café — ok?")], {}),
    ("empty_contents", [sys(""), user(""), assistant(""), user("")], {}),
    ("special_token_text_in_content",
     [user("Say <|eot_id|> or <|im_end|> or [INST] or </s> literally"), assistant("<|im_start|>no"),
      user("<think>x</think>")], {}),
    ("tools_declared", [user("Hi")], {"tools": [WEATHER_TOOL, SEARCH_TOOL]}),
    ("tools_declared_with_system", [sys("Use tools."), user("Hi")], {"tools": [WEATHER_TOOL]}),
    ("tools_empty_list", [user("Hi")], {"tools": []}),
    ("tool_call_and_result", TOOL_ROUND, {"tools": [WEATHER_TOOL]}),
    ("tool_call_and_result_then_answer",
     TOOL_ROUND + [assistant("It is 18 °C in Paris."), user("And tomorrow?")], {"tools": [WEATHER_TOOL]}),
    ("tool_call_with_content",
     [user("Weather in Paris?"),
      assistant("Let me check.", tool_calls=[call("call12345", "get_weather", "{\"city\":\"Paris\",\"days\":2}")]),
      tool("sunny")], {"tools": [WEATHER_TOOL]}),
    ("tool_call_dict_arguments",
     [user("Find café prices"),
      assistant("", tool_calls=[call("abcDEF123", "search",
                                     {"query": "café \"prices\"", "limit": 3,
                                      "filters": {"a": [1, 2.5, True, None, 1e-7, 1e16, 123456789012345.6]}})]),
      tool("[]", "abcDEF123")], {"tools": [SEARCH_TOOL]}),
    ("tool_call_empty_arguments",
     [user("Search"), assistant("", tool_calls=[call("call12345", "search", "")]), tool("{}")],
     {"tools": [SEARCH_TOOL]}),
    ("parallel_tool_calls",
     [user("Weather in Paris and Rome?"),
      assistant("", tool_calls=[call("call00001", "get_weather", "{\"city\": \"Paris\"}"),
                                call("call00002", "get_weather", "{\"city\": \"Rome\"}")]),
      tool("{\"temp_c\": 18}", "call00001"), tool("{\"temp_c\": 25}", "call00002")],
     {"tools": [WEATHER_TOOL]}),
    ("tool_call_id_not_9_chars",
     [user("Weather?"), assistant("", tool_calls=[call("call_1", "get_weather", "{\"city\": \"Oslo\"}")]),
      tool("{}", "call_1")], {"tools": [WEATHER_TOOL]}),
    ("tool_result_id_not_9_chars",
     [user("Weather?"), assistant("", tool_calls=[call("call12345", "get_weather", "{\"city\": \"Oslo\"}")]),
      tool("{}", "call_1")], {"tools": [WEATHER_TOOL]}),
    ("two_user_messages_in_a_row", [user("a"), user("b")], {}),
    ("assistant_first", [assistant("Hi"), user("Hello")], {}),
    ("system_in_the_middle", [user("a"), assistant("b"), sys("new rules"), user("c")], {}),
    ("repeated_user_message_with_tools", [user("same"), assistant("x"), user("same")], {"tools": [SEARCH_TOOL]}),
    ("tools_without_user_message", [sys("s")], {"tools": [WEATHER_TOOL]}),
]

# DeepSeek: tool calls with null content (V3 renders calls only then), calls in two assistant
# messages (ns.is_first is never reset), several tool outputs, system messages anywhere, R1's
# </think> stripping.
DS_NULL_CALL = assistant(None, tool_calls=[call("call12345", "get_weather", "{\"city\": \"Paris\"}")])
DEEPSEEK_CASES = [
    ("null_content_tool_call", [sys("You are a weather bot."), user("Weather in Paris?"), DS_NULL_CALL],
     {"tools": [WEATHER_TOOL], "add_generation_prompt": False}),
    ("null_content_tool_call_result", [user("Weather in Paris?"), DS_NULL_CALL, tool("{\"temp_c\": 18}")],
     {"tools": [WEATHER_TOOL]}),
    ("null_content_tool_call_result_answer",
     [user("Weather in Paris?"), DS_NULL_CALL, tool("{\"temp_c\": 18}"), assistant("18 °C."), user("Rome?")],
     {"tools": [WEATHER_TOOL]}),
    ("null_content_parallel_calls",
     [user("Paris and Rome?"),
      assistant(None, tool_calls=[call("call00001", "get_weather", "{\"city\": \"Paris\"}"),
                                  call("call00002", "get_weather", "{\"city\":\"Rome\",\"days\":2}")]),
      tool("{\"temp_c\": 18}", "call00001"), tool("{\"temp_c\": 25}", "call00002")], {"tools": [WEATHER_TOOL]}),
    ("two_tool_rounds",
     [user("Paris?"), DS_NULL_CALL, tool("18"), assistant("18 °C."), user("Rome?"),
      assistant(None, tool_calls=[call("call00002", "get_weather", "{\"city\": \"Rome\"}")]), tool("25"),
      assistant("25 °C.")], {"tools": [WEATHER_TOOL], "add_generation_prompt": False}),
    ("null_content_without_calls", [user("x"), assistant(None)], {"add_generation_prompt": False}),
    ("tool_call_without_type",
     [user("x"), assistant(None, tool_calls=[{"id": "c", "function": {"name": "search", "arguments": "{}"}}])],
     {"add_generation_prompt": False}),
    ("tool_call_without_arguments",
     [user("x"), assistant(None, tool_calls=[{"id": "c", "type": "function", "function": {"name": "search"}}])],
     {"add_generation_prompt": False}),
    ("systems_anywhere", [sys("one"), user("a"), assistant("b"), sys("two"), user("c")], {}),
    ("think_stripped", [user("q"), assistant("<think>\nstep\n</think>\n\nanswer"), user("q2")], {}),
    ("think_stripped_twice", [user("q"), assistant("a</think>b</think>c")], {"add_generation_prompt": False}),
    ("reasoning_content_not_rendered", [user("q"), assistant("4", reasoning_content="sum"), user("q2")], {}),
    ("think_after_tool_output_kept",
     [user("q"), DS_NULL_CALL, tool("18"), assistant("<think>r</think>18 °C.")], {"add_generation_prompt": False}),
]

PER_KIND = {
    "deepseek-v2": DEEPSEEK_CASES,
    "deepseek-v3": DEEPSEEK_CASES,
    "deepseek-r1": DEEPSEEK_CASES,
    "llama3.1": [
        ("date_string", SPEC_81, {"date_string": "01 Jan 2025"}),
        ("tool_result_plain_text", [user("Weather?"), WEATHER_CALL, tool("It is sunny, 18 °C")],
         {"tools": [WEATHER_TOOL]}),
        ("ipython_role", [user("Run it"), WEATHER_CALL, {"role": "ipython", "content": "ok"}],
         {"tools": [WEATHER_TOOL]}),
    ],
    "mistral-v0.3": [
        ("system_with_tools_last_user", [sys("Be exact."), user("Hi"), assistant("Hello"), user("Weather?")],
         {"tools": [WEATHER_TOOL, SEARCH_TOOL]}),
        ("tool_results_role", [user("Weather?"), WEATHER_CALL, {"role": "tool_results", "content": "{\"t\": 1}",
                                                                 "tool_call_id": "call12345"}], {}),
    ],
    "qwen2.5": [
        ("consecutive_tool_messages_then_user",
         [user("x"), WEATHER_CALL, tool("1"), tool("2"), user("y")], {"tools": [WEATHER_TOOL]}),
    ],
    "qwen3": [
        ("enable_thinking_false", SPEC_81, {"enable_thinking": False}),
        ("enable_thinking_false_no_system", [user("Hi")], {"enable_thinking": False}),
        ("last_assistant_gets_empty_think", [user("Hi"), assistant("Hello")], {"add_generation_prompt": False}),
        ("reasoning_content_last", [user("2+2?"), assistant("4", reasoning_content="\nsimple sum\n")],
         {"add_generation_prompt": False}),
        ("reasoning_content_earlier_turn_dropped",
         [user("2+2?"), assistant("4", reasoning_content="sum"), user("3+3?")], {}),
        ("think_in_content_split",
         [user("q"), assistant("<think>\nstep one\n</think>\n\nanswer")], {"add_generation_prompt": False}),
        ("think_in_content_earlier_turn", [user("q"), assistant("<think>r</think>a"), user("q2")], {}),
        ("reasoning_content_empty_keeps_content",
         [user("q"), assistant("x</think>y", reasoning_content="")], {"add_generation_prompt": False}),
        ("multi_step_tool_with_reasoning",
         [user("Weather in Paris?"),
          assistant("", reasoning_content="Need the tool.",
                    tool_calls=[call("call12345", "get_weather", "{\"city\": \"Paris\"}")]),
          tool("{\"temp_c\": 18}")], {"tools": [WEATHER_TOOL]}),
        ("multi_step_tool_with_reasoning_answered",
         [user("Weather in Paris?"),
          assistant("", reasoning_content="Need the tool.",
                    tool_calls=[call("call12345", "get_weather", "{\"city\": \"Paris\"}")]),
          tool("{\"temp_c\": 18}"), assistant("18 °C.", reasoning_content="Got it.")],
         {"tools": [WEATHER_TOOL], "add_generation_prompt": False}),
        ("user_tool_response_wrapper_is_not_a_query",
         [user("Real question"), assistant("", reasoning_content="r1",
                                           tool_calls=[call("call12345", "search", "{\"query\": \"q\"}")]),
          user("<tool_response>\nresult\n</tool_response>"), assistant("done", reasoning_content="r2")],
         {"add_generation_prompt": False}),
        ("tool_call_string_arguments_scalar",
         [user("x"), assistant("", tool_calls=[call("call12345", "search", "\"just text\"")])],
         {"add_generation_prompt": False}),
    ],
}


def postprocess_like_vllm(messages):
    """vLLM's _postprocess_messages: tool-call arguments of assistant messages become objects."""
    messages = copy.deepcopy(messages)
    for m in messages:
        if m["role"] == "assistant" and isinstance(m.get("tool_calls"), list):
            for item in m["tool_calls"]:
                arguments = item["function"].get("arguments")
                if isinstance(arguments, str):
                    item["function"]["arguments"] = json.loads(arguments) if arguments else {}
                elif arguments is None:
                    item["function"]["arguments"] = {}
    return messages


def render(tok, kind, template, messages, options):
    kwargs = {"enable_thinking": options.get("enable_thinking", True)}
    if "date_string" in options:
        kwargs["date_string"] = options["date_string"]
    if kind not in DEEPSEEK:
        messages = postprocess_like_vllm(messages)
    return tok.apply_chat_template(messages, chat_template=template,
                                   tools=options.get("tools"), tokenize=False,
                                   add_generation_prompt=options.get("add_generation_prompt", True), **kwargs)


# tokenizer_config.json variants: what `tokenizer(text)` (add_special_tokens=True) gives when
# AutoTokenizer loads tokenizer.json with the family's config edited so. LlamaTokenizerFast
# (Mistral) rebuilds the post-processor from add_bos_token/add_eos_token; the other classes keep
# the file's (Llama 3's BOS, Qwen's nothing) whatever the flags say.
CONFIG_EDITS = [
    ("mistral", {}),
    ("mistral", {"add_bos_token": False}),
    ("mistral", {"add_eos_token": True}),
    ("mistral", {"add_bos_token": False, "add_eos_token": True}),
    ("mistral", {"add_bos_token": None}),
    ("mistral", {"tokenizer_class": "LlamaTokenizerFast", "add_eos_token": True, "add_bos_token": True}),
    ("mistral", {"add_bos_token": "__delete__", "add_eos_token": "__delete__"}),
    ("mistral_legacy", {"add_bos_token": False, "add_eos_token": True}),
    ("llama3", {"add_bos_token": False, "add_eos_token": True}),
    ("qwen2", {"add_eos_token": True}),
]
CONFIG_TEXTS = ["Hello world", "", "[INST] Hi[/INST]", " leading space", "<s>x</s>"]


def config_cases():
    cases = []
    for variant, edit in CONFIG_EDITS:
        family_dir = os.path.join(FAMILIES, variant)
        with open(os.path.join(family_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        for key, value in edit.items():
            if value == "__delete__":
                config.pop(key, None)
            else:
                config[key] = value
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(os.path.join(family_dir, "tokenizer.json"), d)
            with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(config, f)
            tok = AutoTokenizer.from_pretrained(d)
            ids = [tok(text)["input_ids"] for text in CONFIG_TEXTS]
        cases.append({"tokenizer": variant, "tokenizer_config": config, "class": type(tok).__name__,
                      "texts": CONFIG_TEXTS, "ids": ids})
    return cases


# Python semantics the renderers reproduce: json.dumps as transformers' tojson calls it, and
# str.strip() (Jinja's trim).
JSON_VALUES = [0.0, -0.0, 0.1, 1 / 3, 100.0, 1e15, 1e16, 123456789012345.6, 1234567890123456.7, 1e-4, 1e-5,
               2.5e-7, 1.5e300, -2.2250738585072014e-308, 5e-324, 1.7976931348623157e308, 0, -7,
               9007199254740993, "tab\tquote\"back\\slash\x01\x1f\x7f é 😀 \u2028", [], {}, [[]], {"a": {}},
               {"z": 1, "a": [1, 2.0, None, True, False], "m": {"k": "v"}}]
STRIP_TEXTS = ["  a b  ", "\t\n\x0b\x0c\r x \x1c\x1d\x1e\x1f", "\x85\xa0\u1680 y \u2000\u200a\u2028\u2029",
               "\u202f\u205f\u3000z\u3000", "\u200b keep zero-width \u200b", "\ufeffbom\ufeff", "", "   ",
               "é\u00a0"]


def python_cases():
    dumps = [{"value": v, "indent": indent, "text": json.dumps(v, ensure_ascii=False, indent=indent)}
             for v in JSON_VALUES for indent in (None, 4)]
    return {"json_dumps": dumps, "strip": [{"text": t, "stripped": t.strip()} for t in STRIP_TEXTS]}


def main():
    cases = []
    meta = {"transformers": transformers.__version__, "jinja2": jinja2.__version__,
            "tokenizers": tokenizers.__version__, "templates": {}}
    for kind, variant in KINDS.items():
        path = os.path.join(TEMPLATES, kind + ".jinja")
        with open(path, encoding="utf-8") as f:
            template = f.read()
        meta["templates"][kind] = {"file": kind + ".jinja", "sha256": hashlib.sha256(template.encode()).hexdigest(),
                                   "tokenizer": variant}
        family_dir = os.path.join(FAMILIES, variant)
        tok = AutoTokenizer.from_pretrained(family_dir)
        raw = tokenizers.Tokenizer.from_file(os.path.join(family_dir, "tokenizer.json"))
        for name, messages, options in COMMON + PER_KIND[kind]:
            full = {"add_generation_prompt": True, "enable_thinking": True, **options}
            case = {"template": kind, "tokenizer": variant, "name": name, "messages": messages, "options": full}
            try:
                text = render(tok, kind, template, messages, full)
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
            except TypeError as e:  # DeepSeek: None or a non-string concatenated to a string
                assert kind in DEEPSEEK, (kind, name, e)
                case["error"] = str(e)
            else:
                ids = raw.encode(text, add_special_tokens=False).ids
                # The same through the HF tokenizer class (what apply_chat_template(tokenize=True) does).
                assert tok(text, add_special_tokens=False)["input_ids"] == ids, (kind, name)
                case["text"] = text
                case["ids"] = ids
            cases.append(case)
    # One case per line, so that a regenerated file diffs case by case.
    with open(OUT, "w", encoding="utf-8") as f:
        f.write('{"meta": ' + json.dumps(meta, ensure_ascii=False) + ',\n"cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write('\n],\n"tokenizer_config_cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in config_cases()))
        f.write('\n],\n"python": ' + json.dumps(python_cases(), ensure_ascii=False) + "}\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"{len(cases)} cases ({errors} errors) -> {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
