#!/usr/bin/env bash
# Rings of records at full size (docs/runtime.md, "What rings cost"): one
# dispatch of 52,494,336 lane accesses (tests/inputs/runtime/many_accesses.hip)
# traced by the memory tracer through a 4 MiB and the default 64 MiB ring,
# each trace checked against the emulated device's access log of the
# original (count and order-sensitive digest), through the 4 MiB ring
# dropping what does not fit (`--ring-full drop`: delivered plus dropped
# must be every access), by a host part that only counts, by the memory tracer as
# it was before rings (a 2^20-record buffer copied after the dispatch); and
# branch divergence on a loop of 1,000 divergent rounds. Prints a table of
# records made and delivered, seconds and peak memory.
#
#   scripts/bench-rings.sh                 # about 10 minutes here (2 cores)
#   ROUNDS=200 BRANCH_ROUNDS=250 scripts/bench-rings.sh   # a quarter
set -euo pipefail
cd "$(dirname "$0")/.."
export ROUNDS=${ROUNDS:-800} BRANCH_ROUNDS=${BRANCH_ROUNDS:-1000}
# shellcheck disable=SC2086
cargo test --release ${GPUINSTR_CARGO_FEATURES:-} -p gpuinstr-tests --test gpuinstr -- \
  --ignored --exact runtime::rings_at_full_size --nocapture --test-threads 1
