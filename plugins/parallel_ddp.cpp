// parallel "ddp": data parallel over c10d, as torch DistributedDataParallel. Each rank holds the
// whole model; rank 0's weights are broadcast at the start; each rank reads its own slice of
// every global batch (the loader interleaves windows by rank). In the last micro-step's backward
// the gradients are averaged across ranks in flat buckets of bucket_mb, each bucket's all-reduce
// starting as soon as its gradients are complete, while backward still runs (core/
// data_parallel.h). The micro-steps before the last communicate nothing. Launch with torchrun,
// srun or `kiln launch`; the environment says who is who (core/distributed/distributed.h).
// parallel.ep > 1 splits each mixture-of-experts layer's experts over groups of ep ranks
// (core/distributed/expert_placement.h); the rest stays as above.
#include "core/api/model.h"
#include "core/distributed/data_parallel.h"
#include "core/distributed/expert_placement.h"

namespace kiln {
namespace {

class DistributedDataParallel : public DataParallel {
 public:
  DistributedDataParallel(const Params& p, c10::DeviceType device)
      : DataParallel(p, device), ep_(static_cast<int>(p.integer("ep"))) {}

  void attach(Model& model) override {
    DataParallel::attach(model);
    experts_ = std::make_unique<ExpertPlacement>(comm(), model, ep_);
    reducer_ = std::make_unique<OverlappedAllReduce>(
        comm(), experts_->data_parallel(model.parameters()), bucket_bytes());
  }

  void begin_micro_step(bool final_micro_step) override { reducer_->arm(final_micro_step); }

  void finish_gradients(Model&) override {
    reducer_->finish();
    experts_->finish_gradients();
  }

  // With ep > 1 the ranks of a group hold different experts' gradients.
  bool replicates_gradients() const override { return ep_ == 1; }

  // Every other gradient is equal on all ranks after the mean; the experts' count once per group.
  at::Tensor global_norm(const at::Tensor& local_norm) override {
    if (ep_ == 1) return local_norm;
    const auto own = experts_->own_squares().to(local_norm.device());
    const auto group = experts_->group_squares().to(local_norm.device());
    return (local_norm.to(at::kFloat).pow(2) - own + group)
        .clamp_min(0)
        .sqrt()
        .to(local_norm.scalar_type());
  }

  std::vector<StateSlice> state_slices(Model& model, torch::optim::Optimizer* optimizer) override {
    std::vector<StateSlice> slices = DataParallel::state_slices(model, optimizer);
    experts_->declare_shares(slices);
    return slices;
  }

  void shard_state(Model&, torch::optim::Optimizer& optimizer) override {
    experts_->shard(optimizer);
  }

  void before_restore(Model&) override { experts_->make_whole_shaped(); }

 private:
  int ep_;
  std::unique_ptr<ExpertPlacement> experts_;
  std::unique_ptr<OverlappedAllReduce> reducer_;
};

std::vector<ParamSpec> ddp_params() {
  auto params = data_parallel_params();
  params.push_back(expert_parallel_param(/*built=*/true));
  return params;
}

const bool registered = ParallelRegistry::add(
    {"ddp",
     "data parallel over c10d (Gloo on CPU, NCCL on CUDA): broadcast, bucketed all-reduce "
     "overlapping backward; experts split over parallel.ep ranks",
     ddp_params()},
    [](const Params& p, c10::DeviceType device) -> std::shared_ptr<ParallelStrategy> {
      expert_world_shape(p, read_world_env().world_size);  // before joining: every rank refuses
      return std::make_shared<DistributedDataParallel>(p, device);
    });
const bool shaped = add_world_shape_rule("ddp", expert_world_shape);

}  // namespace
}  // namespace kiln
