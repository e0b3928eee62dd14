// A residual add and the LayerNorm after it as one CPU kernel per direction (model.kernels =
// "fused"): gpt's h = x + attention output, then ln_2(h). LibTorch runs an add and a layer_norm,
// each a pass over the [batch, time, n_embd] activations with its own output, and the same again
// backward; here each row is read and written once per direction, eight lanes at a time, split
// over LibTorch's threads. About 0.65 ms of forward and backward per block on the default
// experiment's [16, 64, 128] (docs/benchmarks.md).
#pragma once

#include <utility>

#include <ATen/core/Tensor.h>

namespace kiln {

// Whether the fused kernel serves these tensors: float32 CPU tensors (so never a GPU, nor bfloat16
// autocast, which keep LibTorch's ops).
bool fused_add_layer_norm_applies(const at::Tensor& x, const at::Tensor& a);

// {h, layer_norm(h)} for h = x + a, the norm over the last dim with `weight` and `bias` (undefined
// = none) and eps 1e-5, differentiable in all four. With `fused`, Kiln's kernel where
// fused_add_layer_norm_applies() holds; otherwise LibTorch's add and layer_norm.
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& a,
                                                 const at::Tensor& weight, const at::Tensor& bias,
                                                 bool fused);

}  // namespace kiln
