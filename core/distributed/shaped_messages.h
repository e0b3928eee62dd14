// A tensor sent point to point to a rank that does not know its shape or dtype ahead, as a
// pipeline stage's activations reach the next stage: a header of [dtype, ndim, sizes...] first,
// then the tensor, as two messages under the tags the caller gives (Communicator matches them by
// peer and tag, in order).
#pragma once

#include <vector>

#include <ATen/ATen.h>

#include "core/distributed/distributed.h"

namespace kiln {

struct ShapedTags {
  int shape = 0;  // the header's
  int data = 0;   // the tensor's
};

// Starts both sends to `peer` and appends them to `pending`: wait on them before `tensor` (or
// its contiguous copy) may go. At most six dimensions.
void start_shaped_send(Communicator& comm, const at::Tensor& tensor, int peer, ShapedTags tags,
                       std::vector<Communicator::Pending>& pending);

// The tensor start_shaped_send sent from `peer`, received onto `device`.
at::Tensor receive_shaped(Communicator& comm, int peer, ShapedTags tags, c10::Device device);

}  // namespace kiln
