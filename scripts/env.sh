#!/usr/bin/env bash
# One environment per toolchain gpuinstr supports, built and entered alike:
#
#   scripts/env.sh {bookworm|trixie|sid|experimental} [--no-build] [-- COMMAND...]
#
#   bookworm      Debian 12 itself: hipcc 5.2, LLVM 15, CoMGR 2, ROCr 5.2
#   trixie        Debian 13 chroot: hipcc 5.7, LLVM 17, CoMGR 2, ROCr 6.1
#   sid           Debian sid chroot: hipcc 7.0 (HIP 6.4), LLVM 21, CoMGR 3, ROCr 6.4
#   experimental  Debian sid chroot with ROCm 7.2 from Debian experimental:
#                 hipcc 7.2 (HIP 7.2), LLVM 22, CoMGR 3, ROCr 7.2
#
# It builds the environment (the host's packages for bookworm; a debootstrap
# chroot under target/env/NAME/root for the others, no container engine),
# builds gpuinstr there against that environment's LLVM (release, into
# target/env/NAME/cargo, or target/ for bookworm) and runs COMMAND inside it,
# in the caller's working directory (the repository is bind-mounted at the
# same path), with that build's gpuinstr-link, gpuinstr-run and
# gpuinstr-emulate first on PATH and GPUINSTR_PLUGIN naming the plugin built
# for that environment's hipcc. Inside, GPUINSTR_ENV names the environment
# and GPUINSTR_CARGO_FEATURES holds the Cargo flags that choose its LLVM, so
# `scripts/env.sh sid -- scripts/test.sh` runs the whole suite there.
# Without COMMAND it prints the environment's root (/ for bookworm).
#
# Chroots need root (debootstrap, chroot, unshare); /proc and /dev are
# mounted in a mount namespace of the run's own, so they vanish with it
# and runs side by side never unmount each other's. Idempotent: a second
# call only builds what changed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

usage() {
  echo "usage: scripts/env.sh {bookworm|trixie|sid|experimental} [--no-build] [-- COMMAND...]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
name="$1"
shift
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0; shift ;;
    --) shift; break ;;
    *) usage ;;
  esac
done

# Each environment's LLVM major, Debian suite and packages.
common=(hipcc rocminfo rocm-smi kmod cmake g++ make pkg-config ca-certificates libhsa-runtime-dev
  libamd-comgr-dev librocrand-dev librocsparse-dev librocprim-dev
  zlib1g-dev libzstd-dev  # what LLVM's static archives link with (the opcode table generator)
  chromium)  # what renders the run's page in the whole suite's test of it (docs/runtime.md, "The page")
# suite: what debootstrap installs; from: the suite apt prefers (Debian's
# experimental holds ROCm 7.2, built with sid's LLVM 22).
suite="$name"
from=""
case "$name" in
  bookworm) llvm=15 ;;
  trixie) llvm=17; packages=("${common[@]}" clang-17 llvm-17-dev lld-17) ;;
  sid) llvm=21; packages=("${common[@]}" clang-21 llvm-21-dev lld-21 amd-smi) ;;
  experimental) llvm=22; suite=sid; from=experimental; packages=("${common[@]}" clang-22 llvm-22-dev lld-22 amd-smi) ;;
  *) echo "scripts/env.sh: unknown environment '$name' (bookworm, trixie, sid or experimental)" >&2; exit 2 ;;
esac
features="--no-default-features --features llvm$llvm"
[ "$llvm" = 15 ] && features=""

# The build every environment gets: the tools on PATH and the plugin.
build_gpuinstr() {
  # shellcheck disable=SC2086
  cargo build --release -q $features -p gpuinstr-llvm-plugin -p gpuinstr-driver -p gpuinstr-emulator \
    -p gpuinstr-device-preload -p gpuinstr-device-kfd -p gpuinstr-runtime
}

