#!/usr/bin/env bash
# Set up, build and run the whole test suite (this is what .ci/run calls).
#   bash scripts/test.sh              Release build in build/
#   bash scripts/test.sh --sanitize   the same suite built with AddressSanitizer and
#                                     UndefinedBehaviorSanitizer in build-sanitize/ (slower)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
if [ "${1:-}" = "--sanitize" ]; then
  bash scripts/setup.sh
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=ON \
    -DTESSERA_BUILD_BENCH=OFF -DMPIEXEC_EXECUTABLE="$PWD/scripts/sanitize/mpiexec" >/dev/null
  cmake --build build-sanitize -j"$jobs"
  # Any report fails the test that printed it. Leaks inside Open MPI's own libraries are
  # suppressed (scripts/lsan.supp says which and why; MPI ranks start through
  # scripts/sanitize/mpirun so that the suppressions can see them); everything of ours is checked.
  export PATH="$PWD/scripts/sanitize:$PATH"
  export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=0"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
  cd build-sanitize
  ctest --output-on-failure -j"$jobs" --timeout 1800
  exit
fi
bash scripts/build.sh
bash scripts/fuzz.sh --build-only  # the libFuzzer targets the suite runs for 25-45 s each (clang)
cd build
ctest --output-on-failure -j"$jobs" --timeout 900
