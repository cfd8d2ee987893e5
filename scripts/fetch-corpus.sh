#!/usr/bin/env bash
# Downloads Debian's librocrand1 and librocsparse0 (once) into
# ${CARGO_TARGET_DIR:-target}/corpus and prints the two library paths.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${CARGO_TARGET_DIR:-target}/corpus"
mkdir -p "$cache"
fetch() { # package path
  local package=$1 path=$2
  if [ ! -f "$cache/$path" ]; then
    (cd "$cache" && apt-get download "$package" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get download "$package" >/dev/null; })
    dpkg-deb --fsys-tarfile "$cache/${package}"_*.deb | tar -x -C "$cache" ".$path"
    rm -f "$cache/${package}"_*.deb
  fi
  echo "$cache/$path"
}
fetch librocrand1 /usr/lib/x86_64-linux-gnu/librocrand.so.1.1
fetch librocsparse0 /usr/lib/x86_64-linux-gnu/librocsparse.so.0.1
