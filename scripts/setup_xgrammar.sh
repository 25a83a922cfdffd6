#!/usr/bin/env bash
# Builds xgrammar's C++ core (JSON schema / EBNF / regex -> grammar -> per-token vocabulary
# bitmask) as a plain static library. It uses the PyPI sdist of the pinned version, with none of
# its Python or TVM-FFI bindings.
#
#   scripts/setup_xgrammar.sh [CACHE_DIR]      (default CACHE_DIR: <repo>/build-deps)
#
# Result (the last line printed says where):
#   CACHE_DIR/xgrammar-0.2.9/include/{xgrammar/*.h,dlpack/dlpack.h}
#   CACHE_DIR/xgrammar-0.2.9/lib/libxgrammar.a          (-O2, PIC, no LTO, C++17 ABI)
#   CACHE_DIR/xgrammar-0.2.9/lib/pkgconfig/xgrammar.pc
#   CACHE_DIR/xgrammar-0.2.9/share/licenses/xgrammar/   (Apache-2.0 LICENSE + NOTICE, dlpack
#                                                        Apache-2.0, picojson BSD-2-Clause)
# Consumers need -I<prefix>/include and <prefix>/lib/libxgrammar.a (plus -pthread). No defines.
#
# The script is idempotent: it returns at once when a build of the same version, hash and flags is
# already there. It needs g++ and cmake (ninja if present), and, to download, python3 with venv
# (Debian packages g++ cmake python3-venv); as root it apt-installs whichever of these is missing.
# The sdist is fetched with pip from PyPI, run from a throwaway venv (CACHE_DIR/.pip-venv). pip
# checks its sha256 (--require-hashes), and so does this script; the tarball stays in CACHE_DIR/dl.
# Env: XGR_JOBS (build jobs, default nproc), CXX (compiler, default g++).
set -euo pipefail

XGR_VERSION=0.2.9
XGR_SHA256=87b466bca2475e29bb0323abc62c6c33cbcbcff47e5fb800a3e2099ac9620b90
XGR_CXXFLAGS_RELEASE="-O2 -DNDEBUG"

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${1:-$repo/build-deps}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
prefix=$cache/xgrammar-$XGR_VERSION
stamp_file=$prefix/.setup_xgrammar.stamp
stamp="xgrammar=$XGR_VERSION sha256=$XGR_SHA256 cxx=$(${CXX:-g++} -dumpfullversion 2>/dev/null || echo none) flags=$XGR_CXXFLAGS_RELEASE -fno-lto v1"
log=$cache/xgrammar-$XGR_VERSION.log

say() { echo "setup_xgrammar: $*" >&2; }
die() { say "error: $*"; exit 1; }

exec 9>"$cache/.setup_xgrammar.lock"
flock 9  # one build at a time per cache dir
if [ -f "$stamp_file" ] && [ -f "$prefix/lib/libxgrammar.a" ] && [ "$(cat "$stamp_file")" = "$stamp" ]; then
  echo "setup_xgrammar: xgrammar $XGR_VERSION up to date: $prefix (lib/libxgrammar.a, include/)"
  exit 0
fi
: >"$log"

# ---- tools (Debian 12 packages) ----
apt_install() {
  [ "$(id -u)" -eq 0 ] || die "missing packages: $* (apt-get install $*)"
  say "installing $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
need=()
command -v "${CXX:-g++}" >/dev/null || need+=(g++)
command -v cmake >/dev/null || need+=(cmake)
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"

# ---- (a) fetch the pinned sdist with pip (scripts/pypi_sdist.sh) ----
# shellcheck source=scripts/pypi_sdist.sh
. "$repo/scripts/pypi_sdist.sh"
tarball=$(fetch_pypi_sdist xgrammar "$XGR_VERSION" "$XGR_SHA256" "$cache" "$log") || die "could not fetch the sdist"

# ---- (b) extract ----
work=$cache/.xgrammar-$XGR_VERSION.work
rm -rf "$work"
mkdir -p "$work"
tar -xzf "$tarball" -C "$work"
src=$work/xgrammar-$XGR_VERSION
[ -f "$src/CMakeLists.txt" ] && [ -f "$src/include/xgrammar/xgrammar.h" ] || die "unexpected sdist layout"

# ---- (c) build the static core library (upstream target 'xgrammar': cpp/**/*.cc without
#          cpp/tvm_ffi/) ----
build=$work/build
mkdir -p "$build"
# Upstream's cmake/config.cmake sets XGRAMMAR_BUILD_PYTHON_BINDINGS=ON as a plain variable, which
# beats -D...=OFF; a config.cmake in the build dir is read instead of it.
cat > "$build/config.cmake" <<'EOF'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
set(XGRAMMAR_ENABLE_COVERAGE OFF)
set(XGRAMMAR_ENABLE_INTERNAL_CHECK OFF)
EOF
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
jobs=${XGR_JOBS:-$(nproc)}
stage=$work/prefix
say "building libxgrammar.a (-j$jobs; log: $log)"
# Upstream prepends -O3 -flto=auto -Werror; the flags given here come after and win: no LTO (plain
# objects that any g++ or ld links), warnings not errors, -O2. The prefix map keeps the build
# path out of the file:line in error messages.
if ! {
  cmake -S "$src" -B "$build" "${gen[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS="-fno-lto -Wno-error -ffile-prefix-map=$src/=xgrammar-$XGR_VERSION/" \
    -DCMAKE_CXX_FLAGS_RELEASE="$XGR_CXXFLAGS_RELEASE" \
    -DCMAKE_INSTALL_PREFIX="$stage" &&
  cmake --build "$build" --target xgrammar -j "$jobs" &&
  cmake --install "$build"
} >>"$log" 2>&1; then
  tail -n 40 "$log" >&2
  die "build failed (log: $log)"
fi

lic=$stage/share/licenses/xgrammar
mkdir -p "$lic" "$stage/lib/pkgconfig"
cp "$src/LICENSE" "$lic/LICENSE"
cp "$src/NOTICE" "$lic/NOTICE"
cp "$src/3rdparty/dlpack/LICENSE" "$lic/LICENSE.dlpack"
sed -n '1,/\*\//p' "$src/3rdparty/picojson/picojson.h" > "$lic/LICENSE.picojson"
cp "$src/PKG-INFO" "$lic/PKG-INFO"
cat > "$stage/lib/pkgconfig/xgrammar.pc" <<EOF
prefix=$prefix
Name: xgrammar
Description: xgrammar $XGR_VERSION C++ core (static, no Python bindings)
Version: $XGR_VERSION
Cflags: -I\${prefix}/include
Libs: \${prefix}/lib/libxgrammar.a -pthread
EOF
echo "$stamp" > "$stage/.setup_xgrammar.stamp"

rm -rf "$prefix"
mv "$stage" "$prefix"
rm -rf "$work"
echo "setup_xgrammar: built xgrammar $XGR_VERSION: $prefix (lib/libxgrammar.a, include/)"
