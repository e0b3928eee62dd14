#include "core/layers/document_positions.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

namespace kiln {
namespace {

thread_local at::Tensor scoped_positions;

}  // namespace

PositionScope::PositionScope(const at::Tensor& positions, std::optional<c10::Device> device)
    : previous_(scoped_positions) {
  scoped_positions =
      positions.defined() && device ? positions.to(*device, /*non_blocking=*/true) : positions;
}

PositionScope::~PositionScope() {
  scoped_positions = previous_;
}

at::Tensor current_positions() {
  return scoped_positions;
}

at::Tensor token_positions(int64_t time, const at::TensorOptions& options) {
  if (scoped_positions.defined()) return scoped_positions;
  return at::arange(time, options.dtype(at::kLong));
}

at::Tensor document_causal_mask(const at::Tensor& positions) {
  const int64_t time = positions.size(1);
  auto query = at::arange(time, positions.options()).view({1, time, 1});
  auto key = at::arange(time, positions.options()).view({1, 1, time});
  auto first = (query - positions.unsqueeze(2));  // [batch, time, 1]: each query's first key
  return key.le(query).logical_and(key.ge(first)).unsqueeze(1);
}

}  // namespace kiln
