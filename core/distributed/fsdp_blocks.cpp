// A rank's block of a tensor's rows, and storage resized in place (fsdp_blocks.h).
#include "core/distributed/fsdp_blocks.h"

#include <vector>

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>

namespace kiln {

void resize_storage(const at::Tensor& t, size_t bytes) {
  // CUDA's caching allocator allocates on the process's current device, not on the tensor's:
  // without the guard, rank k's storage would land on GPU 0 while the tensor says cuda:k. The
  // run makes its device current (AssembledRun::current_device); this keeps it so here anyway.
  const c10::DeviceGuard on_its_device(t.device());
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(bytes ? storage->allocator()->allocate(bytes)
                                     : at::DataPtr(nullptr, t.device()));
  storage->set_nbytes(bytes);
}

at::Tensor block_of(const at::Tensor& t, int64_t rows, int rank, int world) {
  std::vector<int64_t> shape = t.sizes().vec();
  shape[0] = rows * world;
  at::Tensor padded = at::zeros(shape, t.options());
  padded.narrow(0, 0, t.size(0)).copy_(t);
  return padded.narrow(0, rows * rank, rows).clone();
}

}  // namespace kiln
