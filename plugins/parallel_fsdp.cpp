// parallel "fsdp": fully sharded data parallel (ZeRO stage 3). Each rank keeps 1/world of every
// parameter, of its gradient and of its optimizer state (dim-0 row blocks); a layer's weights
// are gathered whole just before its forward and again before its backward, and freed after
// each; gradients are summed over the ranks as backward produces them, each rank keeping its
// block (core/distributed/fsdp_units.h says how and what it costs on Gloo). Every micro-step of
// gradient accumulation communicates, so no whole gradient outlives the next layer's backward.
// The optimizer steps on the blocks; clipping uses the norm summed over all blocks. In a snapshot
// each rank writes its blocks (the real rows of them) of every weight and optimizer state, and a
// run resumes at any world size and under any strategy, each rank reading the rows it holds. An
// adapter's frozen base is sharded and gathered as any weight, its tensors with their layer's.
// parallel.ep > 1 splits each mixture-of-experts layer's experts over groups of ep ranks
// (core/distributed/expert_placement.h); fsdp leaves those shares whole on their ranks.
#include <fmt/format.h>

#include "core/api/model.h"
#include "core/distributed/data_parallel.h"
#include "core/distributed/expert_placement.h"
#include "core/distributed/fsdp_units.h"
#include "core/util/error.h"

namespace kiln {
namespace {

class FullyShardedDataParallel : public DataParallel {
 public:
  FullyShardedDataParallel(const Params& p, c10::DeviceType device)
      : DataParallel(p, device), ep_(static_cast<int>(p.integer("ep"))) {}

  void check_optimizer(const std::string& optimizer) const override {
    if (optimizer == "muon") {
      throw UserError(
          "optimizer 'muon' orthogonalises each whole weight matrix, but parallel 'fsdp' gives "
          "each rank only rows of it: use optimizer.type = \"adamw\" or parallel.type = \"zero\"");
    }
  }

  void attach(Model& model) override {
    DataParallel::attach(model);
    experts_ = std::make_unique<ExpertPlacement>(comm(), model, ep_);
    units_ = std::make_unique<FsdpUnits>(comm(), model, bucket_bytes(), experts_->shares());
  }

  void begin_micro_step(bool) override { units_->begin_micro_step(); }

  void finish_gradients(Model&) override {
    units_->finish_gradients();
    experts_->finish_gradients();
  }

  std::optional<int64_t> peak_gradient_bytes() const override {
    return units_->peak_gradient_bytes();
  }

  // Every rank holds only its blocks of the gradients, in a world of one too (then its block
  // is the whole, but the refusal of fp16 must not depend on the world size).
  bool replicates_gradients() const override { return false; }

  // Expert shares are whole on each of their replicas: counted once per group, not per rank.
  at::Tensor global_norm(const at::Tensor& local_norm) override {
    const auto own = experts_->own_squares().to(local_norm.device());
    const auto group = experts_->group_squares().to(local_norm.device());
    return (sum(local_norm * local_norm - own) + group).clamp_min(0).sqrt();
  }

  std::vector<StateSlice> state_slices(Model& model, torch::optim::Optimizer* optimizer) override {
    std::vector<StateSlice> slices = whole_state_slices(model, optimizer, rank() == 0);
    units_->declare_blocks(slices);
    experts_->declare_shares(slices);
    return slices;
  }

  void shard_state(Model&, torch::optim::Optimizer& optimizer) override {
    units_->shard(optimizer);
    experts_->shard(optimizer);
  }

  void before_restore(Model&) override {
    units_->make_whole_shaped();
    experts_->make_whole_shaped();
  }

 private:
  int ep_;
  std::unique_ptr<ExpertPlacement> experts_;
  std::unique_ptr<FsdpUnits> units_;
};

std::vector<ParamSpec> fsdp_params() {
  auto params = data_parallel_params();
  params.push_back(expert_parallel_param(/*built=*/true));
  return params;
}

const bool registered = ParallelRegistry::add(
    {"fsdp",
     "fully sharded data parallel (ZeRO stage 3): each rank keeps 1/world of every parameter, "
     "gradient and optimizer state, gathering a layer's weights only while it runs; experts "
     "split over parallel.ep ranks",
     fsdp_params()},
    [](const Params& p, c10::DeviceType device) -> std::shared_ptr<ParallelStrategy> {
      expert_world_shape(p, read_world_env().world_size);  // before joining: every rank refuses
      return std::make_shared<FullyShardedDataParallel>(p, device);
    });
const bool shaped = add_world_shape_rule("fsdp", expert_world_shape);

}  // namespace
}  // namespace kiln
