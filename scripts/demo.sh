#!/usr/bin/env bash
# The main job on the shipped examples: build gpuinstr, compile the
# instruction-counter tool with the plugin, show what gpuinstr-link sees in
# the tool and in an application kernel, instrument the application, verify
# it, and run the original and the instrumented kernel in the emulator; then
# the whole loop on a whole HIP program: instrument it, run it unchanged on
# the emulated GPU with gpuinstr's runtime and the tool's host part, read
# the report.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cargo build --release -p gpuinstr-llvm-plugin -p gpuinstr-driver -p gpuinstr-emulator \
  -p gpuinstr-device-preload -p gpuinstr-device-kfd -p gpuinstr-runtime -p gpuinstr-report

target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
out="$target_dir/demo"
mkdir -p "$out"
# clang leaves empty directories in TMPDIR: they go with the demo's output.
export TMPDIR="$out"
plugin="$target_dir/release/libembed.so"
link="$target_dir/release/gpuinstr-link"

echo "== compiling the instruction-counter tool with the gpuinstr plugin"
hipcc --offload-arch=gfx90a -O3 -fpass-plugin="$plugin" -I hook-sdk/include \
  -c hook-sdk/examples/instruction-counter/tool.hip -o "$out/instruction-counter.o"

echo "== compiling the vector-add application"
hipcc --offload-arch=gfx90a -O3 -c hook-sdk/examples/applications/vector-add/vector-add.hip -o "$out/vector-add.o"

echo "== the tool, as gpuinstr-link sees it"
"$link" inspect "$out/instruction-counter.o"

echo
echo "== the application"
"$link" inspect "$out/vector-add.o"

echo
echo "== the application's kernel, lifted (MIR with LLVM pseudo opcodes)"
"$link" lift "$out/vector-add.o" --emit mir

echo "== where instrumentation can find registers (liveness, seed 000's report)"
"$link" analyze "$out/vector-add.o"

echo "== re-emitted and linked through CoMGR, checked against the original"
"$link" roundtrip "$out/vector-add.o" -o "$out/vector-add.roundtrip.hsaco" --check

echo
echo "== the counter's hooks compiled for instructions of the kernel (stages 5-8: O3, intrinsics, llc around the live registers)"
"$link" payload "$out/vector-add.o" --tool "$out/instruction-counter.o" --hook countInstructionsScalar --at _Z9vectorAddPfPKfS1_i:0
"$link" payload "$out/vector-add.o" --tool "$out/instruction-counter.o" --hook countInstructionsVector --arg false \
  --at _Z9vectorAddPfPKfS1_i:8

echo
echo "== the application instrumented with the counter's plan (every instruction): the host object comes back"
echo "   with its gfx90a code object instrumented and the counter defined"
"$link" instrument "$out/vector-add.o" --target gfx90a --tool "$out/instruction-counter.o" \
  --plan hook-sdk/examples/instruction-counter/plan.toml -o "$out/vector-add.instrumented.o"
"$link" inspect "$out/vector-add.instrumented.o" --target gfx90a

echo
echo "== the instrumented kernel's first instructions (an inserted region, then the application's s_load)"
"$link" lift "$out/vector-add.instrumented.o" --target gfx90a --emit mir | sed -n '1,40p'

echo
echo "== the instrumented code object checked against the original (instructions in order, live registers kept)"
"$link" verify "$out/vector-add.o" "$out/vector-add.instrumented.o" --target gfx90a

echo
echo "== both run on the CPU in gpuinstr's emulator (no GPU here): the same sums, and the counter"
echo "   (scalar instructions once per wavefront, vector instructions per active lane)"
emulate="$(dirname "$link")/gpuinstr-emulate"
inputs=(--grid 2 --block 64 --arg zeros:f32:128 --arg "buffer:f32:$(seq -s, 1 128)" --arg "buffer:f32:$(seq -s, 1 128)" --arg i32:100)
"$emulate" "$out/vector-add.o" --target gfx90a --kernel _Z9vectorAddPfPKfS1_i "${inputs[@]}" | head -2
"$emulate" "$out/vector-add.instrumented.o" --target gfx90a --kernel _Z9vectorAddPfPKfS1_i "${inputs[@]}" \
  --managed Counter:u64:1 | head -3

echo
echo "== the whole loop on a whole program: saxpy (hipcc, unchanged source) instrumented with the counter,"
echo "   run unchanged under the real ROCm runtime on the emulated GPU with gpuinstr's runtime and the"
echo "   counter's host part (hook-sdk/examples/instruction-counter/host.cpp), then its JSON report"
hipcc --offload-arch=gfx90a -O2 hook-sdk/examples/applications/saxpy/saxpy.hip -o "$out/saxpy"
"$link" instrument "$out/saxpy" --tool "$out/instruction-counter.o" \
  --plan hook-sdk/examples/instruction-counter/plan.toml -o "$out/saxpy.instrumented" | grep "selected points" 
c++ -std=c++17 -shared -fPIC -I hook-sdk/include hook-sdk/examples/instruction-counter/host.cpp \
  -o "$out/libinstruction-counter-host.so"
"$(dirname "$link")/gpuinstr-run" --tool-host "$out/libinstruction-counter-host.so" \
  --report "$out/saxpy-report.json" -- "$out/saxpy.instrumented"
sed -n '/"dispatches"/,/"problems"/p' "$out/saxpy-report.json"

echo
echo "== the same run as an SQLite database beside the report (docs/runtime.md, \"The database\"):"
echo "   instructions counted per kernel, with SQL"
python3 - "$out/saxpy-report.sqlite" <<'QUERY'
import sqlite3, sys
run = sqlite3.connect(sys.argv[1])
query = ("SELECT d.kernel, count(*), sum(v.value) FROM dispatches d JOIN dispatch_values v "
         "ON v.dispatch = d.id AND v.name = 'instructions' GROUP BY d.kernel")
for kernel, dispatches, instructions in run.execute(query):
    print(f"{kernel}: {dispatches} dispatches, {instructions} instructions")
QUERY

echo
echo "== and as a page (gpuinstr-report: one self-contained HTML file, open it in a browser) and a trace"
echo "   of its dispatches on their queue (open it in ui.perfetto.dev)"
"$(dirname "$link")/gpuinstr-report" "$out/saxpy-report.sqlite" -o "$out/saxpy-report.html" \
  --trace "$out/saxpy-trace.json"
