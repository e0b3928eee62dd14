#include "core/api/tensor_parallel.h"

#include <vector>

#include <ATen/ATen.h>

namespace kiln {

at::Tensor slice_for_rank(const at::Tensor& whole, const ParameterSplit& split, int rank,
                          int size) {
  std::vector<at::Tensor> mine;
  for (const auto& part : whole.chunk(split.blocks, split.dim))
    mine.push_back(part.chunk(size, split.dim)[rank]);
  return at::cat(mine, split.dim).contiguous();
}

}  // namespace kiln
