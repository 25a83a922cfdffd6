#!/usr/bin/env bash
# Installs the Debian 12 packages tessera needs to build and test, if any are missing.
# Idempotent; needs root (or sudo) only when something must be installed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libzstd-dev nlohmann-json3-dev libcli11-dev libsimdjson-dev
  libicu-dev                  # tokenizer NFC normalizer (Qwen) and Unicode properties
  zstd
  openmpi-bin libopenmpi-dev  # parallel/: tensor parallelism over MPI (mpirun in the tests)
  iproute2                    # network namespaces for the multi-host MPI tests and benchmarks
  libcpp-httplib-dev curl     # tessera serve (HTTP) and its tests
  procps                      # pgrep (the --tp serve test signals mpirun itself)
  python3-venv chromium       # the serve tests: the openai client venv, the chat page in headless Chromium
  clang libclang-rt-14-dev    # scripts/fuzz.sh: the request path under libFuzzer
  patch                       # scripts/setup_jinja.sh patches the Jinja engine it extracts
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The grammar engine of structured outputs (not in Debian): xgrammar's C++ core from its pinned
# PyPI sdist, built once into build-deps/ (about 2 minutes). Without PyPI the build goes on
# without structured outputs.
bash "$(dirname "$0")/setup_xgrammar.sh" ||
  echo "setup: warning: xgrammar could not be built; structured outputs are disabled in this build" >&2

# The chat-template engine (not in Debian): llama.cpp's C++ Jinja engine from the pinned
# llama-cpp-python sdist, extracted into build-deps/ and compiled with tessera (required).
bash "$(dirname "$0")/setup_jinja.sh"
