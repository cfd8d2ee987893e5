#!/usr/bin/env bash
# Installs the system packages gpuinstr builds and tests with (Debian 12).
# Idempotent: installs only what is missing. Everything is LLVM 15: hipcc
# 5.2.3 wraps clang-15 and CoMGR 5.2.3 is built on LLVM 15.
set -euo pipefail

packages=(
  hipcc              # the HIP compiler driver tool authors use (clang-15 underneath)
  clang-15 llvm-15 lld-15
  llvm-15-dev        # headers and libLLVM-15 for the plugin and the driver
  libamd-comgr-dev   # CoMGR: code object linking and metadata
  rocm-device-libs   # device libraries hipcc links into device code
  cmake              # the CMake integration (cmake/) and its test
  rocminfo kmod      # the emulated GPU's test: rocminfo (ROCr 5.2) lists it; it runs lsmod first
  rocm-smi           # ROCm SMI 5.2 lists the emulated board (its DRM card in sysfs)
  librocrand-dev librocsparse-dev librocprim-dev  # library code the emulated GPU runs through its public APIs
)

# Without its recommends (they bring systemd and audio daemons): what
# renders the run's page in the tests (docs/runtime.md, "The page").
lean_packages=(chromium)

missing=()
lean_missing=()
for package in "${lean_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    lean_missing+=("$package")
  fi
done
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ] && [ ${#lean_missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]} ${lean_missing[*]}"
$sudo apt-get update -q
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi
if [ ${#lean_missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${lean_missing[@]}"
fi
