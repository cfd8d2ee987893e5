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
libraries=$(scripts/fetch-corpus.sh)
rocrand=$(echo "$libraries" | sed -n 1p)
rocsparse=$(echo "$libraries" | sed -n 2p)

status=0
for target in gfx90a gfx908; do
  echo "== $target: rocRAND and rocSPARSE"
  "$link" roundtrip-corpus "$rocrand" "$rocsparse" --target "$target" "$@" || status=1
done
exit $status
