#!/usr/bin/env bash
# The request path's fuzz target (tests/fuzz/request_fuzzer.cpp) under clang's libFuzzer with
# AddressSanitizer and UndefinedBehaviorSanitizer, built in build-fuzz/ (the library is
# instrumented too, so the run is coverage-guided through the parser, routes and renderers).
#   bash scripts/fuzz.sh [SECONDS]          build, then fuzz for SECONDS (default 60)
#   bash scripts/fuzz.sh --build-only       build only (scripts/test.sh does this before the suite)
#   bash scripts/fuzz.sh --run-only SECONDS run the built target (the suite's test); skips with a
#                                           message when it was not built (no clang)
# The run starts from tests/fuzz/corpus and keeps what it learns in build-fuzz/corpus; a crash
# leaves its input in build-fuzz/crash-* (add it to tests/fuzz/corpus once fixed). Longer runs:
#   bash scripts/fuzz.sh 3600
set -euo pipefail
cd "$(dirname "$0")/.."
mode=all
case "${1:-}" in
  --build-only) mode=build ;;
  --run-only) mode=run; shift ;;
esac
seconds=${1:-60}
bin=build-fuzz/request_fuzzer
if [ "$mode" != run ]; then
  if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    echo "fuzz: SKIP: clang++ with libFuzzer is not installed (Debian: clang libclang-rt-14-dev)"
    exit 0
  fi
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g" \
    -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF >/dev/null
  cmake --build build-fuzz --target request_fuzzer -j"$(nproc 2>/dev/null || echo 2)"
  [ "$mode" = build ] && exit 0
fi
[ -x "$bin" ] || { echo "fuzz: SKIP: $bin is not built (bash scripts/fuzz.sh --build-only)"; exit 0; }
mkdir -p build-fuzz/corpus
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# -rss_limit_mb: the model and engine are loaded once; the limit catches a runaway allocation.
"$bin" -seed=27 -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix=build-fuzz/ build-fuzz/corpus tests/fuzz/corpus 2>&1 | tail -n 25
