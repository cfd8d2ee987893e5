#!/usr/bin/env bash
# The whole test suite: set-up, formatting, lints, unit and integration tests.
# `scripts/env.sh trixie -- scripts/test.sh` runs it against LLVM 17, `sid`
# against LLVM 21 (docs/toolchains.md).
#
# `--slice` runs the part CI runs in the sid environment (within CI's time):
# lints, the library and emulator tests, the emulated device, and the
# integration tests that hold a toolchain to behaviour (differential runs
# of every example tool, round trips, the emulator against the CPU).
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
  # shellcheck disable=SC2086
  cargo test $features -p gpuinstr-driver -p gpuinstr-emulator -p gpuinstr-device-preload
  # shellcheck disable=SC2086
  cargo test $features -p gpuinstr-tests --test gpuinstr -- differential:: lift_emit:: emulator::
  exit 0
fi
# shellcheck disable=SC2086
cargo test --workspace $features