if [ "$name" = bookworm ]; then
  "$repo/scripts/setup.sh" >/dev/null
  target_dir="$(realpath -m "${CARGO_TARGET_DIR:-$repo/target}")"
  [ "$build" = 1 ] && (cd "$repo" && build_gpuinstr)
  if [ $# -eq 0 ]; then echo /; exit 0; fi
  export GPUINSTR_ENV=bookworm GPUINSTR_CARGO_FEATURES="" GPUINSTR_PLUGIN="$target_dir/release/libembed.so" LLVM_BINDIR=/usr/lib/llvm-15/bin
  export PATH="$target_dir/release:$PATH"
  exec "$@"
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/env.sh: the $name environment is a chroot: run as root (debootstrap, chroot, unshare)" >&2
  exit 1
fi
base="$repo/target/env/$name"
root="$base/root"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"

# Inside our own mount namespace from here on.
if [ -z "${GPUINSTR_ENV_NAMESPACE:-}" ]; then
  mkdir -p "$base"
  args=("$name")
  [ "$build" = 0 ] && args+=(--no-build)
  GPUINSTR_ENV_NAMESPACE=1 exec unshare --mount --propagation private "$repo/scripts/env.sh" "${args[@]}" -- "$@"
fi

# One run at a time builds the chroot; the others wait for it.
exec 9>"$base/lock"
flock 9
if [ ! -e "$root/.debootstrap-done" ]; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
  rm -rf "$root"
  echo "env $name: debootstrap (a few minutes)" >&2
  debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$suite" "$root" http://deb.debian.org/debian >"$base/debootstrap.log" 2>&1 \
    || { echo "env $name: debootstrap failed; see $base/debootstrap.log" >&2; exit 1; }
  touch "$root/.debootstrap-done"
fi
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
# sysfs, read-only, as a machine has it: amd-smi reads the host's PCI
# devices and modules beside the emulated board's files.
mount -t sysfs -o ro sysfs "$root/sys"
# Debian 12's packages too, never installed (priority 1), only downloaded:
# the tests' pinned corpus is Debian 12's rocRAND and rocSPARSE in every
# environment (tests/src/lib.rs: debian_package_file).
if [ ! -e "$root/etc/apt/preferences.d/bookworm" ]; then
  echo "deb http://deb.debian.org/debian bookworm main" >"$root/etc/apt/sources.list.d/bookworm.list"
  printf 'Package: *\nPin: release n=bookworm\nPin-Priority: 1\n' >"$root/etc/apt/preferences.d/bookworm"
  rm -f "$root/.packages"
fi
# A suite packages come from first (experimental's ROCm over sid's).
if [ -n "$from" ] && [ ! -e "$root/etc/apt/sources.list.d/$from.list" ]; then
  echo "deb http://deb.debian.org/debian $from main" >"$root/etc/apt/sources.list.d/$from.list"
  rm -f "$root/.packages"
fi
# The package lists this script asks for: a changed list installs again.
wanted="${packages[*]}"
if [ "$(cat "$root/.packages" 2>/dev/null)" != "$wanted" ]; then
  echo "env $name: installing ${packages[*]}" >&2
  # sid's Release files may look expired by this machine's clock.
  # The caller's TMPDIR may not exist inside the chroot (maintainer scripts use it).
  apt=(env -u TMPDIR DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false)
  install=(install -y -q --no-install-recommends)
  [ -n "$from" ] && install+=(-t "$from")
  { chroot "$root" "${apt[@]}" update -q && chroot "$root" "${apt[@]}" "${install[@]}" "${packages[@]}"; } \
    >"$base/packages.log" 2>&1 || { echo "env $name: apt-get failed; see $base/packages.log" >&2; exit 1; }
  echo "$wanted" >"$root/.packages"
fi
# The repository at the same path, and this machine's Rust toolchain.
for directory in "$repo" "$cargo_home" "$rustup_home"; do
  mkdir -p "$root$directory"
  mount --bind "$directory" "$root$directory"
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# Certificate authorities this machine adds (a proxy's, say), for cargo inside.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null \
  && ! diff -rq /usr/local/share/ca-certificates "$root/usr/local/share/ca-certificates" >/dev/null 2>&1; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" env -u TMPDIR update-ca-certificates >/dev/null 2>&1
fi

target_dir="$base/cargo"
# The commit the tree is at (the chroots have no git), for scripts that
# record what they measured.
commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet HEAD 2>/dev/null || echo +changes)"
inside=(env -i HOME=/root PATH="$target_dir/release:$cargo_home/bin:/usr/local/bin:/usr/bin:/bin"
  CARGO_HOME="$cargo_home" RUSTUP_HOME="$rustup_home" CARGO_TARGET_DIR="$target_dir"
  TERM="${TERM:-dumb}" LANG=C.UTF-8 GPUINSTR_ENV="$name" GPUINSTR_CARGO_FEATURES="$features" GPUINSTR_COMMIT="$commit"
  GPUINSTR_PLUGIN="$target_dir/release/libembed.so" LLVM_BINDIR="/usr/lib/llvm-$llvm/bin" CI="${CI:-}" INSTA_UPDATE="${INSTA_UPDATE:-}")
if [ "$build" = 1 ]; then
  # shellcheck disable=SC2016
  chroot "$root" "${inside[@]}" bash -c "cd '$repo' && $(declare -f build_gpuinstr); features='$features'; build_gpuinstr"
fi
flock -u 9
if [ $# -eq 0 ]; then echo "$root"; exit 0; fi
exec chroot "$root" "${inside[@]}" bash -c 'cd "$1" && shift && exec "$@"' env "$PWD" "$@"
