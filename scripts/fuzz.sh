#!/usr/bin/env bash
# The fuzz targets of tests/fuzz/ (one per parser: the HTTP request path, GGUF, safetensors,
# config.json, tokenizers, chat templates, JSON schemas) under clang's libFuzzer with AddressSanitizer and
# UndefinedBehaviorSanitizer, built in build-fuzz/ (the library is instrumented too, so each run
# is coverage-guided through the code under test).
#   bash scripts/fuzz.sh [SECONDS]                     build, then fuzz each target for SECONDS (default 60)
#   bash scripts/fuzz.sh --build-only                  build only (scripts/test.sh does this before the suite)
#   bash scripts/fuzz.sh --run-only SECONDS [TARGET...] run built targets (all by default; the suite's
#                                                      fuzz.<target>_libfuzzer tests); skips with a message
#                                                      when a target was not built (no clang)
#   bash scripts/fuzz.sh --list                        the target names
# Each run starts from tests/fuzz/corpus/<target> and keeps what it learns in
# build-fuzz/<target>/corpus; a crash leaves its input in build-fuzz/<target>/crash-* (also
# leak-*, timeout-*, oom-*): once fixed, add it to tests/fuzz/corpus/<target>. Every run ends with
# one line per target, the figures docs/ROBUSTNESS.md records:
#   fuzz: gguf: 1234567 executions in 900 s, corpus 812 units, 0 crashes (cov 2345, ft 6789, peak 210 MB)
# Longer runs: bash scripts/fuzz.sh 900   (or --run-only 3600 gguf)
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(request gguf safetensors config tokenizer chat_template schema)  # CMakeLists.txt's TESSERA_FUZZ_TARGETS
mode=all
case "${1:-}" in
  --build-only) mode=build ;;
  --run-only) mode=run; shift ;;
  --list) printf '%s\n' "${targets[@]}"; exit 0 ;;
esac
seconds=${1:-60}
if [ $# -gt 0 ]; then shift; fi
if [ "$mode" = run ] && [ $# -gt 0 ]; then
  for t in "$@"; do
    [[ " ${targets[*]} " == *" $t "* ]] || { echo "fuzz: unknown target '$t' (--list names them)"; exit 2; }
  done
  targets=("$@")
fi
if [ "$mode" != run ]; then
  if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    echo "fuzz: SKIP: clang++ with libFuzzer is not installed (Debian: clang libclang-rt-14-dev)"
    exit 0
  fi
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g" \
    -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF >/dev/null
  cmake --build build-fuzz --target "${targets[@]/%/_fuzzer}" -j"$(nproc 2>/dev/null || echo 2)"
  [ "$mode" = build ] && exit 0
fi

export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
findings() { find "$1" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l; }
failed=0
for t in "${targets[@]}"; do
  bin=build-fuzz/${t}_fuzzer
  [ -x "$bin" ] || { echo "fuzz: SKIP: $bin is not built (bash scripts/fuzz.sh --build-only)"; continue; }
  out=build-fuzz/$t
  mkdir -p "$out/corpus"
  # Per target: the longest input worth mutating, the memory ceiling (a runaway allocation is an
  # oom-* finding) and leak checking. The request target loads a model and starts the batch
  # engine's threads once; its long-lived state is not a leak to report, so it runs without.
  max_len=16384 rss=2048 leaks=1
  case $t in
    request) max_len=65536 rss=4096 leaks=0 ;;
    gguf | tokenizer) max_len=65536 ;;
  esac
  before=$(findings "$out")
  start=$SECONDS
  rc=0
  ASAN_OPTIONS="abort_on_error=1:detect_leaks=$leaks" \
    "$bin" -seed=27 -max_total_time="$seconds" -timeout=20 -rss_limit_mb=$rss -max_len=$max_len -detect_leaks=$leaks \
    -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" "tests/fuzz/corpus/$t" >"$out/last-run.log" 2>&1 || rc=$?
  elapsed=$((SECONDS - start))
  after=$(findings "$out")
  # libFuzzer's last status line ("#N DONE cov: C ft: F corp: U/S ...") and its final stats.
  status=$(grep -E '^#[0-9]+' "$out/last-run.log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/last-run.log" | tail -n 1)
  [ -n "$execs" ] || execs=$(sed -E -n 's/^#([0-9]+).*/\1/p' <<<"$status")
  corpus=$(sed -E -n 's/.* corp: ([0-9]+).*/\1/p' <<<"$status")
  cov=$(sed -E -n 's/.* cov: ([0-9]+).*/\1/p' <<<"$status")
  ft=$(sed -E -n 's/.* ft: ([0-9]+).*/\1/p' <<<"$status")
  peak=$(sed -n 's/^stat::peak_rss_mb: *//p' "$out/last-run.log" | tail -n 1)
  crashes=$((after - before))
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi  # a crash libFuzzer could not save
  echo "fuzz: $t: ${execs:-0} executions in $elapsed s, corpus ${corpus:-0} units, $crashes crashes" \
       "(cov ${cov:-?}, ft ${ft:-?}, peak ${peak:-?} MB)"
  if [ "$rc" -ne 0 ]; then
    failed=1
    tail -n 40 "$out/last-run.log"
    echo "fuzz: $t: FAILED (exit $rc; the input is in $out/, the whole log in $out/last-run.log)"
  fi
done
exit $failed
