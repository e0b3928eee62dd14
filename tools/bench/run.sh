#!/usr/bin/env bash
# One command to see whether a change made Kiln slower: builds with the benchmarks, then runs
#   1. kiln bench on the default experiment (phases, tokens/s, MFU),
#   2. the Google Benchmark targets (shard reads, metrics rows, snapshot writes),
#   3. the same training loop in Python PyTorch (tools/bench/pytorch_reference.py on .venv/'s
#      PyTorch, the wheel whose LibTorch kiln links), when tools/setup.sh has made .venv/.
# tools/bench/peers.sh adds torch.compile, bf16 and GPT-2 124M's shapes.
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
if [[ -x .venv/bin/python ]] && .venv/bin/python -c 'import torch' 2>/dev/null; then
  echo "== PyTorch reference (same model, data and step), eager"
  # The reference's --steps counts its warm-up steps too: both time $steps steps after 5.
  .venv/bin/python tools/bench/pytorch_reference.py "$experiment" --steps $((steps + 5)) --warmup 5 |
    tail -1
fi
