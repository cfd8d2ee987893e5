#!/usr/bin/env bash
# Benchmark of gpuinstr's runtime (not a test), on the emulated GPU:
#  1. per example tool and program: wave instructions the program's kernels
#     ran on the emulated GPU, instrumented (static) / original, what the
#     runtime's collection cost, and the wall time of each run;
#  2. dynamic mode's start-up per code object: instrumenting it as the
#     program loads it (cold cache), then loading it from the cache.
#   scripts/bench-runtime.sh [TARGET]     (gfx90a by default)
#   TOOLS="block-counter ..."              only these example tools (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."

target="${1:-gfx90a}"
scripts/setup.sh >/dev/null
cargo build --release -q -p gpuinstr-device-preload -p gpuinstr-device-kfd -p gpuinstr-runtime -p gpuinstr-driver -p gpuinstr-llvm-plugin
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
release="$target_dir/release"
work="$target_dir/bench-runtime"
rm -rf "$work"
mkdir -p "$work"
export TMPDIR="$work"

hipcc -O2 --offload-arch="$target" hook-sdk/examples/applications/saxpy/saxpy.hip -o "$work/saxpy"
hipcc -O2 --offload-arch="$target" tests/inputs/runtime/counted.hip -o "$work/counted"
hipcc -O2 --offload-arch="$target" tests/inputs/device/rocrand_generators.cpp -lrocrand -o "$work/rocrand_generators"
read -r -a tools <<<"${TOOLS:-instruction-counter block-counter kernel-arguments opcode-histogram branch-divergence memory-tracer memory-efficiency}"
# The block counter counts what the instruction counter does, for its host part.
host_of() { if [ "$1" = block-counter ]; then echo instruction-counter; else echo "$1"; fi; }
for tool in "${tools[@]}"; do
  hipcc --offload-arch="$target" -O3 -fpass-plugin="$release/libembed.so" -I hook-sdk/include \
    -c "hook-sdk/examples/$tool/tool.hip" -o "$work/$tool.o"
done

# A run's wave instructions from the device's dispatch log: the program's
# kernels, the runtime's collect kernels (copying tool globals out), and
# HIP's own (copies, fills); and the wall time.
run() { # program, gpuinstr-run options...
  local start end
  rm -f "$work/log.jsonl"
  start=$(date +%s.%N)
  "$release/gpuinstr-run" --target "$target" --dispatch-log "$work/log.jsonl" --report "$work/report.json" "${@:2}" -- "$1" >/dev/null 2>&1
  end=$(date +%s.%N)
  python3 - "$work/log.jsonl" <<'PYTHON'
import json, sys
program = collect = hip = 0
for line in open(sys.argv[1]):
    dispatch = json.loads(line)
    if dispatch["kernel"] == "gpuinstr_collect":
        collect += dispatch["instructions"]
    elif dispatch["kernel"].startswith("__amd_rocclr_"):
        hip += dispatch["instructions"]
    else:
        program += dispatch["instructions"]
print(program, collect, hip, end=" ")
PYTHON
  echo "$(echo "$end - $start" | bc)"
}

echo "== wave instructions of the program's kernels, instrumented (with the tool's host part) / original"
echo "   (collect: the runtime's kernels copying tool globals out after each dispatch)"
printf '%-10s %-20s %12s %14s %8s %14s %9s %9s\n' program tool original instrumented ratio collect "wall (s)" "orig (s)"
for program in counted saxpy; do
  read -r original _ _ original_wall < <(run "$work/$program" --no-runtime)
  for tool in "${tools[@]}"; do
    "$release/gpuinstr-link" instrument "$work/$program" --tool "$work/$tool.o" --plan "hook-sdk/examples/$tool/plan.toml" \
      --grow-registers=always -o "$work/$program.$tool" >/dev/null
    c++ -shared -fPIC -std=c++17 -O2 -I hook-sdk/include "hook-sdk/examples/$(host_of "$tool")/host.cpp" \
      -o "$work/lib$tool-host.so"
    read -r instrumented collect _ wall < <(run "$work/$program.$tool" --tool-host "$work/lib$tool-host.so")
    printf '%-10s %-20s %12s %14s %8.1f %14s %9.2f %9.2f\n' "$program" "$tool" "$original" "$instrumented" \
      "$(echo "$instrumented / $original" | bc -l)" "$collect" "$wall" "$original_wall"
  done
done

# Dynamic mode's start-up is measured with the instruction counter and
# default flags (what a user gets: every point placed, no growth that
# costs occupancy).
[ -f "$work/instruction-counter.o" ] || exit 0
echo
echo "== dynamic mode's start-up per code object (instruction counter; cold cache, then cached)"
printf '%-20s %-8s %12s %12s %12s\n' program run "code object" "bytes" "seconds"
for program in counted rocrand_generators; do
  for round in cold cached; do
    run "$work/$program" --tool "$work/instruction-counter.o" --plan hook-sdk/examples/instruction-counter/plan.toml \
      --cache "$work/cache" >/dev/null
    python3 - "$work/report.json" "$program" "$round" <<'PYTHON'
import json, sys
report = json.load(open(sys.argv[1]))
for entry in report.get("dynamic", []):
    print(f"{sys.argv[2]:<20} {sys.argv[3]:<8} {entry['key']:>12} {entry['size']:>12} {entry['seconds']:>12.3f}  {entry['source']}")
PYTHON
  done
done
