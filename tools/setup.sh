#!/usr/bin/env bash
# Kiln set-up on Debian 12: installs the missing Debian packages, builds build/kiln (Release)
# and prepares the default corpus (the King James Bible from the bible-kjv package, as
# character tokens in data/kjv_char/). Safe to re-run: each step is skipped when already done.
#   tools/setup.sh            # kiln + default corpus
#   tools/setup.sh --tests    # also the test suite
set -euo pipefail
cd "$(dirname "$0")/.."

build_tests=OFF
[[ "${1:-}" == "--tests" ]] && build_tests=ON

# LibTorch and its CPU BLAS (OpenBLAS with OpenMP: LibTorch's CPU step runs ~6x faster on it than
# on the reference BLAS), the config / CLI / store libraries, the test framework, and the corpus.
packages=(build-essential cmake ninja-build git
          libtorch-dev libgloo-dev libopenblas0-openmp
          libtomlplusplus-dev libfmt-dev libsqlite3-dev libcli11-dev nlohmann-json3-dev
          googletest libgtest-dev libgmock-dev
          bible-kjv sqlite3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

echo "setup: building build/kiln (Release, tests $build_tests)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=$build_tests >/dev/null
# Two jobs: each LibTorch translation unit takes ~1 GiB of compiler memory.
cmake --build build -j "$(nproc)"

if [[ ! -s data/kjv.txt ]]; then
  echo "setup: dumping the King James Bible (bible-kjv) to data/kjv.txt"
  mkdir -p data
  # One verse per line, without the "Ge1:1 " reference that starts each.
  bible -f -m 8192 'Gen1:1-Rev22:21' | sed 's/^[^ ]* //' > data/kjv.txt.tmp
  mv data/kjv.txt.tmp data/kjv.txt
fi
if [[ ! -s data/kjv_char/tokenizer.json ]]; then
  build/kiln prepare data/kjv.txt --tokenizer char --out data/kjv_char --val-fraction 0.1
fi
echo "setup: done"
