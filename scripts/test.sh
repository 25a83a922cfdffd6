#!/usr/bin/env bash
# Set up, build and run the whole test suite (this is what .ci/run calls).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
cd build
ctest --output-on-failure -j"$jobs" --timeout 900
