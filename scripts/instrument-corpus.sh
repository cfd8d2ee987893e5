#!/usr/bin/env bash
# Instruments the production corpus (Debian 12's rocRAND and rocSPARSE,
# every gfx90a code object, unless told otherwise) with example tools and
# their plans, then checks every output: `gpuinstr-link verify` (original
# instructions in order, live registers preserved, branches, descriptors,
# CoMGR's metadata query), llvm-readelf (no warnings) and llvm-objdump (no
# unknown instruction).
#
# Usage: scripts/instrument-corpus.sh [EXAMPLE...]
#   (default: the six examples but the block counter; the every-instruction ones take hours on
#   2 cores for rocSPARSE)
#
# Each code object is instrumented as a file of its own, and its outcome is
# kept in target/instrument-corpus/results/EXAMPLE/LIBRARY/OBJECT.json: a
# run that is stopped resumes where it stopped, and the summary counts the
# code objects done so far ("N of M code objects").
#   EVERY=N       only every Nth code object of each library (a sample)
#   WHOLE=1       instrument each library as one host file instead (the
#                 output is the library with its device code instrumented;
#                 not resumable), verify it, then extract its code objects
#                 for llvm-readelf and llvm-objdump
#   SUMMARY=1     only print the summary of what is done
#   TABLE=1       only print what is done as a Markdown table (every
#                 example, library and processor with results)
#   STAGES=1      only print where the time went, per example, library
#                 and processor: each pipeline stage's (and the payload
#                 compiler's steps') seconds summed over the code objects
#                 done, and the largest peak memory of one run (the
#                 benchmark docs/instrument.md's breakdown comes from)
#   LIBRARIES=... the libraries (paths, space-separated) instead of Debian
#                 12's; inside scripts/env.sh, that environment's own
#   TARGETS=...   the processors whose code objects are instrumented
#                 (space-separated; default gfx90a)
#   GROW=WHEN     the --grow-registers policy: free (the default, as
#                 instrument's own default), always or never; results go
#                 to results/WHEN/ when it is not free. Every run passes
#                 --allow-partial so that points left out are counted.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
link="$target_dir/release/gpuinstr-link"
plugin="$target_dir/release/libembed.so"
read -r -a targets <<<"${TARGETS:-gfx90a}"
out="$target_dir/instrument-corpus"
grow="${GROW:-free}"
results="$out/results"
[ "$grow" = free ] || results="$out/results/$grow"
mkdir -p "$out" "$results"
examples=("$@")
[ ${#examples[@]} -gt 0 ] ||
  examples=(kernel-arguments branch-divergence memory-tracer memory-efficiency instruction-counter opcode-histogram)
if [ -n "${LIBRARIES:-}" ]; then
  read -r -a libraries <<<"$LIBRARIES"
else
  libraries=()
fi
# Results and extracted objects are kept per library and processor
# (gfx90a keeps the plain library name results of earlier runs used).
key() { # library target
  if [ "$2" = gfx90a ]; then basename "$1"; else echo "$(basename "$1").$2"; fi
}

summary() { # example library target
  local k
  k=$(key "$2" "$3")
  python3 scripts/corpus-summary.py "$results/$1/$k" "$1" "$k" "$out/objects/$k"
}

if [ -n "${TABLE:-}" ]; then
  exec python3 scripts/corpus-summary.py --markdown "$results" "$out/objects"
fi

if [ -n "${STAGES:-}" ]; then
  exec python3 scripts/corpus-summary.py --stages "$results"
fi

if [ -n "${SUMMARY:-}" ]; then
  [ ${#libraries[@]} -gt 0 ] || libraries=(librocrand.so.1.1 librocsparse.so.0.1)
  status=0
  for example in "${examples[@]}"; do
    for library in "${libraries[@]}"; do
      for target in "${targets[@]}"; do summary "$example" "$library" "$target" || status=1; done
    done
  done
  exit $status
fi

# The commit before the build: what the binary is built from.
# (scripts/env.sh passes it in: its chroots have no git.)
commit="${GPUINSTR_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +changes)}"
if [ "${GPUINSTR_ENV:-bookworm}" = bookworm ]; then
  scripts/setup.sh >/dev/null
fi
# shellcheck disable=SC2086
cargo build --release -q ${GPUINSTR_CARGO_FEATURES:-} -p gpuinstr-driver -p gpuinstr-llvm-plugin
if [ ${#libraries[@]} -eq 0 ]; then
  mapfile -t libraries < <(scripts/fetch-corpus.sh)
fi

# One object's checks: verify, llvm-readelf, llvm-objdump -> a JSON outcome.
check_object() { # original instrumented report.json error-file seconds result.json target peak-kb
  local original=$1 instrumented=$2 report=$3 errors=$4 seconds=$5 result=$6 target=$7 peak_kb=$8
  local warnings=0 unknown=0
  "$link" verify "$original" "$instrumented" --target "$target" --json >"$result.verify" 2>>"$errors" || true
  if "${LLVM_BINDIR:-/usr/lib/llvm-15/bin}/llvm-readelf" -a --notes "$instrumented" 2>&1 >/dev/null | grep -q .; then warnings=1; fi
  unknown=$("${LLVM_BINDIR:-/usr/lib/llvm-15/bin}/llvm-objdump" -d --mcpu="$target" "$instrumented" | grep -c '<unknown>' || true)
  python3 - "$report" "$seconds" "$warnings" "$unknown" "$result" "$commit" "$peak_kb" <<'EOF'
import json, sys
report_path, seconds, warnings, unknown, result_path, commit, peak_kb = sys.argv[1:]
verified = json.loads(open(result_path + ".verify").read() or "[]")
objects = json.load(open(report_path))["code_objects"]
findings = [f for v in verified for f in v["report"]["findings"]]
json.dump({
    "points": sum(o["selected"] for o in objects),
    "payloads": sum(o["payloads_compiled"] for o in objects),
    "left_out": [p for o in objects for p in o["left_out"]],
    "kernels": sum(len(o["kernels"]) for o in objects),
    "sites": sum(k["sites"] for o in objects for k in o["kernels"]),
    "added": sum(k["instructions_added"] for o in objects for k in o["kernels"]),
    "per_site": [k["instructions_added"] / k["sites"] for o in objects for k in o["kernels"] if k["sites"]],
    # Points whose payload waits for every memory counter (builds before
    # the report counted waits have none).
    "full_drains": sum(o["waits"]["full_drains"] for o in objects) if all("waits" in o for o in objects) else None,
    "seconds": float(seconds),
    "verified": bool(verified) and not findings,
    "regions": sum(v["report"]["regions"] for v in verified),
    "findings": findings[:5],
    "readelf_warnings": int(warnings),
    "objdump_unknown": int(unknown),
    "commit": commit,
    # Seconds per pipeline stage and payload-compiler step, summed over
    # the file's code objects (a step that runs once per retry, summed).
    "steps": {name: sum(t for o in objects for n, t in o.get("steps", []) if n == name)
              for name in dict.fromkeys(n for o in objects for n, _ in o.get("steps", []))},
    "peak_rss_kb": int(peak_kb),
}, open(result_path + ".tmp", "w"))
EOF
  mv "$result.tmp" "$result"
  rm -f "$result.verify"
}

# Runs a command and writes its peak resident memory (KB) to FILE.
peak_memory() { # FILE COMMAND...
  python3 -c '
import resource, subprocess, sys
status = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(status)' "$@"
}

status=0
for example in "${examples[@]}"; do
  tool="$out/$example.tool.o"
  # (clang leaves empty directories in TMPDIR: they go with the results.)
  TMPDIR="$out" hipcc --offload-arch=gfx90a -O3 --cuda-device-only -fpass-plugin="$plugin" -I hook-sdk/include \
    -c "hook-sdk/examples/$example/tool.hip" -o "$tool.tmp" && mv "$tool.tmp" "$tool"
  plan="hook-sdk/examples/$example/plan.toml"
  for library in "${libraries[@]}"; do
    for target in "${targets[@]}"; do
      k=$(key "$library" "$target")
      if [ -n "${WHOLE:-}" ]; then
        instrumented="$out/$example.$k"
        start=$(date +%s.%N)
        "$link" instrument "$library" --target "$target" --tool "$tool" --plan "$plan" --grow-registers="$grow" \
          --allow-partial --json \
          -o "$instrumented" >"$instrumented.json"
        echo "$example $k: whole library instrumented in $(awk "BEGIN { print $(date +%s.%N) - $start }") s"
        "$link" verify "$library" "$instrumented" --target "$target" | tail -1
        # What real tools read in every instrumented code object.
        whole="$out/whole/$example.$k"
        rm -rf "$whole" && mkdir -p "$whole"
        "$link" extract "$instrumented" --target "$target" -o "$whole" >/dev/null
        warned=0 unknown=0 count=0
        for object in "$whole"/*.hsaco; do
          count=$((count + 1))
          if "${LLVM_BINDIR:-/usr/lib/llvm-15/bin}/llvm-readelf" -a --notes "$object" 2>&1 >/dev/null | grep -q .; then
            warned=$((warned + 1))
          fi
          unknown=$((unknown + $("${LLVM_BINDIR:-/usr/lib/llvm-15/bin}/llvm-objdump" -d --mcpu="$target" "$object" |
            grep -c '<unknown>' || true)))
        done
        echo "$example $k: $count code objects; llvm-readelf warned on $warned, llvm-objdump printed <unknown> $unknown times"
        rm -rf "$whole"
        continue
      fi
      objects="$out/objects/$k"
      if [ ! -f "$objects/.complete" ]; then
        rm -rf "$objects" && mkdir -p "$objects"
        "$link" extract "$library" --target "$target" -o "$objects" >/dev/null
        touch "$objects/.complete"
      fi
      done_dir="$results/$example/$k"
      mkdir -p "$done_dir" "$out/work"
      for object in "$objects"/*.hsaco; do
        name=$(basename "$object" .hsaco)
        index=${name%%-*}
        if [ -n "${EVERY:-}" ] && [ $((10#$index % EVERY)) -ne 0 ]; then continue; fi
        [ -f "$done_dir/$name.json" ] && continue
        instrumented="$out/work/$example.$name.hsaco"
        start=$(date +%s.%N)
        if peak_memory "$out/work/peak" "$link" instrument "$object" --tool "$tool" --plan "$plan" \
          --grow-registers="$grow" --allow-partial --json \
          -o "$instrumented" >"$out/work/report.json" 2>"$out/work/errors"; then
          seconds=$(awk "BEGIN { print $(date +%s.%N) - $start }")
          if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["code_objects"] else 1)' \
            "$out/work/report.json"; then :; else
            echo '{"nothing_selected": true}' >"$done_dir/$name.json"
            rm -f "$instrumented"
            continue
          fi
          check_object "$object" "$instrumented" "$out/work/report.json" "$out/work/errors" "$seconds" \
            "$done_dir/$name.json" "$target" "$(cat "$out/work/peak")"
          rm -f "$instrumented"
        else
          cat "$out/work/errors" >&2
          python3 -c 'import json,sys; json.dump({"error": open(sys.argv[1]).read()}, open(sys.argv[2], "w"))' \
            "$out/work/errors" "$done_dir/$name.json"
        fi
      done
      summary "$example" "$library" "$target" || status=1
    done
  done
done
exit $status
