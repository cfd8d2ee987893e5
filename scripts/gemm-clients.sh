#!/usr/bin/env bash
# The GEMM libraries' own benchmark clients, with their validation against
# the CPU, on the emulated MI210 (docs/device.md): sid's hipblaslt-bench
# (hipBLASLt 7.1) and rocblas-bench (rocBLAS 6.4) for 64^3 products in f16,
# bf16 and f32, with hpl and integer inputs (integer products are exact, so
# any error shows). Both clients exit 0 when validation fails: each case
# is judged here from the error and tolerance columns they print. Then
# rocBLAS's own test program, rocblas-test, runs its named set
# (scripts/device-suites/rocblas-gfx90a.txt: 414 quick cases, two of every
# test suite's and each gemm_ex type combination), every one to pass.
#   scripts/env.sh sid -- scripts/gemm-clients.sh
# (installs the clients into the sid environment; about 3 minutes.)
set -euo pipefail
if [ "${GPUINSTR_ENV:-}" != sid ]; then
  echo "scripts/gemm-clients.sh: run it in sid's environment: scripts/env.sh sid -- scripts/gemm-clients.sh" >&2
  exit 2
fi
hipblaslt=/usr/libexec/rocm/libhipblaslt1-bench/hipblaslt-bench
rocblas=/usr/libexec/rocm/librocblas4-bench/rocblas-bench
rocblas_test=/usr/libexec/rocm/librocblas4-tests/rocblas-test
if [ ! -x "$hipblaslt" ] || [ ! -x "$rocblas" ] || [ ! -x "$rocblas_test" ]; then
  env -u TMPDIR DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false install -y -q \
    --no-install-recommends libhipblaslt1-bench librocblas4-bench librocblas4-tests >/dev/null
fi
named_set="$(cd "$(dirname "$0")" && pwd)/device-suites/rocblas-gfx90a.txt"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
# One case: a client's command line; the last CSV line's columns name
# what it measured (hipblaslt-bench: norm_error, atol, rtol, with `failed`
# in the tolerances when validation fails; rocblas-bench: norm_error_1).
run_case() { # name command...
  local name=$1
  shift
  rm -f /dev/shm/rocm_smi*
  if ! timeout 900 gpuinstr-run -- "$@" >"$out/stdout" 2>"$out/stderr"; then
    echo "FAIL $name: the client stopped: $(tail -1 "$out/stderr")"
    failed=1
    return
  fi
  local header values
  header=$(grep -E 'norm_error' "$out/stdout" | tail -1 | sed 's/^\[[0-9]*\]://')
  values=$(tail -1 "$out/stdout")
  python3 - "$name" "$header" "$values" <<'EOF' || failed=1
import sys
name, header, values = sys.argv[1:]
columns = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in values.split(",")]))
error = columns.get("norm_error", columns.get("norm_error_1"))
if error is None:
    print(f"FAIL {name}: no validation in its output")
    sys.exit(1)
tolerances = [columns[k] for k in ("atol", "rtol") if k in columns]
if "failed" in tolerances:
    print(f"FAIL {name}: norm error {error}, validation failed")
    sys.exit(1)
# hipblaslt-bench's own verdict is the `failed` above (it takes the
# larger tolerance); rocblas-bench gives none, and integer inputs are exact.
limit = max(float(t) for t in tolerances) if tolerances else 0.0
if float(error) > limit:
    print(f"FAIL {name}: norm error {error} over {limit}")
    sys.exit(1)
print(f"pass {name}: norm error {error}")
EOF
}
size=(-m 64 -n 64 -k 64)
for precision in f16_r bf16_r f32_r; do
  for init in hpl rand_int; do
    run_case "hipblaslt-bench $precision $init" "$hipblaslt" "${size[@]}" --precision "$precision" -v -i 1 -j 0 \
      --initialization "$init"
  done
  run_case "rocblas-bench gemm_ex $precision rand_int" "$rocblas" -f gemm_ex "${size[@]}" --a_type "$precision" \
    --b_type "$precision" --c_type "$precision" --d_type "$precision" --compute_type f32_r -v 1 -i 1 -j 0 \
    --initialization rand_int
done
# rocblas-test's named set, in one process (its test data takes seconds
# to read at every start).
mapfile -t cases < <(grep -v '^#' "$named_set" | awk '{print $2}')
filter=$(IFS=:; echo "${cases[*]}")
rm -f /dev/shm/rocm_smi*
timeout 1800 gpuinstr-run -- "$rocblas_test" --gtest_color=no --gtest_filter="$filter" >"$out/stdout" 2>"$out/stderr" || true
passed=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$out/stdout" | tail -1 | awk '{print $4}')
if [ "${passed:-0}" = "${#cases[@]}" ]; then
  echo "pass rocblas-test: ${passed} of ${#cases[@]} named cases"
else
  echo "FAIL rocblas-test: ${passed:-0} of ${#cases[@]} named cases passed"
  grep -E '^\[  FAILED  \]' "$out/stdout" | head -20
  tail -3 "$out/stderr"
  failed=1
fi
exit $failed
