#!/usr/bin/env bash
# Benchmark of the emulated GPU (not a test): for each program, the wall
# time end to end (ROCr and HIP start-up included) and what the emulated GPU
# ran (dispatches, wave instructions, emulated instructions per second).
#   scripts/bench-device.sh [TARGET]     (gfx90a by default)
set -euo pipefail
cd "$(dirname "$0")/.."

target="${1:-gfx90a}"
scripts/setup.sh >/dev/null
cargo build --release -q -p gpuinstr-device-preload -p gpuinstr-device-kfd -p gpuinstr-runtime
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
work="$target_dir/bench-device"
mkdir -p "$work"
build() { # source, output, extra hipcc arguments
  TMPDIR="$work" hipcc -O2 --offload-arch="$target" "$1" -o "$2" "${@:3}"
}
build hook-sdk/examples/applications/saxpy/saxpy.hip "$work/saxpy"
build tests/inputs/device/vector_add.hip "$work/vector_add"
build tests/inputs/device/runtime_features.hip "$work/runtime_features"
build tests/inputs/device/rocsparse_routines.cpp "$work/rocsparse_routines" -lrocsparse
build tests/inputs/device/rocrand_generators.cpp "$work/rocrand_generators" -lrocrand

printf '%-20s %10s  %s\n' program "wall (s)" "emulated GPU"
for program in vector_add runtime_features saxpy rocsparse_routines rocrand_generators; do
  start=$(date +%s.%N)
  stats=$("$target_dir/release/gpuinstr-run" --target "$target" --stats -- "$work/$program" 2>&1 >/dev/null \
    | grep '^gpuinstr-device:' | sed 's/^gpuinstr-device: //')
  end=$(date +%s.%N)
  printf '%-20s %10.2f  %s\n' "$program" "$(echo "$end - $start" | bc)" "$stats"
done
