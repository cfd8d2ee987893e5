#!/usr/bin/env bash
# Whole libraries under gpuinstr's runtime (long; not part of `cargo test`):
# programs calling Debian 12's rocRAND and rocSPARSE on the emulated MI210,
# whose gfx90a code objects are instrumented with each example tool
# statically (the whole .so) and dynamically (as the program loads them);
# every dispatch of a library kernel must report what the device's log of
# the original run gives (counts, opcodes, launch shape, EXEC history,
# accesses). In the sid environment, rocsolver: sid's rocSOLVER 6.4 on the
# emulated MI300X (its gfx9-4-generic code objects), and rocblas: sid's
# rocBLAS 6.4's GEMMs (Tensile's code objects, read as the program runs)
# on the emulated MI210, dynamically only (the tests download the
# packages).
#   scripts/runtime-libraries.sh [rocrand|rocsparse]... [-- TOOL,...]
#   scripts/env.sh sid -- scripts/runtime-libraries.sh rocsolver|rocblas [-- TOOL,...]
# (default: rocrand, every example tool, instrumented with the default flags;
# GPUINSTR_LIBRARY_GROWTH=always for --grow-registers=always). rocRAND with all five tools takes
# about 8 minutes; rocSPARSE 3 to 40 minutes per tool, nearly all of it
# instrumenting the 111 gfx90a code objects the device runs (xnack off)
# statically (docs/runtime.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${GPUINSTR_ENV:-bookworm}" = bookworm ]; then
  scripts/setup.sh >/dev/null
fi
libraries=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do libraries+=("$1"); shift; done
if [ "${1:-}" = -- ]; then export GPUINSTR_LIBRARY_TOOLS="$2"; fi
[ ${#libraries[@]} -gt 0 ] || libraries=(rocrand)
for library in "${libraries[@]}"; do
  test="runtime::${library}_under_the_runtime_reports_what_the_emulator_gives"
  [ "$library" = rocblas ] && test="runtime::rocblas_gemms_under_the_runtime_report_what_the_emulator_gives"
  # shellcheck disable=SC2086
  cargo test --release ${GPUINSTR_CARGO_FEATURES:-} -p gpuinstr-tests --test gpuinstr -- --ignored --exact \
    "$test" --nocapture
done
