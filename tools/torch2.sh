#!/usr/bin/env bash
# Builds Kiln against LibTorch 2.x and runs the test suite there, on this CPU machine.
# Debian 12 ships LibTorch 1.13; Debian 13 (trixie) ships 2.6, which has what 1.13 lacks and the
# GPU build relies on: scaled_dot_product_attention, the fused AdamW kernel (CPU since 2.4), the
# device-type autocast API, pointer-keyed optimizer state, TCPStore's libuv default. This puts a
# minimal trixie in a chroot (debootstrap, made once), mounts the source tree in it at /kiln and
# builds there. Needs root.
#   tools/torch2.sh                 # LibTorch 2.6 for the CPU (~1.5 GB chroot): build, every test
#   tools/torch2.sh --cuda -L unit  # LibTorch 2.6 built with CUDA 12.4 and NCCL (~11 GB chroot):
#                                   # -DKILN_CUDA=ON, every target but the servers' tests; the
#                                   # tests ctest's arguments select (on the CPU: no GPU here)
#   tools/torch2.sh --sid -L unit   # Debian sid's LibTorch 2.14 (CPU, ~1.6 GB chroot), the newest
#                                   # API; builds kiln_unit_tests only (CI's time: the other
#                                   # test binaries test Kiln, not the LibTorch API)
#   tools/torch2.sh -R Optimizer    # build, then the tests ctest -R selects
#   tools/torch2.sh --if-possible   # where no chroot can be made (not root, no mounts, no mirror)
#                                   # say so and succeed, except on CI (CI=true), where a build
#                                   # that cannot be made fails the run; failures to build or
#                                   # test always fail
#   tools/torch2.sh --run 'CMD'     # build kiln and kiln_bench optimized (in
#                                   # build-torch2[-cuda|-sid]), then run CMD in /kiln instead
#                                   # of the tests; adds python3-torch for
#                                   # tools/bench/pytorch_reference.py and libbenchmark-dev
#   tools/torch2.sh --prepare       # only make the chroot (if missing) and exit
# The chroot's packages come from the Debian mirror this machine's apt uses (KILN_DEBIAN_MIRROR
# overrides it), through apt's proxy if it has one. Compiles go through ccache, its cache in
# /var/cache/kiln/ccache, so a rerun that changed few sources rebuilds only those.
# KILN_TORCH2_ROOT picks the chroot's folder (default /var/cache/kiln/trixie[-cuda]).
set -euo pipefail
cd "$(dirname "$0")/.."
optional=false run_command="" flavour=cpu prepare_only=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --if-possible) optional=true; shift ;;
    --cuda) flavour=cuda; shift ;;
    --sid) flavour=sid; shift ;;
    --prepare) prepare_only=true; shift ;;
    --run) run_command=${2:?usage: tools/torch2.sh --run 'COMMAND'}; shift 2 ;;
    *) break ;;
  esac
done
suffix=${flavour/cpu/}
release=trixie
[[ $flavour == sid ]] && release=sid
root=${KILN_TORCH2_ROOT:-/var/cache/kiln/trixie${suffix:+-$suffix}}
[[ $flavour == sid ]] && root=${KILN_TORCH2_ROOT:-/var/cache/kiln/sid}
build_dir=build-torch2${suffix:+-$suffix}
cache=/var/cache/kiln/ccache
cannot() {
  if $optional && [[ "${CI:-}" != "true" ]]; then echo "torch2: skipped: $1"; exit 0; fi
  echo "torch2: error: $1" >&2
  exit 2
}
[[ $(id -u) -eq 0 ]] || cannot "needs root (debootstrap, chroot, mount)"

packages=(build-essential cmake ninja-build ccache libtomlplusplus-dev libfmt-dev libsqlite3-dev
          libcli11-dev nlohmann-json3-dev googletest libgtest-dev libgmock-dev libxxhash-dev
          libpcre2-dev libutf8proc-dev pkgconf sqlite3 librsvg2-bin libopenblas0-openmp qemu-user
          libpq-dev libcpp-httplib-dev libboost-dev libssl-dev uuid-dev)
components=main
targets=""  # every target
if [[ $flavour == sid ]]; then
  packages=(build-essential cmake ninja-build ccache libtomlplusplus-dev libfmt-dev libsqlite3-dev
            libcli11-dev nlohmann-json3-dev googletest libgtest-dev libgmock-dev libpcre2-dev
            libxxhash-dev libutf8proc-dev pkgconf libpq-dev libcpp-httplib-dev libopenblas0-openmp
            libtorch-dev libgloo-dev libboost-dev libssl-dev uuid-dev)
  # The unit tests and all they link (core/, plugins/): the CLI (tools/kiln/) is compiled
  # against 2.x in the --cuda build.
  targets="--target kiln_unit_tests"
