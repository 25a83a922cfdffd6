# Sourced by the setup scripts: fetch_pypi_sdist NAME VERSION SHA256 CACHE_DIR LOG
# Downloads the sdist of NAME==VERSION from PyPI into CACHE_DIR/dl (pip --require-hashes, run from
# a throwaway venv CACHE_DIR/.pip-venv, removed afterwards), checks its sha256 again and prints its
# path. A tarball already there with the right hash is used as is. Needs python3 with venv
# (Debian: python3-venv, apt-installed when running as root and missing).
fetch_pypi_sdist() {
  local name=$1 version=$2 sha=$3 cache=$4 log=$5
  local file_name=${name//-/_}
  local tarball=$cache/dl/$file_name-$version.tar.gz
  local sha_now
  sha_now() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$sha" ]; }
  if sha_now "$tarball"; then
    echo "$tarball"
    return 0
  fi
  # older pip versions keep the dashes of the project name in the file name
  [ -f "$cache/dl/$name-$version.tar.gz" ] && sha_now "$cache/dl/$name-$version.tar.gz" &&
    { echo "$cache/dl/$name-$version.tar.gz"; return 0; }
  rm -f "$tarball"
  local venv=$cache/.pip-venv
  if [ ! -x "$venv/bin/pip" ]; then
    rm -rf "$venv"
    if ! python3 -m venv "$venv" >>"$log" 2>&1; then
      rm -rf "$venv"
      if [ "$(id -u)" -ne 0 ]; then
        echo "error: python3 -m venv failed; install python3-venv" >&2
        return 1
      fi
      DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
      python3 -m venv "$venv" >>"$log" 2>&1 || { echo "error: python3 -m venv failed (log: $log)" >&2; return 1; }
    fi
  fi
  mkdir -p "$cache/dl"
  local req=$cache/dl/$name-$version.req.txt
  echo "$name==$version --hash=sha256:$sha" > "$req"
  echo "downloading $name==$version sdist from PyPI" >&2
  # --no-binary only for NAME: its build requirements, which pip needs to read the metadata, come
  # as wheels (building them from source takes minutes).
  if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" download --no-deps \
      --no-binary "$name" --require-hashes -r "$req" -d "$cache/dl" >>"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "error: pip download of $name==$version failed (log: $log)" >&2
    return 1
  fi
  rm -rf "$venv"
  local got
  for got in "$tarball" "$cache/dl/$name-$version.tar.gz"; do
    if sha_now "$got"; then
      echo "$got"
      return 0
    fi
  done
  echo "error: sha256 mismatch for the $name $version sdist (want $sha)" >&2
  return 1
}
