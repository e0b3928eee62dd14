// RMSNorm as one CPU kernel per direction (model.kernels = "fused", llama's blocks and final norm):
// y = x / sqrt(mean(x^2) + eps) * gain over the last dim. LibTorch's op sequence (pow, mean, add,
// rsqrt, two multiplies) makes five passes over the activations forward and more backward, each
// with its own temporary; here each row is read twice and written once per direction, eight
// lanes at a time, split over LibTorch's threads. docs/benchmarks.md has its timings.
#pragma once

#include <ATen/core/Tensor.h>

namespace kiln {

// Whether the fused kernel serves these tensors: float32 CPU tensors (so never a GPU, nor
// bfloat16 autocast, which keep LibTorch's ops).
bool fused_rms_norm_applies(const at::Tensor& x, const at::Tensor& gain);

// x / sqrt(mean(x^2, last dim) + eps) * gain, differentiable in x and gain ([last dim]); computed
// in float32 whatever x is, then cast back to x's type before the gain, as Hugging Face's
// LlamaRMSNorm does. With `fused`, Kiln's kernel where fused_rms_norm_applies() holds;
// otherwise LibTorch's ops.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& gain, double eps, bool fused);

}  // namespace kiln
