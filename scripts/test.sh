#!/usr/bin/env bash
# The whole test suite: set-up, formatting, lints, unit and integration tests.
# `scripts/env.sh trixie -- scripts/test.sh` runs it against LLVM 17, `sid`
# against LLVM 21 (docs/toolchains.md).
#
# `--slice` runs the part CI runs in the sid environment (within CI's time):
# lints, the library and emulator tests, the emulated device, and the
# integration tests that hold a toolchain to behaviour (differential runs
# of every example tool, round trips, the emulator against the CPU, every
# example tool through the runtime on the MI300X model).
set -euo pipefail
cd "$(dirname "$0")/.."
slice=0
case "${1:-}" in
  --slice) slice=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--slice]" >&2; exit 2 ;;
esac

# Inside scripts/env.sh's trixie or sid environment, env.sh installed what
# the build needs and GPUINSTR_CARGO_FEATURES chooses that environment's LLVM.
features=${GPUINSTR_CARGO_FEATURES:-}
if [ "${GPUINSTR_ENV:-bookworm}" = bookworm ]; then
  scripts/setup.sh
fi
cargo fmt --all -- --check
# shellcheck disable=SC2086
cargo clippy --workspace --all-targets $features -- -D warnings
if [ $slice = 1 ]; then
  # In release: scripts/env.sh has built the environment's tools so (the
  # slice reuses that build), and the emulator runs the differential tests
  # several times faster than a debug build.
  # shellcheck disable=SC2086
  cargo test --release $features -p gpuinstr-driver -p gpuinstr-emulator -p gpuinstr-device-preload
  # shellcheck disable=SC2086
  cargo test --release $features -p gpuinstr-tests --test gpuinstr -- differential:: lift_emit:: emulator:: emulator_widths:: \
    runtime::every_example_tool_reports_what_the_emulator_gives_on_mi300x runtime::every_compressed_bundle_runs_its_own_code \
    payloads::templates_short_of_vgprs_take_no_agprs_where_none_is_free
  exit 0
fi
# In release, like the slice: the differential and library tests spend
# their time in the instrumenter and the emulator, several times faster
# optimised, and the demo and corpus scripts build release anyway.
# shellcheck disable=SC2086
cargo test --workspace --release $features
