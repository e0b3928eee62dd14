// Host memory for micro-batches, reused instead of allocated for every batch. On the CPU a
// buffer goes back into use once nothing holds it any more: the embedding's backward keeps the
// token ids alive until the step's gradients exist, and a pipeline keeps several micro-batches
// in flight, so "free" is read from the tensors' reference counts, not assumed.
#pragma once

#include <cstdint>
#include <vector>

#include "core/api/data_source.h"

namespace kiln {

class BatchBuffers {
 public:
  // pinned: page-locked memory for batches bound for a CUDA device, so that their copies run
  // asynchronously. It comes from LibTorch's caching host allocator, which already reuses a
  // block only after the copies reading it have finished; a pool of our own could not know that.
  BatchBuffers(int64_t rows, int64_t cols, bool pinned);

  // Two int64 [rows, cols] tensors that nobody else holds; their contents are stale.
  Batch acquire();

  size_t pooled() const { return pool_.size(); }

 private:
  Batch allocate() const;

  int64_t rows_, cols_;
  bool pinned_;
  std::vector<Batch> pool_;
};

}  // namespace kiln
