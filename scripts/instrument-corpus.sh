#!/usr/bin/env bash
# Instruments the production corpus (Debian's rocRAND and rocSPARSE, every
# gfx90a code object) with example tools and their plans, then checks every
# output: `gpuinstr-link verify` (original instructions in order, live
# registers preserved, branches, descriptors, CoMGR's metadata query),
# llvm-readelf (no warnings) and llvm-objdump (no unknown instruction).
#
# Usage: scripts/instrument-corpus.sh [EXAMPLE...]   (default: kernel-arguments
# branch-divergence memory-tracer; instruction-counter and opcode-histogram
# instrument every instruction: ~13 million points for the whole corpus, hours
# on 2 cores, so they are not in the default list)
# EVERY=N instruments every Nth gfx90a code object of each library, one code
# object file at a time, instead of the whole library (for the heavy plans).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh >/dev/null
cargo build --release -q -p gpuinstr-driver -p gpuinstr-llvm-plugin
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
link="$target_dir/release/gpuinstr-link"
plugin="$target_dir/release/libembed.so"
out="$target_dir/instrument-corpus"
mkdir -p "$out"
lib="$(dirname "$(scripts/fetch-corpus.sh | head -1)")"

examples=("$@")
[ ${#examples[@]} -gt 0 ] || examples=(kernel-arguments branch-divergence memory-tracer)

status=0
for example in "${examples[@]}"; do
  hipcc --offload-arch=gfx90a -O3 --cuda-device-only -fpass-plugin="$plugin" -I hook-sdk/include \
    -c "hook-sdk/examples/$example/tool.hip" -o "$out/$example.tool.o"
  for library in librocrand.so.1.1 librocsparse.so.0.1; do
    instrumented="$out/$example.$library"
    start=$(date +%s.%N)
    if [ -n "${EVERY:-}" ]; then
      # A sample: every Nth code object, instrumented as a file of its own.
      rm -rf "$out/sample" && mkdir -p "$out/sample"
      "$link" extract "$lib/$library" --target gfx90a -o "$out/sample/all" >/dev/null
      mkdir -p "$out/sample/original"
      for object in "$out/sample/all"/*.hsaco; do
        index=$(basename "$object" | cut -d- -f1)
        if [ $((index % EVERY)) -eq 0 ]; then mv "$object" "$out/sample/original/"; fi
      done
      reports=()
      for object in "$out/sample/original"/*.hsaco; do
        name=$(basename "$object")
        if "$link" instrument "$object" --tool "$out/$example.tool.o" --plan "hook-sdk/examples/$example/plan.toml" \
          --grow-registers --json -o "$out/sample/$name" >"$out/sample/$name.json" 2>"$out/sample/$name.err"; then
          reports+=("$out/sample/$name.json")
        elif grep -q "selects no instruction" "$out/sample/$name.err"; then
          rm "$object" # nothing to instrument in it
        else
          cat "$out/sample/$name.err" >&2
          status=1
          rm "$object"
        fi
      done
      python3 -c 'import json,sys; print(json.dumps({"code_objects": [o for f in sys.argv[1:] for o in json.load(open(f))["code_objects"]], "unchanged": []}))' "${reports[@]}" >"$instrumented.json"
    else
      "$link" instrument "$lib/$library" --target gfx90a --tool "$out/$example.tool.o" \
        --plan "hook-sdk/examples/$example/plan.toml" --grow-registers --json -o "$instrumented" >"$instrumented.json"
    fi
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    summary=$(python3 - "$instrumented.json" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
objects = report["code_objects"]
points = sum(o["points"] for o in objects)
rejected = sum(len(o["rejected"]) for o in objects)
sites = sum(k["sites"] for o in objects for k in o["kernels"])
added = sum(k["instructions_added"] for o in objects for k in o["kernels"])
kernels = sum(len(o["kernels"]) for o in objects)
per_site = added / sites if sites else 0
print(f"{len(objects)} code objects, {kernels} kernels instrumented, {points} points, {rejected} rejected, "
      f"{added} instructions added ({per_site:.1f} per site)")
EOF
)
    if [ -n "${EVERY:-}" ]; then
      pairs=()
      for object in "$out/sample/original"/*.hsaco; do pairs+=("$object" "$out/sample/$(basename "$object")"); done
      extracted=("$out/sample"/*.hsaco)
    else
      pairs=("$lib/$library" "$instrumented")
      rm -rf "$out/extracted"
      "$link" extract "$instrumented" --target gfx90a -o "$out/extracted" >/dev/null
      extracted=("$out/extracted"/*.hsaco)
    fi
    verified=$(for ((i = 0; i < ${#pairs[@]}; i += 2)); do
      "$link" verify "${pairs[i]}" "${pairs[i + 1]}" --target gfx90a --json
    done | python3 -c '
import json, sys
text = sys.stdin.read()
decoder, at, reports = json.JSONDecoder(), 0, []
while at < len(text):
    while at < len(text) and text[at].isspace():
        at += 1
    if at >= len(text):
        break
    value, at = decoder.raw_decode(text, at)
    reports.extend(value)
bad = [r for r in reports if r["report"]["findings"]]
for r in bad[:5]:
    print("   ", r["origin"], r["report"]["findings"][:3], file=sys.stderr)
regions = sum(r["report"]["regions"] for r in reports)
print(f"{len(reports) - len(bad)} of {len(reports)} verified ({regions} regions)")
sys.exit(1 if bad else 0)') || status=1
    warnings=0
    unknown=0
    for object in "${extracted[@]}"; do
      if llvm-readelf-15 -a --notes "$object" 2>&1 >/dev/null | grep -q .; then warnings=$((warnings + 1)); fi
      n=$(llvm-objdump-15 -d --mcpu=gfx90a "$object" | grep -c '<unknown>' || true)
      unknown=$((unknown + n))
    done
    [ "$warnings" -eq 0 ] && [ "$unknown" -eq 0 ] || status=1
    printf '%-18s %-20s %s; %s; llvm-readelf warnings in %d, llvm-objdump unknown %d; %.0f s\n' \
      "$example" "$library" "$summary" "$verified" "$warnings" "$unknown" "$seconds"
  done
done
exit $status
