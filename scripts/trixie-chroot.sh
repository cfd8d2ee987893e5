#!/usr/bin/env bash
# Builds a Debian 13 (trixie) chroot with its ROCm user space (hipcc 5.7,
# ROCr 6.1, rocminfo) and the prebuilt test suites of rocRAND, rocPRIM and
# rocSPARSE, for running them on the emulated GPU (docs/device.md). Root only
# (debootstrap, chroot); no container engine needed. Idempotent.
#   scripts/trixie-chroot.sh [DIR] [-- COMMAND...]     (default target/trixie)
# With a COMMAND, runs it inside on the emulated GPU, for instance
#   scripts/trixie-chroot.sh -- rocminfo
# /proc and /dev are mounted in a mount namespace of the run's own: they
# vanish with it (a bind mount of /dev left under target/ would let `cargo
# clean` delete the host's /dev), and runs side by side never unmount each
# other's.
set -euo pipefail
cd "$(dirname "$0")/.."

root="target/trixie"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then root="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
root="$(realpath -m "$root")"
if [ -z "${GPUINSTR_CHROOT_NAMESPACE:-}" ]; then
  GPUINSTR_CHROOT_NAMESPACE=1 exec unshare --mount --propagation private "$PWD/scripts/trixie-chroot.sh" "$root" -- "$@"
fi
packages=(rocminfo kmod hipcc librocrand1-tests librocprim-tests librocsparse0-tests)
if [ ! -e "$root/.debootstrap-done" ]; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
  debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian
  touch "$root/.debootstrap-done"
fi
# /proc for the programs inside (ROCr reads /proc/self/*), /dev for /dev/null and friends.
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
if [ ! -e "$root/.packages-done" ]; then
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}"
  touch "$root/.packages-done"
fi
# The device library, built here (Debian 12's glibc is older than trixie's, so it loads there).
cargo build --release -q -p gpuinstr-device-preload -p gpuinstr-device-kfd
mkdir -p "$root/gpuinstr/lib"
# A changed file is replaced by a new one, never rewritten in place: a
# program still running from the old one (another run in the chroot) would
# lose the relocated pages of its mapping (the kernel drops them on
# truncation) and crash far from the cause.
replace() {
  cmp -s "$1" "$2" && return 0
  cp -L "$1" "$2.new" && mv -f "$2.new" "$2"
}
replace target/release/libgpuinstr_device_preload.so "$root/gpuinstr/libgpuinstr_device_preload.so"
# The emulated GPU, which the preload loads from beside itself; its LLVM 15
# (the emulator decodes with it) and what that needs, from this system: run
# with LD_LIBRARY_PATH=/gpuinstr/lib.
replace target/release/libgpuinstr_device_kfd.so "$root/gpuinstr/libgpuinstr_device_kfd.so"
ldd target/release/libgpuinstr_device_kfd.so | awk '$3 ~ /^\// {print $3}' \
  | grep -v -e '/libc.so' -e '/libm.so' -e '/libstdc++' -e '/libgcc_s' \
  | while read -r library; do replace "$library" "$root/gpuinstr/lib/$(basename "$library")"; done
if [ $# -gt 0 ]; then
  chroot "$root" env LD_LIBRARY_PATH=/gpuinstr/lib LD_PRELOAD=/gpuinstr/libgpuinstr_device_preload.so \
    GPUINSTR_DEVICE_TARGET="${TARGET:-gfx90a}" HSA_ENABLE_SDMA=0 "$@"
else
  echo "$root"
fi