elif [[ $flavour == cuda ]]; then
  # contrib: libtorch-cuda-dev; non-free: the CUDA 12.4 toolkit and runtime, NCCL.
  components="main contrib non-free"
  packages+=(libtorch-cuda-dev libgloo-cuda-dev libnccl-dev nvidia-cuda-toolkit)
  # The binary and the end-to-end tests: the unit tests' sources are compiled against 2.x in the
  # --sid build, the servers' tests test Kiln's use of PostgreSQL, Slurm and Chromium.
  targets="--target kiln kiln_e2e_tests"
else
  packages+=(libtorch-dev libgloo-dev)
fi

# The URI of the first Debian archive in this machine's apt sources (deb822 or one-line form)
# that serves this release's main suite, so the chroot uses the same mirror (or proxy path).
host_mirror() {
  local codename
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  {
    awk -v want="$codename" 'BEGIN { RS = ""; FS = "\n" }
      { uris = ""; suites = ""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
          if ($i ~ /^Suites:/) { suites = " " $i " " }
        }
        split(uris, u, /[ \t]+/)
        if (u[1] != "" && suites ~ (" " want " ")) print u[1] }' \
      /etc/apt/sources.list.d/*.sources 2>/dev/null || true
    awk -v want="$codename" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++
      if ($2 ~ /^\[/) i++; if ($(i + 1) == want) print $i }' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true
  } | head -n 1
}
mirror=${KILN_DEBIAN_MIRROR:-$(host_mirror)}
[[ -n "$mirror" ]] || cannot "no Debian mirror in /etc/apt/sources.list*: set KILN_DEBIAN_MIRROR"
proxy=$(apt-config shell P Acquire::http::Proxy 2>/dev/null | sed -n "s/^P='\(.*\)'$/\1/p")
[[ -n "$proxy" ]] && export http_proxy=$proxy

# cuDNN: libtorch-cuda-2.6 depends on Debian's nvidia-cudnn, whose installer downloads cuDNN
# from NVIDIA and cannot work offline. The chroot gets a local package of that name instead,
# holding the cuDNN 9 loader library of this machine's CUDA toolkit (libcudnn.so.9, which loads
# its kernels lazily: nothing of it runs without a GPU).
cudnn_package() {
  local found staging=$root/tmp/kiln-cudnn
  found=$(ls /usr/local/cuda/lib64/libcudnn.so.9 /usr/lib/x86_64-linux-gnu/libcudnn.so.9 \
    2>/dev/null | head -n 1)
  [[ -n "$found" ]] || return 1
  rm -rf "$staging" && mkdir -p "$staging/DEBIAN" "$staging/usr/lib/x86_64-linux-gnu"
  cp -L "$found" "$staging/usr/lib/x86_64-linux-gnu/libcudnn.so.9"
  cat >"$staging/DEBIAN/control" <<EOF
Package: nvidia-cudnn
Version: 9.99~kiln
Architecture: amd64
Maintainer: Kiln <kiln@localhost>
Description: cuDNN 9 loader from the host's CUDA toolkit ($found), for Kiln's build chroot
EOF
  dpkg-deb --build "$staging" "$root/tmp/nvidia-cudnn-kiln.deb" >/dev/null &&
    chroot "$root" dpkg -i /tmp/nvidia-cudnn-kiln.deb >/dev/null
}

version_h=$root/usr/include/torch/csrc/api/include/torch/version.h
marker=$root/.made-by-kiln-torch2  # what may be deleted and made anew: only a chroot of ours
if [[ ! -f "$version_h" ]]; then
  if [[ -n "$(ls -A "$root" 2>/dev/null)" && ! -f "$marker" ]]; then
    cannot "$root is not empty and was not made by tools/torch2.sh: set KILN_TORCH2_ROOT to a new folder"
  fi
  command -v debootstrap >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap ||
    cannot "debootstrap is not installed and apt-get could not install it"
  echo "torch2: making a Debian $release chroot with LibTorch 2.x ($flavour) in $root from $mirror"
  rm -rf "$root" && mkdir -p "$root" && touch "$marker"  # a half-made one is made anew
  debootstrap --variant=minbase --components="${components// /,}" "$release" "$root" "$mirror" \
    >/dev/null || cannot "debootstrap of Debian $release into $root from $mirror failed"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  [[ -n "$proxy" ]] && echo "Acquire::http::Proxy \"$proxy\";" >"$root/etc/apt/apt.conf.d/90proxy"
  echo "deb $mirror $release $components" >"$root/etc/apt/sources.list"
  # sid's Release file carries a Valid-Until that a snapshot mirror may have passed.
  [[ $flavour == sid ]] && echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/90kiln-sid"
  chroot "$root" apt-get update -qq || cannot "apt-get update in $root failed"
  if [[ $flavour == cuda ]]; then
    cudnn_package || cannot "no cuDNN 9 (libcudnn.so.9) under /usr/local/cuda/lib64 for the chroot"
  fi
  DEBIAN_FRONTEND=noninteractive chroot "$root" \
    apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null ||
    cannot "installing LibTorch 2.x ($flavour) and the build's packages in $root failed"
