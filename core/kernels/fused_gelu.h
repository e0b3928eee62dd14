// GPT-2's tanh-approximated GELU as one CPU kernel per direction (model.kernels = "fused").
// LibTorch 1.13's gelu(approximate = "tanh") on this CPU spends about 1.6 ms forward and 1.1 ms
// backward on the default experiment's [16, 64, 512] activations (docs/benchmarks.md): about a
// tenth of the step. Here each element is one pass of eight-lane arithmetic with tanh from one
// exp, forward and backward, split over LibTorch's threads.
#pragma once

#include <ATen/core/Tensor.h>

namespace kiln {

// Whether the fused kernel serves `x`: a float32 CPU tensor (so never a GPU, nor bfloat16
// autocast, which keep LibTorch's op).
bool fused_gelu_applies(const at::Tensor& x);

// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), differentiable. With `fused`, Kiln's kernel
// where fused_gelu_applies() holds; otherwise LibTorch's gelu(x, "tanh").
at::Tensor gelu_tanh(const at::Tensor& x, bool fused);

// The fused kernel alone, for float32 CPU tensors (tests).
at::Tensor fused_gelu_tanh(const at::Tensor& x);

}  // namespace kiln
