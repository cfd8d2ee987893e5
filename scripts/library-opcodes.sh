#!/usr/bin/env bash
# The opcodes of sid's GEMM libraries the emulator has no semantics for:
# every gfx90a and gfx908 code object in the library directories of
# rocBLAS and hipBLASLt (installed by scripts/env.sh sid) and in
# librocblas.so's own fat binary, each file through
# `gpuinstr-emulate --unimplemented` (a fat binary's code objects summed); prints per code object its line and
# then the missing opcodes with how often they occur, summed per processor.
#   scripts/env.sh sid -- scripts/library-opcodes.sh [OUT_DIR]
# (about 15 minutes; docs/emulator.md has the last result).
set -euo pipefail
out=$(realpath -m "${1:-target/library-opcodes}")
mkdir -p "$out"
rm -f "$out/files.txt" "$out/missing.txt"
touch "$out/missing.txt"
cd /usr/lib/x86_64-linux-gnu
for target in gfx90a gfx908; do
  for file in rocblas/*/library/*"$target"*.co rocblas/*/library/*"$target"*.hsaco \
              hipblaslt/library/*"$target"*.co hipblaslt/library/*"$target"*.hsaco librocblas.so.?; do
    [ -e "$file" ] || continue
    if gpuinstr-emulate "$file" --target "$target" --unimplemented > "$out/one.txt" 2> "$out/one.err"; then
      echo "$target $file $(head -1 "$out/one.txt")" >> "$out/files.txt"
      tail -n +2 "$out/one.txt" | sed "s/^/$target /" >> "$out/missing.txt"
    else
      echo "$target $file not read: $(head -1 "$out/one.err")" >> "$out/files.txt"
    fi
  done
done
rm -f "$out/one.txt" "$out/one.err"
echo "$(wc -l < "$out/files.txt") code objects ($out/files.txt); missing opcodes (count, processor, opcode):"
awk '{count[$1 " " $3] += $2} END {for (k in count) print count[k], k}' "$out/missing.txt" | sort -rn