fi

# A chroot made by an earlier version of this script may lack packages added to the list since.
missing=()
for p in "${packages[@]}"; do
  chroot "$root" dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "torch2: adding ${missing[*]} to $root"
  { chroot "$root" apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive chroot "$root" \
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } ||
    cannot "installing ${missing[*]} in $root failed"
fi

$prepare_only && { echo "torch2: $root is ready"; exit 0; }

# The PyTorch reference's needs: torch, numpy, and for torch.compile's C++ kernels setuptools
# and the Python headers.
# And Google Benchmark's headers for kiln_bench (tools/bench/hot_paths_bench.cpp).
if [[ -n "$run_command" && ( ! -d "$root/usr/lib/python3/dist-packages/torch" ||
      ! -d "$root/usr/include/benchmark" ) ]]; then
  echo "torch2: adding python3-torch and libbenchmark-dev to $root for the benchmarks"
  python_torch=python3-torch
  [[ $flavour == cuda ]] && python_torch=python3-torch-cuda
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends \
    "$python_torch" python3-numpy python3-setuptools python3-dev libbenchmark-dev >/dev/null 2>&1 ||
    { echo "torch2: error: installing python3-torch and libbenchmark-dev in $root failed" >&2; exit 1; }
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
mkdir -p "$cache"
bind "$cache" /ccache

# 2.9 on moved the numbers to torch/headeronly/version.h, which the old header includes.
version_numbers=$version_h
[[ -f $root/usr/include/torch/headeronly/version.h ]] &&
  version_numbers=$root/usr/include/torch/headeronly/version.h
torch_version=$(awk '/define TORCH_VERSION_(MAJOR|MINOR|PATCH)/ {printf "%s%s", sep, $3; sep="."}' \
  "$version_numbers")
what="LibTorch $torch_version"
[[ $flavour == cuda ]] && what+=" with CUDA $(chroot "$root" dpkg-query -W -f='${Version}' \
  libcudart12 | sed 's/.*~//;s/-.*//') and NCCL $(chroot "$root" dpkg-query -W -f='${Version}' \
  libnccl2 | sed 's/-.*//')"
echo "torch2: $what"
cmake_flags="-DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
# For the tests, unoptimized (with NDEBUG, as Release): they prove the sources compile, link and
# pass against 2.x, which optimizing does not change, and GCC's optimizer and code generation
# took 62% of a translation unit's time (-ftime-report, core/train/session.cpp), CI's largest
# share on 2 cores. --run (benchmarks) builds optimized, in a folder of its own.
if [[ -z "$run_command" ]]; then
  build_dir+=-O0
  cmake_flags+=" -DCMAKE_CXX_FLAGS_RELEASE='-O0 -DNDEBUG'"
else
  # What --run's commands run: benchmarks, not tests.
  targets="--target kiln kiln_bench"
  cmake_flags+=" -DKILN_BUILD_BENCH=ON"
fi
[[ $flavour == cuda ]] && cmake_flags+=" -DKILN_CUDA=ON"
# PCH with ccache: GCC must see the precompiled header through -fpch-preprocess, and ccache must
# accept a header whose defines and timestamps it cannot hash.
chroot "$root" bash -c "cd /kiln && export CCACHE_DIR=/ccache CCACHE_MAXSIZE=4G \
  CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime &&
  ccache -z >/dev/null &&
  cmake -S . -B $build_dir -G Ninja $cmake_flags >/dev/null && cmake --build $build_dir -j $(nproc) $targets &&
  echo \"torch2: ccache: \$(ccache -s | grep -m 2 -E 'Hits|Misses' | tr -s ' ' | paste -sd' ')\""
if [[ -n "$run_command" ]]; then
  chroot "$root" bash -c "cd /kiln && $run_command"
  exit
fi
log=$(mktemp)
status=0
chroot "$root" bash -c "cd /kiln && ctest --test-dir $build_dir --timeout 1500 --output-on-failure \
  -j $(nproc) ${*@Q}" | tee "$log" || status=$?
# One line for a reader of CI's log: which build compiled, and how its tests went.
summary=$(grep -E '^[0-9]+% tests passed' "$log" || echo "its tests did not run (see above)")
skipped=$(grep -c '\*\*\*Skipped' "$log" || true)
built="kiln, kiln_unit_tests, kiln_e2e_tests, kiln_server_tests"
[[ -n "$targets" ]] && built="${targets//--target /}"
echo "torch2: RESULT: $flavour build compiled and linked ($built; -O0) against $what; $summary;" \
  "$skipped skipped"
rm -f "$log"
exit "$status"
