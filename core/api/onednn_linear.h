// Linear layers on oneDNN's sgemm (model.kernels = "fused"): y = x w^T + b with its gradients as
// three oneDNN GEMMs. Debian's LibTorch calls OpenBLAS, which on a step's small shapes at two
// threads runs at 44-84% of the CPU's peak where oneDNN keeps 84-97% (tools/bench/gemm.sh,
// docs/benchmarks.md); LibTorch already loads oneDNN (libdnnl), whose C entry point is found in
// the process. Where it is not (a LibTorch that hides its oneDNN, as pip wheels do), LibTorch's
// own linear runs; the run's BLAS line says which (onednn_version, core/util/blas_kernels.h).
#pragma once

#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "core/util/onednn_matmul.h"

namespace kiln {

// How oneDNN's GEMMs take these tensors' products, or nullopt where oneDNN does not serve them
// (LibTorch's linear runs):
//   fp32  float32 CPU tensors (dnnl_sgemm);
//   bf16  under CPU autocast to bfloat16, precision "bf16": x and the float32 weight rounded to
//         bf16, products summed in fp32, y and every gradient in fp32, the weight itself kept in
//         fp32 as the master copy;
//   bf32  float32 tensors under float32 matmul precision "medium", precision "bf32": oneDNN
//         rounds the operands to bf16 itself where the CPU multiplies bf16 natively (AMX).
// Each runs on the matmul primitive or the BLAS-like entry point, whichever was measured faster on
// the instruction set oneDNN runs here (onednn_matmul_preferred). nullopt without oneDNN, for
// another autocast type, or a weight that is not float32 (or a frozen one kept in bf16 or int8,
// adapter.base_dtype: widened or dequantized to the operands for each product, forward and
// backward, and saved as it is).
std::optional<MatmulMath> onednn_linear_math(const at::Tensor& x, const at::Tensor& weight);

// x [..., in] by weight [out, in], plus bias [out] when defined, as at::linear; differentiable in
// all three. With `fused`, oneDNN's GEMMs where onednn_linear_math() names a math (the result is
// then float32); otherwise at::linear.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  bool fused);

// The oneDNN kernels the linear layers ran so far in this process, for `kiln bench`:
// "matmul bf16 brg:avx512_core_amx_bf16; oneDNN ISA avx512_core_amx", or the BLAS-like entry
// points ("dnnl_gemm_bf16bf16f32"), whose kernels oneDNN does not name; "" when none ran.
std::string onednn_linear_kernels();

}  // namespace kiln
