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
# A test that hangs fails after 25 minutes with ctest's ***Timeout and its name, rather than holding
# the run until CI stops it with no word of which (tests with a TIMEOUT of their own keep it).
# Each leg's seconds and its slowest tests go to build/test-times/summary.txt as well, which CI
# prints again at its end (.ci/run): a run that grew slow says where from the tail of its log.
times="$PWD/build/test-times"
rm -rf "$times" && mkdir -p "$times"
leg() {
  local label=$1 start=$SECONDS status=0
  shift
  ctest --test-dir build --timeout 1500 --output-on-failure --output-junit "$times/$label.xml" \
    -L "$label" "$@" || status=$?
  {
    echo "test.sh: $label: $((SECONDS - start)) s, exit $status; slowest:"
    sed -n 's/.*<testcase name="\([^"]*\)".* time="\([0-9.]*\)".*/\2 \1/p' "$times/$label.xml" 2>/dev/null |
      sort -rn | awk 'NR <= 6 {printf "  %7.1f s  %s\n", $1, $2}' || true
  } | tee -a "$times/summary.txt"
  return "$status"
}
leg unit -j "$jobs"
leg e2e -j "$jobs"
# Against real servers the tests start themselves (PostgreSQL, Slurm, kiln serve in Chromium),
# one at a time since each starts daemons of its own; beside them, one at a time too, the tests
# against the real libraries a user opens Kiln's files with (transformers, tokenizers, PEFT,
# lm-evaluation-harness, Optuna) in .venv/ (tools/interop.sh). The servers' tests mostly wait on
# their daemons, so the two legs together take little more than the longer. The servers leg's
# output follows the interop leg's.
leg servers >"$times/servers.log" 2>&1 &
servers=$!
servers_status=0 interop_status=0
leg interop || interop_status=$?
wait "$servers" || servers_status=$?
cat "$times/servers.log"
((servers_status == 0 && interop_status == 0))
tools/fuzz.sh 60
