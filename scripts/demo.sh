#!/usr/bin/env bash
# Set up, build, and run the main job on the built-in demo model.
#
# The demo model is a tiny *synthetic* gpt-oss (deterministic random weights, real o200k_harmony
# tokenizer): it exercises every code path of the real model, but its text is not meaningful.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh --target tessera_cli
demo_dir=build/demo/gpt-oss-tiny
tessera=build/tessera

"$tessera" info
if [ ! -f "$demo_dir/config.json" ]; then
  "$tessera" synth --preset tiny --out "$demo_dir" --seed 1
fi
"$tessera" inspect -m "$demo_dir"
echo "Hello from tessera! Tokenizing a sentence: 1+1=2, ¿qué tal? 你好 👋🏽" | "$tessera" tokenize -m "$demo_dir"
echo
# Generation: the prompt becomes a harmony user turn; the final channel streams to stdout and
# the prefill / decode speeds (tokens per second) follow on stderr.
"$tessera" generate -m "$demo_dir" -p "Write a haiku about CPUs." -n 48 --seed 42 --show-analysis
