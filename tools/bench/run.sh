#!/usr/bin/env bash
# One command to see whether a change made Kiln slower: builds with the benchmarks, then runs
#   1. kiln bench on the default experiment (phases, tokens/s, MFU),
#   2. the Google Benchmark targets (shard reads, metrics rows, snapshot writes),
#   3. the same training loop in Python PyTorch, when tools/bench/pytorch_reference.py and
#      Debian's python3-torch are present,
#   4. with KILN_BENCH_TORCH2=1 (root, minutes: builds in tools/torch2.sh's chroot), the same on
#      LibTorch 2.6 with fused AdamW: kiln, PyTorch eager, and PyTorch under torch.compile.
# Timings are only comparable on a quiet machine: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
experiment=${1:-experiments/kjv_char.toml}
steps=${STEPS:-30}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON >/dev/null
cmake --build build --target kiln kiln_bench >/dev/null
echo "== $(uname -n), $(nproc) cores, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== kiln bench $experiment --steps $steps --warmup 5"
build/kiln bench "$experiment" --steps "$steps" --warmup 5
echo "== Google Benchmark targets"
build/tools/bench/kiln_bench --benchmark_min_time=0.5
if [[ -f tools/bench/pytorch_reference.py ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "== PyTorch reference (same model, data and step)"
  # The reference's --steps counts its warm-up steps too: both time $steps steps after 5.
  /usr/bin/python3 tools/bench/pytorch_reference.py "$experiment" --steps $((steps + 5)) --warmup 5 |
    tail -1
fi
if [[ "${KILN_BENCH_TORCH2:-0}" == 1 ]]; then
  echo "== LibTorch 2.6, fused AdamW: kiln bench, then the reference eager and under torch.compile"
  fused="--set optimizer.fused=true"
  reference="python3 tools/bench/pytorch_reference.py $experiment --steps $((steps + 5)) --warmup 5"
  tools/torch2.sh --run "build-torch2/kiln bench $experiment --steps $steps --warmup 5 $fused &&
    $reference $fused | tail -1 && $reference $fused --compile | tail -1"
fi
