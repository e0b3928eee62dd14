#!/usr/bin/env bash
# The GEMMs of a training step in every BLAS-like library installed:
# builds build/tools/bench/kiln_gemm_bench (turning on KILN_BUILD_BENCH in build/ if it is off)
# and runs it at 1 and 2 threads (ARGS replace that: --threads 1,4 --seconds 0.5). The libraries
# come from Debian: OpenBLAS and oneDNN (libdnnl2) with LibTorch; BLIS (libblis4-openmp) and
# libxsmm (libxsmm-dev) are installed here when missing (as root). BLIS registers a libblas.so.3
# alternative at priority 80, below OpenBLAS's 95, so LibTorch keeps OpenBLAS. Only comparable
# within one sitting on a quiet machine: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "== $(uname -n), $(nproc) cores, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -m1 "model name" /proc/cpuinfo
missing=()
for p in libblis4-openmp libxsmm-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "gemm: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" > /dev/null
fi
cmake -S . -B build -DKILN_BUILD_BENCH=ON > /dev/null  # finds libxsmm if it was just installed
cmake --build build --target kiln_gemm_bench > /dev/null
# OpenBLAS picks its kernels by CPU model and falls back to Prescott's where a hypervisor hides it
# (docs/speed.md); kiln sets OPENBLAS_CORETYPE for itself, and this bench takes the same kernels.
cmake --build build --target kiln > /dev/null
coretype=$(build/kiln bench experiments/kjv_char.toml --steps 1 --warmup 0 |
  sed -n 's/^BLAS: OpenBLAS [^ ]* (kernels \([A-Za-z0-9]*\).*/\1/p')
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$coretype}
echo "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
build/tools/bench/kiln_gemm_bench "$@"
