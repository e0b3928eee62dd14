// The models' linear layers: y = x w^T + b by LibTorch's linear, which runs MKL's fp32 GEMMs and,
// under autocast to bf16 (precision "bf16") or float32 matmul precision "medium" (precision
// "bf32"), oneDNN's bf16 ones, on AMX's tiles where the CPU has them (core/kernels/cpu_runtime.h).
// What LibTorch's linear cannot take as it is, done here: a frozen weight kept narrower than the
// input (adapter.base_dtype: int8 dequantized, bf16 widened) for each product, forward and
// backward, and saved as it is; and the low-rank update an adapter attached to the weight
// (core/api/adapter.h).
#pragma once

#include <ATen/core/Tensor.h>

namespace kiln {

// x [..., in] by weight [out, in], plus bias [out] when defined, as at::linear, plus the
// low-rank site registered for `weight`, if any; differentiable in all three.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace kiln
