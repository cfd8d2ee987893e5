#!/usr/bin/env bash
# Programs nobody here wrote under gpuinstr's runtime (long; not part of
# `cargo test`): each line of FILE is `DIR PROGRAM ARGS...` (a program the
# user built, run in DIR); each runs on the emulated MI210 as it is and with
# each example tool in dynamic mode and default flags, and must print what
# it printed (lines measuring time or memory aside) and report, dispatch by dispatch, what
# the device's log of the original run gives (docs/runtime.md, "Programs
# nobody here wrote").
# A program that compiles its kernels as it runs (Triton) says where they
# go: GPUINSTR_PROGRAM_CODE_OBJECTS=DIR (every .hsaco under DIR, after the
# original run; for Triton, also its TRITON_CACHE_DIR).
#   scripts/runtime-programs.sh FILE [-- TOOL,...]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/runtime-programs.sh FILE [-- TOOL,...]" >&2; exit 2; }
list="$(realpath "$1")"
shift
if [ "${1:-}" = -- ]; then export GPUINSTR_PROGRAM_TOOLS="$2"; fi
cd "$(dirname "$0")/.."
if [ "${GPUINSTR_ENV:-bookworm}" = bookworm ]; then
  scripts/setup.sh >/dev/null
fi
# shellcheck disable=SC2086
GPUINSTR_PROGRAMS="$list" cargo test --release ${GPUINSTR_CARGO_FEATURES:-} -p gpuinstr-tests --test gpuinstr -- --ignored \
  --exact runtime::programs_nobody_here_wrote_report_what_the_emulator_gives --nocapture
