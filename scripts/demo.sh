#!/usr/bin/env bash
# Set up, build, and run the main job on the built-in models.
#
# The built-in models (models/, tools/train_tiny_models.py) were trained from scratch on the
# Python standard library sources: a 9 M-parameter gpt-oss-architecture model (8 MXFP4 experts,
# sliding/full attention with sinks, YaRN), its 4 M-parameter Llama twin and a 6 M-parameter
# DeepSeek-V3-architecture model (MLA, shared-expert MoE, FP8 block weights). They are tiny: they
# complete Python code plausibly, not correctly, and know nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh --target tessera_cli
tessera=build/tessera
oss=models/tiny-gpt-oss
llama=models/tiny-llama
deepseek=models/tiny-deepseek

"$tessera" info
"$tessera" inspect -m "$oss"
printf 'def greet(name):\n    return f"Hello, {name}!"\n' | "$tessera" tokenize -m "$oss"
echo
# Raw completion (the models never saw a chat format): the continuation streams to stdout and
# the prefill / decode speeds (tokens per second) follow on stderr.
prompt=$'class Stack:\n    """A last-in, first-out stack."""\n\n    def __init__(self):\n'
echo "== $oss (gpt-oss architecture, MXFP4 experts), completing:"
printf '%s' "$prompt"
"$tessera" generate -m "$oss" --raw -p "$prompt" -n 96 --seed 42 --temp 0.7 --top-p 0.95
echo
echo "== $llama (Llama architecture), the same prompt:"
"$tessera" generate -m "$llama" --raw -p "$prompt" -n 96 --seed 42 --temp 0.7 --top-p 0.95
echo
echo "== $deepseek (DeepSeek-V3 architecture: MLA with a latent KV cache, FP8 block weights), the same prompt:"
"$tessera" generate -m "$deepseek" --raw -p "$prompt" -n 96 --seed 42 --temp 0.7 --top-p 0.95
echo
# How good they are: perplexity on held-out standard library files they were not trained on.
"$tessera" perplexity -m "$oss" -f tests/data/trained/heldout_sample.txt -c 256
"$tessera" perplexity -m "$deepseek" -f tests/data/trained/heldout_sample.txt -c 256
