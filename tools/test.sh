#!/usr/bin/env bash
# The whole test suite: set-up (packages, build with tests), then every test through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --tests
ctest --test-dir build --output-on-failure -j "$(nproc)"
