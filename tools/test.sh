#!/usr/bin/env bash
# The whole test suite: set-up (packages, build with tests), every test through ctest (the fast
# unit tests first, then the end-to-end ones that drive the kiln binary, then those against real
# servers), then a minute of fuzzing the config loader (tools/fuzz.sh; any finding fails it).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --tests
ctest --test-dir build --output-on-failure -j "$(nproc)" -L unit
ctest --test-dir build --output-on-failure -j "$(nproc)" -L e2e
# Against real servers the tests start themselves (PostgreSQL, Slurm, kiln serve in Chromium):
# one at a time, since each starts daemons of its own.
ctest --test-dir build --output-on-failure -L servers
tools/fuzz.sh 60
