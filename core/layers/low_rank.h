// Low-rank sites: the table linear() (core/layers/linear.h) reads to add an adapter's update
// y += s (drop(x) A^T) B^T to a linear layer. An adapter plugin (core/api/adapter.h) registers a
// site by its layer's base weight, so no model names an adapter and no adapter names a model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/layers/tensor_parallel.h"

namespace kiln {

// One adapted linear layer: y += scale * (dropout(x) a^T) b^T, a [rank, in] and b [out, rank].
struct LowRankSite {
  at::Tensor a, b;
  double scale = 1;
  double dropout = 0;
  int64_t dropout_site = 0;        // the draw site of its dropout (core/layers/dropout.h)
  std::function<bool()> training;  // whether the model is in training mode
  // Under tensor parallelism a row-parallel layer reads a slice of its input: the features
  // [input_start, input_start + width) of `input_whole` (0: the whole input), so that its dropout
  // mask is that slice of the one process's.
  int64_t input_start = 0, input_whole = 0;
};

// The site registered for `weight` (by its TensorImpl), or null: asked by linear().
const LowRankSite* low_rank_site(const at::Tensor& weight);
// Registers `site` for `weight` until the returned handle is destroyed (the adapter module
// holds it, so a model destroyed takes its sites with it).
std::shared_ptr<void> register_low_rank_site(const at::Tensor& weight, LowRankSite site);

// `weights` followed by the adapter tensors (a, b) of those that hold a site: a layer's
// parameters as a strategy that places layers (pipeline stages) must see them.
std::vector<at::Tensor> with_low_rank_parameters(std::vector<at::Tensor> weights);

// Low-rank sites under tensor parallelism (core/layers/tensor_parallel.h), cut to match their
// layer. A column-parallel layer keeps rows of W, so B keeps the same rows and A stays whole; a
// row-parallel layer keeps columns of W, so A keeps the same columns and B stays whole, and its
// partial output, the adapter's term included, is summed by the layer's `leave`. The whole
// tensor (A of a column layer, B of a row layer) then gets on each rank its part of the
// gradient, which the group must sum.
struct LowRankSplits {
  std::vector<ParameterSplit> splits;  // adapter tensors cut, by their name in the model
  std::vector<at::Tensor> summed;      // whole on every rank, gradients summed over the group
};
// Cuts the adapter tensors of the sites on the weights `layer_splits` cut (which keep_slices
// already applied to `model`) and gives row-parallel sites their input slice.
LowRankSplits split_low_rank_sites(torch::nn::Module& model,
                                   const std::vector<ParameterSplit>& layer_splits,
                                   const TensorParallelGroup& group);

}  // namespace kiln
