#!/usr/bin/env bash
# The whole test suite: set-up (packages, build with tests), every test through ctest (the fast
# unit tests first, then the end-to-end ones that drive the kiln binary, then those against real
# servers and real client libraries), then a minute of fuzzing the config loader (tools/fuzz.sh; any finding fails it).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --tests
# One ctest job per CPU this machine lets us use: nproc follows the CPU affinity but not a
# cgroup's CPU quota (a container may see 64 CPUs and be allowed 2), and every job beyond the
# quota slows the rest. The tests that start several ranks take one lock (tests/CMakeLists.txt)
# and run one at a time, beside single-process tests.
jobs=$(nproc)
if [[ -r /sys/fs/cgroup/cpu.max ]]; then
  read -r quota period </sys/fs/cgroup/cpu.max
  if [[ "$quota" != max ]] && (( (quota + period - 1) / period < jobs )); then
    jobs=$(( (quota + period - 1) / period ))
  fi
fi
ctest --test-dir build --output-on-failure -j "$jobs" -L unit
ctest --test-dir build --output-on-failure -j "$jobs" -L e2e
# Against real servers the tests start themselves (PostgreSQL, Slurm, kiln serve in Chromium):
# one at a time, since each starts daemons of its own.
ctest --test-dir build --output-on-failure -L servers
# Against the real client libraries (transformers, tokenizers) in Debian sid's chroot, which the
# first of them makes (tools/interop.sh): one at a time.
ctest --test-dir build --output-on-failure -L interop
tools/fuzz.sh 60
