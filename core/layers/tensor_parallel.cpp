#include "core/layers/tensor_parallel.h"

#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "core/layers/int8_weights.h"

namespace kiln {

at::Tensor slice_for_rank(const at::Tensor& whole, const ParameterSplit& split, int rank,
                          int size) {
  std::vector<at::Tensor> mine;
  for (const auto& part : whole.chunk(split.blocks, split.dim))
    mine.push_back(part.chunk(size, split.dim)[rank]);
  return at::cat(mine, split.dim).contiguous();
}

at::Tensor whole_from_slices(const std::vector<at::Tensor>& slices, const ParameterSplit& split) {
  std::vector<std::vector<at::Tensor>> parts_of_rank;
  for (const auto& slice : slices)
    parts_of_rank.push_back(slice.chunk(split.blocks, split.dim));
  std::vector<at::Tensor> ordered;  // part 0 of every rank, then part 1, ...
  for (int64_t part = 0; part < split.blocks; ++part) {
    for (const auto& parts : parts_of_rank)
      ordered.push_back(parts[static_cast<size_t>(part)]);
  }
  return at::cat(ordered, split.dim);
}

void keep_slices(torch::nn::Module& model, const std::vector<ParameterSplit>& splits,
                 const TensorParallelGroup& group) {
  at::NoGradGuard no_grad;
  auto parameters = model.named_parameters();
  for (const auto& split : splits) {
    at::Tensor* p = parameters.find(split.name);
    if (!p) throw std::logic_error("tensor parallel: the model has no parameter " + split.name);
    // An int8 weight's scales are per row: a cut of its rows takes theirs.
    const at::Tensor scales = int8_scales(*p);
    if (scales.defined() && split.dim == 0) {
      set_int8_scales(*p, slice_for_rank(scales, split, group.rank, group.size));
    }
    p->set_data(slice_for_rank(*p, split, group.rank, group.size));
  }
}

}  // namespace kiln
