#include "core/data/batch_buffers.h"

#include <ATen/ATen.h>

namespace kiln {
namespace {

// More micro-batches alive at once than any schedule keeps: past it the consumer is holding on
// to batches it will not give back, and new ones are handed out unpooled rather than hoarded.
constexpr size_t kMaxPooled = 64;

bool only_pool_holds(const at::Tensor& buffer) {
  return buffer.storage().use_count() == 1 && buffer.use_count() == 1;
}

}  // namespace

BatchBuffers::BatchBuffers(int64_t rows, int64_t cols, bool pinned)
    : rows_(rows), cols_(cols), pinned_(pinned) {}

Batch BatchBuffers::allocate() const {
  auto options = at::TensorOptions().dtype(at::kLong).pinned_memory(pinned_);
  Batch batch;
  batch.inputs = at::empty({rows_, cols_}, options);
  batch.targets = at::empty({rows_, cols_}, options);
  return batch;  // loss_mask undefined: every target counts unless the source masks
}

Batch BatchBuffers::acquire() {
  if (pinned_) return allocate();
  for (const Batch& batch : pool_) {
    if (only_pool_holds(batch.inputs) && only_pool_holds(batch.targets)) return batch;
  }
  Batch fresh = allocate();
  if (pool_.size() < kMaxPooled) pool_.push_back(fresh);
  return fresh;
}

}  // namespace kiln
