#!/usr/bin/env bash
# Builds the opcode table generator against LLVM 15's static archives and
# regenerates driver/data/opcodes-<target>.tsv. Usage: build.sh [output dir]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../data}"
config=/usr/lib/llvm-15/bin/llvm-config
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2046
c++ "$here/generate.cpp" -o "$work/generate" \
  $($config --cxxflags) -std=c++17 -O1 \
  $($config --link-static --ldflags --libs amdgpuutils amdgpudesc amdgpuinfo mc support) \
  $($config --link-static --system-libs)
mkdir -p "$out"
for target in gfx908 gfx90a; do
  "$work/generate" "$target" > "$out/opcodes-$target.tsv"
done
