#!/usr/bin/env bash
# Kiln on a GPU machine, built against the LibTorch of the PyTorch wheel installed there: the
# commands a GPU user runs, in order (README, "On a GPU").
#   tools/gpu.sh build     # cmake + ninja against torch.utils.cmake_prefix_path into build-gpu/
#   tools/gpu.sh default   # the default experiment (kjv_char) on cuda
#   tools/gpu.sh gpt2      # GPT-2 124M shapes on the KJV in GPT-2 tokens, one sitting: kiln bench
#                          # (eager, then CUDA graphs), the PyTorch reference eager and compiled
#   tools/gpu.sh all       # the three above
# Needs: python3 with a CUDA build of torch, the CUDA toolkit of the wheel's CUDA major version
# (nvcc and headers: CMake's CUDAToolkit finds it, or set CUDAToolkit_ROOT), cmake, ninja, and
# Kiln's other libraries (tools/setup.sh installs them on Debian; data/ as it prepares it).
# KILN_GPU_STEPS (default 20) sets the timed steps of the gpt2 comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${KILN_GPU_STEPS:-20}
build=build-gpu

need_torch() {
  python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null || {
    echo "gpu.sh: error: python3's torch is missing or sees no GPU: install a CUDA PyTorch wheel" >&2
    exit 2
  }
}

do_build() {
  need_torch
  local prefix
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON \
    -DKILN_BUILD_TESTS=ON -DCMAKE_PREFIX_PATH="$prefix"
  cmake --build "$build"
}

# The figures to keep: the GPU, the wheel, the commit.
describe_machine() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
  echo "kiln commit $(git rev-parse --short HEAD)"
}

do_default() {
  "$build/kiln" run experiments/kjv_char.toml --set run.device=cuda --name "gpu-default-$(date +%s)"
}

do_gpt2() {
  local shapes=(--set data.train='data/kjv_gpt2/train_*.bin' --set data.val='data/kjv_gpt2/val_*.bin'
                --set train.batch_tokens=0 --set train.micro_batch=16 --set precision.type=bf16
                --set optimizer.fused=true --set run.device=cuda)
  describe_machine
  echo "== kiln bench, eager"
  "$build/kiln" bench experiments/gpt2_124m.toml "${shapes[@]}" --steps "$steps" --warmup 5
  echo "== kiln bench, CUDA graphs"
  "$build/kiln" bench experiments/gpt2_124m.toml "${shapes[@]}" --set train.cuda_graphs=true \
    --steps "$steps" --warmup 5
  echo "== PyTorch eager"
  python3 tools/bench/pytorch_reference.py experiments/gpt2_124m.toml "${shapes[@]}" \
    --steps $((steps + 5)) --warmup 5
  echo "== PyTorch torch.compile"
  python3 tools/bench/pytorch_reference.py experiments/gpt2_124m.toml "${shapes[@]}" \
    --steps $((steps + 5)) --warmup 5 --compile
}

case "${1:-}" in
  build) do_build ;;
  default) do_default ;;
  gpt2) do_gpt2 ;;
  all) do_build && do_default && do_gpt2 ;;
  *) echo "usage: tools/gpu.sh build|default|gpt2|all" >&2; exit 2 ;;
esac
