#!/usr/bin/env bash
# Times an example tool over every code object file of a library, one
# `gpuinstr-link instrument` per file, default flags: the wall time of the
# whole run and each file's seconds, peak memory and points. The benchmark
# docs/instrument.md's "whole library" numbers come from (the instruction
# counter over sid's rocBLAS 6.4 gfx90a code objects).
#
# Usage: scripts/bench-library.sh [FILE|DIRECTORY...]
#   (default: sid's rocBLAS library directory, scripts/env.sh sid's)
#   IN=sid         run in that environment (scripts/env.sh; its toolchain:
#                  rocBLAS 6.4's .hsaco files are code object v6, which
#                  Debian 12's LLVM 15 cannot compile payloads for)
#   EXAMPLE=NAME   the example tool (default instruction-counter)
#   TARGET=gfx90a  the processor; files are those whose name has it
#   JOBS=N         files instrumented at once (default 1: each run uses
#                  every core for its groups of kernels)
#   KEEP=DIR       keep the outputs there (default: each is deleted once
#                  measured; the counter's outputs are 20 times the input)
#   VERIFY=1       also `gpuinstr-link verify` each output (slow: not timed)
#   MEMORY=4G      run inside a memory cgroup of that limit (as root; the
#                  kernel's own accounting: a run past it is killed and
#                  counted as failed); the cgroup's peak is printed
# Results: target/bench-library/EXAMPLE.TARGET.tsv (seconds, peak KB,
# points, input bytes, file), then a summary on standard output.
set -euo pipefail
repository="$(cd "$(dirname "$0")/.." && pwd)"

# The memory limit: this shell and everything it starts (an environment's
# chroot too) in a cgroup, set up outside any environment.
cgroup=""
if [ -n "${MEMORY:-}" ] && [ -z "${GPUINSTR_BENCH_INSIDE:-}" ]; then
  if [ -d /sys/fs/cgroup/memory ]; then # cgroup v1
    cgroup="/sys/fs/cgroup/memory/gpuinstr-bench-$$"
    mkdir "$cgroup"
    echo "$MEMORY" >"$cgroup/memory.limit_in_bytes"
    echo "$MEMORY" >"$cgroup/memory.memsw.limit_in_bytes" 2>/dev/null || true
    peak_file="$cgroup/memory.max_usage_in_bytes"
  else # cgroup v2
    cgroup="/sys/fs/cgroup/gpuinstr-bench-$$"
    mkdir "$cgroup"
    echo "$MEMORY" >"$cgroup/memory.max"
    echo 0 >"$cgroup/memory.swap.max" 2>/dev/null || true
    peak_file="$cgroup/memory.peak"
  fi
  echo $$ >"$cgroup/cgroup.procs"
fi
leave_cgroup() {
  if [ -n "$cgroup" ]; then
    echo "memory limit $MEMORY: the cgroup's peak $(awk '{ printf "%.2f GB", $1 / 1e9 }' "$peak_file") (page cache included)"
    echo $$ >"$(dirname "$cgroup")/cgroup.procs"
    rmdir "$cgroup"
  fi
}
if [ -n "${IN:-}" ] && [ "${GPUINSTR_ENV:-bookworm}" != "$IN" ]; then
  status=0
  "$repository/scripts/env.sh" "$IN" -- env GPUINSTR_BENCH_INSIDE=1 EXAMPLE="${EXAMPLE:-}" TARGET="${TARGET:-}" \
    JOBS="${JOBS:-}" KEEP="${KEEP:-}" VERIFY="${VERIFY:-}" bash "$repository/scripts/bench-library.sh" "$@" || status=$?
  leave_cgroup
  exit $status
fi
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-$repository/target}")"
link="$target_dir/release/gpuinstr-link"
example="${EXAMPLE:-instruction-counter}"
target="${TARGET:-gfx90a}"
jobs="${JOBS:-1}"
out="$target_dir/bench-library"
mkdir -p "$out"

inputs=("$@")
if [ ${#inputs[@]} -eq 0 ]; then
  case "${GPUINSTR_ENV:-bookworm}" in
    sid) inputs=(/usr/lib/x86_64-linux-gnu/rocblas) ;;
    *) inputs=("$repository/target/env/sid/root/usr/lib/x86_64-linux-gnu/rocblas") ;;
  esac
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

# shellcheck disable=SC2086
(cd "$repository" && cargo build --release -q ${GPUINSTR_CARGO_FEATURES:-} -p gpuinstr-driver -p gpuinstr-llvm-plugin)
work="$(mktemp -d "$out/run.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tool="$work/$example.tool.o"
(cd "$repository" && TMPDIR="$work" hipcc --offload-arch="$target" -O3 --cuda-device-only \
  -fpass-plugin="$target_dir/release/libembed.so" -I hook-sdk/include \
  -c "hook-sdk/examples/$example/tool.hip" -o "$tool")
plan="$repository/hook-sdk/examples/$example/plan.toml"
results="$out/$example.$target.tsv"

# Runs a command; writes its seconds and peak resident memory (KB) to FILE
# (the environments have python3, not GNU time).
measured() { # FILE COMMAND...
  python3 -c '
import resource, subprocess, sys, time
start = time.monotonic()
status = subprocess.call(sys.argv[2:])
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
open(sys.argv[1], "w").write(f"{time.monotonic() - start:.2f} {peak}")
sys.exit(status)' "$@"
}

# One file: instrumented, measured, its output checked if asked and dropped.
one() { # index file
  local index=$1 file=$2 name output report
  name="$(basename "$file")"
  output="${KEEP:-$work}/$index.$name"
  report="$work/$index.json"
  if ! measured "$work/$index.time" "$link" instrument "$file" --target "$target" \
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
export -f one measured
export link target tool plan work KEEP VERIFY

[ -z "$cgroup" ] || trap 'rm -rf "$work"; leave_cgroup' EXIT

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
