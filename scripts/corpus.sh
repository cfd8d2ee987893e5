#!/usr/bin/env bash
# Round-trips the whole production corpus (Debian's rocRAND and rocSPARSE,
# every gfx90a and gfx908 code object) and prints the numbers. The test
# suite checks rocRAND fully and a sample of rocSPARSE; this is the full run
# (about 100 MB of downloads, 1.3 GB extracted, a few minutes on 2 cores).
# Usage: scripts/corpus.sh [--json]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh >/dev/null
cargo build --release -q -p gpuinstr-driver
target_dir="${CARGO_TARGET_DIR:-target}"
link="$target_dir/release/gpuinstr-link"
cache="$target_dir/corpus"
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
rocrand=$(fetch librocrand1 /usr/lib/x86_64-linux-gnu/librocrand.so.1.1)
rocsparse=$(fetch librocsparse0 /usr/lib/x86_64-linux-gnu/librocsparse.so.0.1)

status=0
for target in gfx90a gfx908; do
  echo "== $target: rocRAND and rocSPARSE"
  "$link" roundtrip-corpus "$rocrand" "$rocsparse" --target "$target" "$@" || status=1
done
exit $status
