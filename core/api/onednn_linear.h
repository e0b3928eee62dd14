// Linear layers on oneDNN's sgemm (model.kernels = "fused"): y = x w^T + b with its gradients as
// three oneDNN GEMMs. Debian's LibTorch calls OpenBLAS, which on a step's small shapes at two
// threads runs at 44-84% of the CPU's peak where oneDNN keeps 84-97% (tools/bench/gemm.sh,
// docs/benchmarks.md); LibTorch already loads oneDNN (libdnnl), whose C entry point is found in
// the process. Where it is not (a LibTorch that hides its oneDNN, as pip wheels do), LibTorch's
// own linear runs; the run's BLAS line says which (onednn_version, core/util/blas_kernels.h).
#pragma once

#include <ATen/core/Tensor.h>

namespace kiln {

// Whether oneDNN serves these tensors: float32 CPU tensors outside CPU autocast (which casts to
// bfloat16 in LibTorch's linear), oneDNN present.
bool onednn_linear_applies(const at::Tensor& x, const at::Tensor& weight);

// x [..., in] by weight [out, in], plus bias [out] when defined, as at::linear; differentiable in
// all three. With `fused`, oneDNN's GEMMs where onednn_linear_applies(); otherwise at::linear.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  bool fused);

}  // namespace kiln
