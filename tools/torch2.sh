#!/usr/bin/env bash
# Builds Kiln against LibTorch 2.x and runs the test suite there, on this CPU machine.
# Debian 12 ships LibTorch 1.13; Debian 13 (trixie) ships 2.6, which has what 1.13 lacks and the
# GPU build relies on: scaled_dot_product_attention, the fused AdamW kernel (CPU since 2.4), the
# device-type autocast API, pointer-keyed optimizer state, TCPStore's libuv default. This puts a
# minimal trixie in a chroot (debootstrap, ~1.5 GB, made once), mounts the source tree in it at
# /kiln and builds into build-torch2/. Needs root.
#   tools/torch2.sh                 # build, then every test
#   tools/torch2.sh -R Optimizer    # build, then the tests ctest -R selects
#   tools/torch2.sh --if-possible   # as CI: where no chroot can be made (not root, no mounts,
#                                   # no Debian 13 mirror) say so and succeed; failures to build
#                                   # or test still fail
#   tools/torch2.sh --run 'CMD'     # build, then run CMD in /kiln instead of the tests; adds
#                                   # python3-torch 2.6 for tools/bench/pytorch_reference.py
# KILN_TORCH2_ROOT picks the chroot's folder (default /var/cache/kiln/trixie).
set -euo pipefail
cd "$(dirname "$0")/.."
root=${KILN_TORCH2_ROOT:-/var/cache/kiln/trixie}
optional=false
[[ "${1:-}" == "--if-possible" ]] && { optional=true; shift; }
run_command=""
[[ "${1:-}" == "--run" ]] && { run_command=${2:?usage: tools/torch2.sh --run 'COMMAND'}; shift 2; }
cannot() {
  if $optional; then echo "torch2: skipped: $1"; exit 0; fi
  echo "torch2: error: $1" >&2
  exit 2
}
[[ $(id -u) -eq 0 ]] || cannot "needs root (debootstrap, chroot, mount)"

packages=(build-essential cmake ninja-build libtorch-dev libgloo-dev libopenblas0-openmp
          libtomlplusplus-dev libfmt-dev libsqlite3-dev libcli11-dev nlohmann-json3-dev
          googletest libgtest-dev libgmock-dev libxxhash-dev libpcre2-dev pkgconf sqlite3
          librsvg2-bin)
version_h=$root/usr/include/torch/csrc/api/include/torch/version.h
marker=$root/.made-by-kiln-torch2  # what may be deleted and made anew: only a chroot of ours
if [[ ! -f "$version_h" ]]; then
  if [[ -n "$(ls -A "$root" 2>/dev/null)" && ! -f "$marker" ]]; then
    cannot "$root is not empty and was not made by tools/torch2.sh: set KILN_TORCH2_ROOT to a new folder"
  fi
  command -v debootstrap >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap ||
    cannot "debootstrap is not installed and apt-get could not install it"
  echo "torch2: making a Debian 13 chroot with LibTorch 2.x in $root"
  rm -rf "$root" && mkdir -p "$root" && touch "$marker"  # a half-made one is made anew
  debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian >/dev/null ||
    cannot "debootstrap of Debian 13 into $root failed (is deb.debian.org reachable?)"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  { chroot "$root" apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive chroot "$root" \
      apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null; } ||
    cannot "installing LibTorch 2.x and the build's packages in $root failed"
fi

# The PyTorch reference's needs: torch, numpy, and for torch.compile's C++ kernels setuptools
# and the Python headers.
if [[ -n "$run_command" && ! -d "$root/usr/lib/python3/dist-packages/torch" ]]; then
  echo "torch2: adding python3-torch 2.6 to $root for the PyTorch reference"
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends \
    python3-torch python3-numpy python3-setuptools python3-dev >/dev/null 2>&1 ||
    { echo "torch2: error: installing python3-torch in $root failed" >&2; exit 1; }
fi

mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() {
  mkdir -p "$root$2"
  mount --rbind "$1" "$root$2"
  mounts+=("$root$2")
}
mkdir -p "$root/proc"
mount --bind /proc "$root/proc" 2>/dev/null || cannot "this machine does not allow bind mounts"
mounts+=("$root/proc")
bind /dev /dev  # /dev/shm included: Gloo's ranks share memory through it
bind "$PWD" /kiln

echo "torch2: LibTorch $(awk '/define TORCH_VERSION_(MAJOR|MINOR|PATCH)/ {printf "%s%s", sep, $3; sep="."}' "$version_h")"
then=${run_command:-ctest --test-dir build-torch2 --output-on-failure -j $(nproc) ${*@Q}}
chroot "$root" bash -c "cd /kiln &&
  cmake -S . -B build-torch2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON >/dev/null &&
  cmake --build build-torch2 -j $(nproc) && $then"
