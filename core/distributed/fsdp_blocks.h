// The two tensor operations fsdp's sharding (fsdp_units.h) is built from: a rank's block of a
// tensor's rows, and a tensor's memory freed or given back in place. Apart from fsdp_units.cpp,
// which keeps the units' gathering and gradient buckets, so that it reads in one sitting.
#pragma once

#include <cstddef>
#include <cstdint>

#include <ATen/core/Tensor.h>

namespace kiln {

// `t`'s storage resized to `bytes` in place (0 frees its memory; the contents are not kept), on
// t's device. Views of it, autograd's included, stay valid and see the new memory.
void resize_storage(const at::Tensor& t, size_t bytes);

// `t`'s rows [rank * rows, (rank + 1) * rows) with t's dim 0 padded by zero rows to world * rows.
at::Tensor block_of(const at::Tensor& t, int64_t rows, int rank, int world);

}  // namespace kiln
