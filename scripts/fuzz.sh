#!/usr/bin/env bash
# Mutation fuzzing of every gpuinstr reader and subcommand (docs/fuzzing.md).
#   scripts/fuzz.sh [CASES] [KIND...]
# CASES per kind (default 10000), kinds: code-object bundle host-object
# host-library metadata-note plan tool database cache-entry (default all).
# START=N begins at case N (cases are deterministic: case N of a kind is
# always the same input).
# Inputs that found something are kept in target/fuzz/crashes/KIND/; once
# fixed, copy them to fuzz/regressions/KIND/ so the test suite replays them.
# Exits 1 when anything was found.
set -euo pipefail
cd "$(dirname "$0")/.."

cases="${1:-10000}"
shift || true
scripts/setup.sh >/dev/null
# gpuinstr-report too: database cases run it beside gpuinstr-link.
cargo build --release -q -p gpuinstr-driver -p gpuinstr-report -p gpuinstr-fuzz
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
fuzz="$target_dir/release/gpuinstr-fuzz"
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(code-object bundle host-object host-library metadata-note plan tool database cache-entry)
status=0
for kind in "${kinds[@]}"; do
  "$fuzz" run --kind "$kind" --cases "$cases" --start "${START:-0}" --crashes "$target_dir/fuzz/crashes" \
    --link "$target_dir/release/gpuinstr-link" || status=1
done
exit $status
