#!/usr/bin/env bash
# Puts llama.cpp's C++ Jinja engine (common/jinja: lexer, parser, runtime, values, caps; MIT) and
# the two small common/ files it needs (json.{h,cpp}, a wrapper over nlohmann::json, and
# unicode.{h,cpp}) where CMake compiles them into tessera, with tessera's own flags and sanitizers.
# They come from the pinned PyPI sdist of llama-cpp-python, which vendors llama.cpp; it is the
# engine llama-server renders every GGUF chat template with. Debian has no C++ Jinja engine.
# The chat templates that llama.cpp keeps for its own tests (models/templates/*.jinja, the Hub
# files of ~70 models) are extracted beside them for tessera's template tests.
#
#   scripts/setup_jinja.sh [CACHE_DIR]      (default CACHE_DIR: <repo>/build-deps)
#
# Result:
#   CACHE_DIR/llama-jinja-0.3.36/src/{jinja/*, json.h, json.cpp, unicode.h, unicode.cpp, ggml.h}
#   CACHE_DIR/llama-jinja-0.3.36/templates/*.jinja
#   CACHE_DIR/llama-jinja-0.3.36/LICENSE                (llama.cpp's MIT licence)
# ggml.h is ours: json.cpp includes it only for GGML_ASSERT. The patches scripts/patches/llama-jinja-*.patch
# are applied in name order: -checked-ast (a malformed template's wrong node kind is an exception,
# not an assert that aborts: found by the chat_template fuzzer) and -python-compat (floats print as
# Python's repr in str() and json.dumps, strip/trim remove Python's whitespace and length counts
# code points, which is what transformers renders).
#
# Idempotent: returns at once when the same version, hash and patch are already in place. The
# sdist is fetched with pip (--require-hashes) and checked again here; it stays in CACHE_DIR/dl.
set -euo pipefail

LCP_VERSION=0.3.36
LCP_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${1:-$repo/build-deps}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
prefix=$cache/llama-jinja-$LCP_VERSION
patches=("$repo"/scripts/patches/llama-jinja-*.patch)
stamp="llama-cpp-python=$LCP_VERSION sha256=$LCP_SHA256 patches=$(cat "${patches[@]}" | sha256sum | cut -d' ' -f1) v2"
log=$cache/llama-jinja-$LCP_VERSION.log

say() { echo "setup_jinja: $*" >&2; }
die() { say "error: $*"; exit 1; }
# shellcheck source=scripts/pypi_sdist.sh
. "$repo/scripts/pypi_sdist.sh"

exec 9>"$cache/.setup_jinja.lock"
flock 9
if [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$stamp" ]; then
  echo "setup_jinja: llama.cpp's Jinja engine ($LCP_VERSION) up to date: $prefix"
  exit 0
fi
: >"$log"
command -v patch >/dev/null || die "missing package: patch (apt-get install patch)"

tarball=$(fetch_pypi_sdist llama-cpp-python "$LCP_VERSION" "$LCP_SHA256" "$cache" "$log") || exit 1

work=$cache/.llama-jinja-$LCP_VERSION.work
rm -rf "$work"
mkdir -p "$work"
top=llama_cpp_python-$LCP_VERSION/vendor/llama.cpp
tar -xzf "$tarball" -C "$work" "$top/LICENSE" "$top/common/jinja" "$top/common/json.h" "$top/common/json.cpp" \
  "$top/common/unicode.h" "$top/common/unicode.cpp" "$top/models/templates" >>"$log" 2>&1 ||
  die "unexpected sdist layout (log: $log)"
stage=$work/stage
mkdir -p "$stage/src" "$stage/templates"
cp -r "$work/$top/common/jinja" "$stage/src/jinja"
rm -f "$stage/src/jinja/README.md"
cp "$work/$top/common/"{json.h,json.cpp,unicode.h,unicode.cpp} "$stage/src/"
cp "$work/$top/models/templates/"*.jinja "$stage/templates/"
cp "$work/$top/LICENSE" "$stage/LICENSE"
cat > "$stage/src/ggml.h" <<'EOF'
// tessera: json.cpp includes ggml.h only for GGML_ASSERT (nlohmann's JSON_ASSERT).
#pragma once
#include <cstdlib>
#define GGML_ASSERT(x) do { if (!(x)) std::abort(); } while (0)
EOF
for patch_file in "${patches[@]}"; do
  (cd "$stage/src" && patch -p1 --no-backup-if-mismatch <"$patch_file" >>"$log" 2>&1) ||
    die "$(basename "$patch_file") did not apply (log: $log)"
done
echo "$stamp" > "$stage/.stamp"
rm -rf "$prefix"
mv "$stage" "$prefix"
rm -rf "$work"
echo "setup_jinja: llama.cpp's Jinja engine ($LCP_VERSION): $prefix"
