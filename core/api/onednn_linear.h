// Linear layers on oneDNN's sgemm (model.kernels = "fused"): y = x w^T + b with its gradients as
// three oneDNN GEMMs. Debian's LibTorch calls OpenBLAS, which on a step's small shapes at two
// threads runs at 44-84% of the CPU's peak where oneDNN keeps 84-97% (tools/bench/gemm.sh,
// docs/benchmarks.md); LibTorch already loads oneDNN (libdnnl), whose C entry point is found in
// the process. Where it is not (a LibTorch that hides its oneDNN, as pip wheels do), LibTorch's
// own linear runs; the run's BLAS line says which (onednn_version, core/util/blas_kernels.h).
#pragma once

#include <optional>

#include <ATen/core/Tensor.h>

namespace kiln {

// The type oneDNN's GEMMs take these tensors' products in, or nullopt where oneDNN does not
// serve them (LibTorch's linear runs): float32 for float32 CPU tensors (dnnl_sgemm); bfloat16
// under CPU autocast to bfloat16, precision "bf16" (dnnl_gemm_bf16bf16f32: x and the float32
// weight rounded to bf16, products summed in fp32, y and every gradient in fp32, the weight
// itself kept in fp32 as the master copy). nullopt without oneDNN, for another autocast type,
// or a weight that is not float32.
std::optional<at::ScalarType> onednn_linear_operands(const at::Tensor& x, const at::Tensor& weight);

// x [..., in] by weight [out, in], plus bias [out] when defined, as at::linear; differentiable in
// all three. With `fused`, oneDNN's GEMMs where onednn_linear_operands() names a type (the
// result is then float32); otherwise at::linear.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  bool fused);

}  // namespace kiln
