#!/usr/bin/env bash
# Times an example tool over every code object file of a library, one
# `gpuinstr-link instrument` per file, default flags: the wall time of the
# whole run and each file's seconds, peak memory and points. The benchmark
# docs/instrument.md's "whole library" numbers come from (the instruction
# counter over sid's rocBLAS 6.4 gfx90a code objects).
#
# Usage: scripts/bench-library.sh [FILE|DIRECTORY...]
#   (default: sid's rocBLAS library directory, built by scripts/env.sh sid)
#   EXAMPLE=NAME   the example tool (default instruction-counter)
#   TARGET=gfx90a  the processor; files are those whose name has it
#   JOBS=N         files instrumented at once (default 1: each run uses
#                  every core for its groups of kernels)
#   KEEP=DIR       keep the outputs there (default: each is deleted once
#                  measured; the counter's outputs are 20 times the input)
#   VERIFY=1       also `gpuinstr-link verify` each output (slow: not timed)
# Results: target/bench-library/EXAMPLE.TARGET.tsv (seconds, peak KB,
# points, input bytes, file), then a summary on standard output.
set -euo pipefail
repository="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-$repository/target}")"
link="$target_dir/release/gpuinstr-link"
example="${EXAMPLE:-instruction-counter}"
target="${TARGET:-gfx90a}"
jobs="${JOBS:-1}"
out="$target_dir/bench-library"
mkdir -p "$out"

inputs=("$@")
if [ ${#inputs[@]} -eq 0 ]; then
  inputs=("$target_dir/env/sid/root/usr/lib/x86_64-linux-gnu/rocblas")
fi
files=()
for input in "${inputs[@]}"; do
  if [ -d "$input" ]; then
    mapfile -t -O "${#files[@]}" files < <(find "$input" -type f \( -name "*$target*.co" -o -name "*$target*.hsaco" \) | sort)
  elif [ -f "$input" ]; then
    files+=("$input")
  else
    echo "bench-library: $input: no such file or directory" >&2
    exit 2
  fi
done
[ ${#files[@]} -gt 0 ] || { echo "bench-library: no $target code object files in ${inputs[*]}" >&2; exit 2; }

(cd "$repository" && cargo build --release -q -p gpuinstr-driver -p gpuinstr-llvm-plugin)
work="$(mktemp -d "$out/run.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tool="$work/$example.tool.o"
(cd "$repository" && TMPDIR="$work" hipcc --offload-arch="$target" -O3 --cuda-device-only \
  -fpass-plugin="$target_dir/release/libembed.so" -I hook-sdk/include \
  -c "hook-sdk/examples/$example/tool.hip" -o "$tool")
plan="$repository/hook-sdk/examples/$example/plan.toml"
results="$out/$example.$target.tsv"

# One file: instrumented, measured, its output checked if asked and dropped.
one() { # index file
  local index=$1 file=$2 name output report
  name="$(basename "$file")"
  output="${KEEP:-$work}/$index.$name"
  report="$work/$index.json"
  if ! /usr/bin/time -f "%e %M" -o "$work/$index.time" "$link" instrument "$file" --target "$target" \
    --tool "$tool" --plan "$plan" --json -o "$output" >"$report" 2>"$work/$index.err"; then
    echo "FAILED $file: $(tail -3 "$work/$index.err")" >&2
    echo "failed" >"$work/$index.row"
    return
  fi
  if [ -n "${VERIFY:-}" ] && ! "$link" verify "$file" "$output" --target "$target" >"$work/$index.verify" 2>&1; then
    echo "NOT VERIFIED $file: $(tail -3 "$work/$index.verify")" >&2
  fi
  local points
  points=$(python3 -c 'import json,sys; print(sum(o["points"] for o in json.load(open(sys.argv[1]))["code_objects"]))' "$report")
  read -r seconds peak <"$work/$index.time"
  printf '%s\t%s\t%s\t%s\t%s\n' "$seconds" "$peak" "$points" "$(stat -c %s "$file")" "$name" >"$work/$index.row"
  [ -n "${KEEP:-}" ] || rm -f "$output"
  rm -f "$report"
}
export -f one
export link target tool plan work KEEP VERIFY

start=$(date +%s.%N)
for i in "${!files[@]}"; do printf '%s\0%s\0' "$i" "${files[$i]}"; done |
  xargs -0 -n 2 -P "$jobs" bash -c 'one "$0" "$1"'
wall=$(awk "BEGIN { print $(date +%s.%N) - $start }")
cat "$work"/*.row | grep -v '^failed$' | sort -t$'\t' -k5 >"$results" || true
failed=$(cat "$work"/*.row | grep -c '^failed$' || true)
python3 - "$results" "$wall" "$failed" "$jobs" "${#files[@]}" <<'EOF'
import sys
path, wall, failed, jobs, count = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
rows = [line.rstrip("\n").split("\t") for line in open(path) if line.strip()]
seconds = [float(r[0]) for r in rows]
peaks = [int(r[1]) for r in rows]
points = sum(int(r[2]) for r in rows)
size = sum(int(r[3]) for r in rows)
print(f"{len(rows)} of {count} files instrumented ({failed} failed), {size / 1e9:.2f} GB, {points:,} points")
print(f"wall {wall:.0f} s with {jobs} at once; {sum(seconds):.0f} s summed; {points / wall:,.0f} points/s")
if rows:
    worst = max(rows, key=lambda r: int(r[1]))
    slowest = max(rows, key=lambda r: float(r[0]))
    print(f"peak memory {max(peaks) / 1e6:.2f} GB ({worst[4]}); slowest {float(slowest[0]):.0f} s ({slowest[4]})")
EOF
[ "$failed" -eq 0 ]
