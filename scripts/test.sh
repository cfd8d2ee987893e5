#!/usr/bin/env bash
# The whole test suite: set-up, formatting, lints, unit and integration tests.
# `scripts/env.sh trixie -- scripts/test.sh` runs it against LLVM 17, `sid`
# against LLVM 21 (docs/toolchains.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# Inside scripts/env.sh's trixie or sid environment, env.sh installed what
# the build needs and GPUINSTR_CARGO_FEATURES chooses that environment's LLVM.
features=${GPUINSTR_CARGO_FEATURES:-}
if [ "${GPUINSTR_ENV:-bookworm}" = bookworm ]; then
  scripts/setup.sh
fi
cargo fmt --all -- --check
# shellcheck disable=SC2086
cargo clippy --workspace --all-targets $features -- -D warnings
# shellcheck disable=SC2086
cargo test --workspace $features
