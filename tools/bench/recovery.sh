#!/usr/bin/env bash
# The time from a rank's loss to training again, on the test cluster of three slurmd
# (tests/support/slurm_cluster.h; tools/setup.sh --tests installs Slurm and munge): the server test
# SlurmNodes.ANodeLostMidRunResumesItsMemberOnTheNodesThatRemain kills rank 1 of a ddp member on
# two nodes (parallel.timeout_s = 5), drains its node and polls the run store and squeue until the
# member completes. It prints, in seconds after the loss: rank 0 stopped (the run marked
# interrupted: detection), the task requeued (it left RUNNING), the task running again (Slurm
# started it on other nodes), the run resumed (its process assembled the model and read the
# snapshot) and its first step after the snapshot. RUNS=N repeats it.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x build/tests/kiln_server_tests ]] || { echo "bench: run tools/setup.sh --tests first" >&2; exit 2; }
echo "== $(uname -n), $(nproc) cores, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 1; i <= ${RUNS:-1}; ++i)); do
  status=0
  output=$(build/tests/kiln_server_tests --gtest_filter='SlurmNodes.ANodeLostMidRun*' 2>&1) ||
    status=$?
  grep -E '^recovery timeline|SKIP|FAILED' <<<"$output" || echo "bench: the test printed no timeline"
  [[ $status -eq 0 ]] || { echo "bench: the test failed (exit $status)" >&2; exit 1; }
done
