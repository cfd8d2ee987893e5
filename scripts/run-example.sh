#!/usr/bin/env bash
# Runs a shipped HIP application, unchanged, on the emulated GPU: builds the
# device library and gpuinstr-run, compiles hook-sdk/examples/applications/
# saxpy with hipcc, and runs it under the real ROCm runtime (ROCr 5.2) with
# gpuinstr-run. TARGET=gfx908 for the other GPU (default gfx90a).
set -euo pipefail
cd "$(dirname "$0")/.."

target="${TARGET:-gfx90a}"
scripts/setup.sh >/dev/null
cargo build --release -q -p gpuinstr-device-preload -p gpuinstr-device-kfd -p gpuinstr-runtime
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
work="$target_dir/run-example"
mkdir -p "$work"
# clang leaves empty directories in TMPDIR: give it ours.
TMPDIR="$work" hipcc -O2 --offload-arch="$target" hook-sdk/examples/applications/saxpy/saxpy.hip -o "$work/saxpy-$target"
"$target_dir/release/gpuinstr-run" --target "$target" --stats -- "$work/saxpy-$target"
