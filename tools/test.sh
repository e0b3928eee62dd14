#!/usr/bin/env bash
# The whole test suite: set-up (packages, build with tests), every test through ctest, then a
# minute of fuzzing the config loader (tools/fuzz.sh; any finding fails the suite).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --tests
ctest --test-dir build --output-on-failure -j "$(nproc)"
tools/fuzz.sh 60
