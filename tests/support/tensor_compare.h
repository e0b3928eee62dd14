// The largest elementwise difference of two tensors, taken in double precision: how the tests of
// Kiln's kernels compare a result with its reference.
#pragma once

#include <ATen/ATen.h>

namespace kiln::testing {

inline double max_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

}  // namespace kiln::testing
