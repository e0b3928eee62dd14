// A residual add and the LayerNorm after it as one CPU kernel per direction (model.kernels =
// "fused"): gpt's h = x + attention output, then ln_2(h). LibTorch runs an add and a layer_norm,
// each a pass over the [batch, time, n_embd] activations with its own output, and the same again
// backward; here each row is read and written once per direction, eight lanes at a time, split
// over LibTorch's threads. About 0.65 ms of forward and backward per block on the default
// experiment's [16, 64, 128] (docs/benchmarks.md). Here too is gpt's LayerNorm module, whose
// parameters the fused add reads.
#pragma once

#include <cstdint>
#include <utility>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace kiln {

// Whether the fused kernel serves these tensors: float32 CPU tensors (so never a GPU, nor bfloat16
// autocast, which keep LibTorch's ops).
bool fused_add_layer_norm_applies(const at::Tensor& x, const at::Tensor& a);

// {h, layer_norm(h)} for h = x + a, the norm over the last dim with `weight` and `bias` (undefined
// = none) and `eps` added to the variance, differentiable in all four tensors. With `fused`,
// Kiln's kernel where fused_add_layer_norm_applies() holds; otherwise LibTorch's add and
// layer_norm.
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& a,
                                                 const at::Tensor& weight, const at::Tensor& bias,
                                                 double eps, bool fused);

// LayerNorm over the last dim, with an optional bias (LibTorch's module always has one; gpt
// without biases has none) and its epsilon (GPT-2's layer_norm_epsilon, 1e-5 by default).
class LayerNormImpl : public torch::nn::Module {
 public:
  LayerNormImpl(int64_t dim, bool bias, double eps);
  at::Tensor forward(const at::Tensor& x);
  double eps() const { return eps_; }
  at::Tensor weight, bias;

 private:
  int64_t dim_;
  double eps_;
};
TORCH_MODULE(LayerNorm);

}  // namespace kiln
