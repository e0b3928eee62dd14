// The two communicating autograd functions of tensor parallelism (Megatron-LM's f and g), bound
// to one tensor-parallel group: what TensorParallelGroup's enter and leave run.
#pragma once

#include <functional>

#include "core/layers/tensor_parallel.h"

namespace kiln {

class Communicator;

// Sums a tensor over the group's ranks, in place, on every rank.
using GroupSum = std::function<void(at::Tensor&)>;

// `rank` of `size` ranks whose tensors `sum` adds up. enter: identity forward, gradient summed
// in backward; leave: summed forward, gradient passed through in backward.
TensorParallelGroup tensor_parallel_group(int rank, int size, GroupSum sum);
// The same over `group`'s ranks, which must outlive the returned functions.
TensorParallelGroup tensor_parallel_group(Communicator& group);

}  // namespace kiln
