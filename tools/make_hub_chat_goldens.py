#!/usr/bin/env python3
"""Writes tests/data/chat_templates/hub_goldens.json: the Hub chat templates that llama.cpp keeps
for its own tests (vendor/llama.cpp/models/templates/*.jinja in the pinned llama-cpp-python 0.3.36
sdist, which scripts/setup_jinja.sh extracts into build-deps/llama-jinja-0.3.36/templates), plus
tessera's ChatML, each rendered over the conversations of make_chat_goldens.py by transformers'
own renderer (transformers.utils.chat_template_utils.render_jinja_template, which
apply_chat_template calls: its sandboxed jinja2 environment with trim_blocks, lstrip_blocks,
raise_exception, strftime_now and its tojson).

What each template sees is what apply_chat_template passes: the messages (tool-call arguments
json.loads-ed as vLLM does), tools, add_generation_prompt, enable_thinking, date_string when the
case gives one, and bos_token / eos_token (the values in TOKENS: the special tokens of the model
each template comes from; a template not listed gets "<s>" / "</s>"). strftime_now reads a clock
frozen at 2026-01-01 00:00:00 (meta "now", the Unix time the C++ test renders with, in UTC).
A template that raises records the message ("error"). tests/hub_chat_template_test.cpp renders
every case through tessera and compares byte for byte.

Output: {"meta": {"transformers", "jinja2", "sdist", "templates": {name: {"sha256", "bos_token",
"eos_token"}}, "chatml": text}, "cases": [{"template", "name", "messages", "options", "text" |
"error"}]}.

Run: tools/.venv/bin/python tools/make_hub_chat_goldens.py   (transformers 4.57.1, jinja2 3.1.6)
"""
import copy
import hashlib
import json
import os
import sys

import datetime as dt

import jinja2
import transformers
import transformers.utils.chat_template_utils as chat_template_utils
from transformers.utils.chat_template_utils import render_jinja_template

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_chat_goldens as base  # noqa: E402  (the conversations and vLLM's argument rule)

assert transformers.__version__ == "4.57.1", transformers.__version__
assert jinja2.__version__ == "3.1.6", jinja2.__version__

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HUB = os.path.join(ROOT, "build-deps", "llama-jinja-0.3.36", "templates")
OUT = os.path.join(ROOT, "tests", "data", "chat_templates", "hub_goldens.json")

NOW = 1767225600  # 2026-01-01T00:00:00Z


class FrozenClock(dt.datetime):
    """transformers' strftime_now calls datetime.now(): the clock of every rendering."""

    @classmethod
    def now(cls, tz=None):
        return dt.datetime.fromtimestamp(NOW, dt.timezone.utc).replace(tzinfo=None)


chat_template_utils.datetime = FrozenClock

# src/engine/chat_template.cpp kChatMl, the template a model without one gets.
CHATML = ("{%- for message in messages %}"
          "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
          "{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")

# bos_token / eos_token of the models the templates come from (their tokenizer_config.json).
TOKENS = {
    "meta-llama-Llama-3.1-8B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.3-70B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "google-gemma-2-2b-it": ("<bos>", "<eos>"),
    "google-gemma-4-31B-it": ("<bos>", "<eos>"),
    "google-gemma-4-31B-it-interleaved": ("<bos>", "<eos>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "HuggingFaceTB-SmolLM3-3B": ("", "<|im_end|>"),
    "GLM-4.6": ("", "<|endoftext|>"),
    "GLM-4.7-Flash": ("", "<|endoftext|>"),
    "Qwen3.5-4B": ("", "<|im_end|>"),
    "Qwen-Qwen3-0.6B": ("", "<|im_end|>"),
    "Qwen-Qwen2.5-7B-Instruct": ("", "<|im_end|>"),
    "Qwen-QwQ-32B": ("", "<|im_end|>"),
    "Qwen3-Coder": ("", "<|im_end|>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek-ai-DeepSeek-V3.1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "openai-gpt-oss-120b": ("<|startoftext|>", "<|return|>"),
}


def render(template, messages, options, bos, eos):
    kwargs = {"enable_thinking": options.get("enable_thinking", True), "bos_token": bos, "eos_token": eos}
    if "date_string" in options:
        kwargs["date_string"] = options["date_string"]
    rendered, _ = render_jinja_template(
        conversations=[base.postprocess_like_vllm(messages)], tools=options.get("tools"), chat_template=template,
        add_generation_prompt=options.get("add_generation_prompt", True), **kwargs)
    return rendered[0]


def main():
    templates = {"chatml": CHATML}
    for name in sorted(os.listdir(HUB)):
        if name.endswith(".jinja"):
            with open(os.path.join(HUB, name), encoding="utf-8") as f:
                templates[name[:-len(".jinja")]] = f.read()
    meta = {"transformers": transformers.__version__, "jinja2": jinja2.__version__,
            "sdist": "llama-cpp-python 0.3.36", "chatml": CHATML, "now": NOW, "templates": {}}
    cases = []
    for name, text in templates.items():
        bos, eos = TOKENS.get(name, ("<s>", "</s>"))
        meta["templates"][name] = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "bos_token": bos,
                                   "eos_token": eos}
        for case_name, messages, options in base.COMMON:
            options = {"add_generation_prompt": True, "enable_thinking": True, **options}
            case = {"template": name, "name": case_name, "messages": copy.deepcopy(messages), "options": options}
            try:
                first = render(text, messages, options, bos, eos)
                if first != render(text, messages, options, bos, eos):
                    continue  # not deterministic
                case["text"] = first
            except Exception as e:  # noqa: BLE001  (jinja2 errors and the templates' raise_exception)
                case["error"] = str(e).split("\n")[0]
                case["error_type"] = type(e).__name__
            cases.append(case)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "cases": cases}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    rendered = sum("text" in c for c in cases)
    print("wrote %s: %d templates, %d cases (%d rendered, %d errors)" % (OUT, len(templates), len(cases), rendered,
                                                                        len(cases) - rendered))


if __name__ == "__main__":
    main()
