// parallel "ddp": data parallel over c10d, as torch DistributedDataParallel. Each rank holds the
// whole model; rank 0's weights are broadcast at the start; each rank reads its own slice of
// every global batch (the loader interleaves windows by rank). In the last micro-step's backward
// the gradients are averaged across ranks in flat buckets of bucket_mb, each bucket's all-reduce
// starting as soon as its gradients are complete, while backward still runs (core/
// data_parallel.h). The micro-steps before the last communicate nothing. Launch with torchrun,
// srun or `kiln launch`; the environment says who is who (core/distributed/distributed.h).
#include "core/api/model.h"
#include "core/distributed/data_parallel.h"

namespace kiln {
namespace {

class DistributedDataParallel : public DataParallel {
 public:
  using DataParallel::DataParallel;

  void attach(Model& model) override {
    DataParallel::attach(model);
    reducer_ = std::make_unique<OverlappedAllReduce>(comm(), model.parameters(), bucket_bytes());
  }

  void begin_micro_step(bool final_micro_step) override { reducer_->arm(final_micro_step); }

  void finish_gradients(Model&) override { reducer_->finish(); }

 private:
  std::unique_ptr<OverlappedAllReduce> reducer_;
};

const bool registered = ParallelRegistry::add(
    {"ddp",
     "data parallel over c10d (Gloo on CPU, NCCL on CUDA): broadcast, bucketed all-reduce "
     "overlapping backward",
     data_parallel_params()},
    [](const Params& p, c10::DeviceType device) -> std::shared_ptr<ParallelStrategy> {
      return std::make_shared<DistributedDataParallel>(p, device);
    });

}  // namespace
}  // namespace kiln
