#!/usr/bin/env bash
# Round-trips every code object of the ROCm libraries an environment ships,
# for every processor each carries, and prints one Markdown table row per
# library and processor (code objects, kernels, instructions, identical,
# seconds). Run it inside an environment, for that environment's gpuinstr
# and libraries:
#
#   scripts/env.sh sid -- scripts/corpus-table.sh [LIBRARY...]
#
# LIBRARY defaults to the environment's own rocRAND, rocSPARSE and
# rocSOLVER shared libraries (PACKAGES="librocrand1 ..." names the Debian
# packages instead), downloaded (apt-get download, once) into
# ${CARGO_TARGET_DIR:-target}/corpus-table/packages. Exits 1 when any code
# object does not come back identical. Results are also kept as JSON in
# ${CARGO_TARGET_DIR:-target}/corpus-table/.
set -euo pipefail
cd "$(dirname "$0")/.."

link="$(command -v gpuinstr-link || true)"
if [ -z "$link" ]; then
  echo "corpus-table: no gpuinstr-link on PATH; run it inside scripts/env.sh ENV -- ..." >&2
  exit 2
fi
out="${CARGO_TARGET_DIR:-target}/corpus-table"
mkdir -p "$out/packages"
declare -A versions=()
if [ $# -gt 0 ]; then
  libraries=("$@")
else
  libraries=()
  # Package names differ between releases (librocsparse0 in trixie, 1 in
  # sid, which also still carries an old librocsparse0): the first of each
  # group the environment has.
  groups=(librocrand1 "librocsparse1 librocsparse0" librocsolver0)
  # PACKAGES="librocrand1 librocsparse0": only those.
  [ -n "${PACKAGES:-}" ] && read -r -a groups <<<"$PACKAGES"
  for group in "${groups[@]}"; do
    package=""
    for candidate in $group; do
      if apt-cache show "$candidate" >/dev/null 2>&1; then package="$candidate"; break; fi
    done
    [ -n "$package" ] || continue
    directory="$out/packages/$package"
    if [ ! -d "$directory" ]; then
      (cd "$out/packages" && apt-get download "$package" >/dev/null)
      mkdir -p "$directory.new"
      dpkg-deb -x "$out/packages/${package}"_*.deb "$directory.new"
      rm -f "$out/packages/${package}"_*.deb
      mv "$directory.new" "$directory"
    fi
    version=$(apt-cache show --no-all-versions "$package" | sed -n 's/^Version: //p' | head -1)
    for library in "$directory"/usr/lib/x86_64-linux-gnu/lib*.so.*.*; do
      if [ -f "$library" ] && [ ! -L "$library" ]; then
        libraries+=("$library")
        versions["$library"]="$version"
      fi
    done
  done
fi
status=0
echo "| environment | library | processor | code objects | kernels | instructions | identical | seconds |"
echo "|---|---|---|---:|---:|---:|---|---:|"
for library in "${libraries[@]}"; do
  name="$(basename "$library")"
  # The package's version, when the script downloaded it.
  [ -n "${versions[$library]:-}" ] && name="$name ${versions[$library]}"
  # Every processor the library carries, with its feature settings folded.
  processors=$("$link" inspect "$library" --json \
    | python3 -c 'import json,sys; print(" ".join(sorted({c["target"].split(":")[0] for c in json.load(sys.stdin)["code_objects"]})))')
  for processor in $processors; do
    json="$out/$(basename "$library")-$processor.json"
    case "$processor" in
      gfx6* | gfx7* | gfx8*)
        # Older than GFX9: outside what gpuinstr lifts (docs/toolchains.md).
        echo "| ${GPUINSTR_ENV:-?} | $name | $processor | not lifted: older than GFX9 | | | | |"
        continue ;;
    esac
    if ! "$link" roundtrip-corpus "$library" --target "$processor" --json >"$json" 2>"$json.err"; then
      status=1
    fi
    python3 - "$json" "${GPUINSTR_ENV:-?}" "$name" "$processor" <<'EOF'
import json, sys
path, environment, library, processor = sys.argv[1:]
try:
    report = json.load(open(path))
except Exception:
    print(f"| {environment} | {library} | {processor} | failed: {open(path + '.err').read().strip()[:200]} | | | | |")
    sys.exit(0)
functions = report["kernels"] + report["device_functions"]
identical = (
    "yes"
    if report["identical_code_objects"] == report["code_objects"] and report["different_functions"] == 0
    else f"{report['identical_code_objects']} of {report['code_objects']} code objects; "
    + "; ".join(f"{k}: {v['count']}" for k, v in report["failures"].items())
)
print(
    f"| {environment} | {library} | {processor} | {report['code_objects']} | {report['kernels']:,} "
    f"| {report['instructions']:,} | {identical} | {report['seconds']:.0f} |"
)
EOF
  done
done
exit $status
