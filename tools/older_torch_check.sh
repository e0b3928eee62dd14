#!/usr/bin/env bash
# Compiles Kiln against the LibTorch of an older PyTorch wheel, the kind GPU machines carry (2.11
# at last look), so that what differs from the default build's 2.15 is met here, on the CPU
# machine, rather than on a GPU machine's short lease. Every translation unit of core/ and
# plugins/ (kiln_base, kiln_core, kiln_plugins) is compiled, unoptimized, against that wheel's
# headers; nothing is linked or run, since the wheel's CUDA libraries are not installed. The
# wheel is downloaded once (pip, --no-deps), pinned by SHA-256, into build-torch-VERSION/.
#   tools/older_torch_check.sh                # torch 2.11.0
# Needs .venv/ (tools/setup.sh). Prints "older-torch: RESULT: ..." last.
set -euo pipefail
cd "$(dirname "$0")/.."
version=2.11.0
wheel_sha256=7aa2f9bbc6d4595ba72138026b2074be1233186150e9292865e04b7a63b8c67a
dir=build-torch-$version
source tools/pypi_pins.sh
if [[ ! -f "$dir/wheel/torch/share/cmake/Torch/TorchConfig.cmake" ]]; then
  mkdir -p "$dir"
  echo "torch==$version --hash=sha256:$wheel_sha256" >"$dir/requirement.txt"
  .venv/bin/pip download --quiet --no-deps --require-hashes --dest "$dir" -r "$dir/requirement.txt" ||
    die "could not download torch $version from PyPI, or it does not match its pinned SHA-256"
  (cd "$dir" && python3 -m zipfile -e torch-"$version"-*.whl wheel >/dev/null)
fi
cmake -S . -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O0" \
  -DKILN_BUILD_TESTS=OFF -DCMAKE_PREFIX_PATH="$PWD/$dir/wheel/torch/share/cmake" >"$dir/configure.log" ||
  { cat "$dir/configure.log"; echo "older-torch: RESULT: FAILED to configure against $version" >&2; exit 1; }
start=$SECONDS
cmake --build "$dir/build" -j "$(nproc)" --target kiln_base kiln_core kiln_plugins ||
  { echo "older-torch: RESULT: FAILED to compile against torch $version" >&2; exit 1; }
echo "older-torch: RESULT: core/ and plugins/ compile against torch $version ($((SECONDS - start)) s)"
