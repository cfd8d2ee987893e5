#!/usr/bin/env bash
# Benchmark of gpuinstr's runtime (not a test), on the emulated GPU:
#  1. per example tool and program: wave instructions the emulated GPU ran,
#     instrumented (static) / original, and the wall time of each run;
#  2. dynamic mode's start-up per code object: instrumenting it as the
#     program loads it (cold cache), then loading it from the cache.
#   scripts/bench-runtime.sh [TARGET]     (gfx90a by default)
set -euo pipefail
cd "$(dirname "$0")/.."

target="${1:-gfx90a}"
scripts/setup.sh >/dev/null
cargo build --release -q -p gpuinstr-device-preload -p gpuinstr-runtime -p gpuinstr-driver -p gpuinstr-llvm-plugin
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
release="$target_dir/release"
work="$target_dir/bench-runtime"
rm -rf "$work"
mkdir -p "$work"
export TMPDIR="$work"

hipcc -O2 --offload-arch="$target" hook-sdk/examples/applications/saxpy/saxpy.hip -o "$work/saxpy"
hipcc -O2 --offload-arch="$target" tests/inputs/runtime/counted.hip -o "$work/counted"
hipcc -O2 --offload-arch="$target" tests/inputs/device/rocrand_generators.cpp -lrocrand -o "$work/rocrand_generators"
tools=(instruction-counter kernel-arguments opcode-histogram branch-divergence memory-tracer)
for tool in "${tools[@]}"; do
  hipcc --offload-arch="$target" -O3 -fpass-plugin="$release/libembed.so" -I hook-sdk/include \
    -c "hook-sdk/examples/$tool/tool.hip" -o "$work/$tool.o"
done

# Wave instructions of a run (`--stats`), and its wall time.
run() { # program, gpuinstr-run options...
  local start end stats
  start=$(date +%s.%N)
  stats=$("$release/gpuinstr-run" --target "$target" --stats --report "$work/report.json" "${@:2}" -- "$1" 2>&1 >/dev/null \
    | grep '^gpuinstr-device:' | sed 's/^gpuinstr-device: [0-9]* dispatches, \([0-9]*\) wave instructions.*/\1/')
  end=$(date +%s.%N)
  echo "$stats $(echo "$end - $start" | bc)"
}

echo "== wave instructions the emulated GPU ran, instrumented / original (every dispatch, ROCr's own copies included)"
printf '%-20s %-20s %14s %14s %8s %9s %9s\n' program tool original instrumented ratio "wall (s)" "orig (s)"
for program in counted saxpy; do
  read -r original original_wall < <(run "$work/$program")
  for tool in "${tools[@]}"; do
    "$release/gpuinstr-link" instrument "$work/$program" --tool "$work/$tool.o" --plan "hook-sdk/examples/$tool/plan.toml" \
      --grow-registers always -o "$work/$program.$tool" >/dev/null
    read -r instrumented wall < <(run "$work/$program.$tool")
    printf '%-20s %-20s %14s %14s %8.1f %9.2f %9.2f\n' "$program" "$tool" "$original" "$instrumented" \
      "$(echo "$instrumented / $original" | bc -l)" "$wall" "$original_wall"
  done
done

echo
echo "== dynamic mode's start-up per code object (instruction counter; cold cache, then cached)"
printf '%-20s %-8s %12s %12s %12s\n' program run "code object" "bytes" "seconds"
for program in counted rocrand_generators; do
  for round in cold cached; do
    run "$work/$program" --tool "$work/instruction-counter.o" --plan hook-sdk/examples/instruction-counter/plan.toml \
      --grow-registers always --cache "$work/cache" >/dev/null
    python3 - "$work/report.json" "$program" "$round" <<'PYTHON'
import json, sys
report = json.load(open(sys.argv[1]))
for entry in report.get("dynamic", []):
    print(f"{sys.argv[2]:<20} {sys.argv[3]:<8} {entry['key']:>12} {entry['size']:>12} {entry['seconds']:>12.3f}  {entry['source']}")
PYTHON
  done
done
