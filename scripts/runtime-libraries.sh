#!/usr/bin/env bash
# Whole libraries under gpuinstr's runtime (long; not part of `cargo test`):
# programs calling Debian 12's rocRAND and rocSPARSE, whose gfx90a code
# objects are instrumented with the instruction counter statically (the
# whole .so) and dynamically (as the program loads them); every dispatch of
# a library kernel must count what the emulator counts for the original.
#   scripts/runtime-libraries.sh [rocrand|rocsparse]...   (default: rocrand)
# rocRAND passes (about 100 s). rocSPARSE does not finish yet: instrumenting
# its whole gfx90a code object in one process ran out of this machine's
# 24 GiB after 44 minutes (docs/runtime.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
libraries=("$@")
[ ${#libraries[@]} -gt 0 ] || libraries=(rocrand)
for library in "${libraries[@]}"; do
  cargo test --release -p gpuinstr-tests --test gpuinstr -- --ignored --exact \
    "runtime::${library}_under_the_runtime_counts_what_the_emulator_counts"
done
