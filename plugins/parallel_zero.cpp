// parallel "zero": data parallel with DeepSpeed's ZeRO redundancy removal. Each parameter has
// one owning rank (contiguous runs of parameters, balanced by element count); a rank keeps the
// optimizer state of the parameters it owns only, updates only those, and then every owner
// broadcasts its updated parameters to the others.
//   stage 1: gradients are all-reduced as in ddp (overlapping the last micro-step's backward);
//            each rank then drops the gradients it does not own before the update, so optimizer
//            state is 1/world but every rank holds every gradient at the end of backward.
//   stage 2: gradients are summed into their owner bucket by bucket while backward runs, and
//            the other ranks release them as soon as their bucket is packed, so a rank holds its
//            shard plus about one bucket of others' gradients (core/distributed/reduce_to_owners.h,
//            which also says what it costs on Gloo); every micro-step communicates.
// The gradient norm for clipping is summed over the shards. In a snapshot each owner writes its
// parameters' optimizer state, and rank 0 the weights; they resume at any world size and under
// any strategy.
#include <unordered_set>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/api/model.h"
#include "core/distributed/data_parallel.h"
#include "core/distributed/expert_placement.h"
#include "core/distributed/reduce_to_owners.h"
#include "core/util/error.h"

namespace kiln {
namespace {

class ZeroRedundancy : public DataParallel {
 public:
  // Each parameter's state lives on its owner alone, and an averaging optimizer turns the
  // parameters into its averaged iterate from that state: the other ranks' copies would not.
  void check_optimizer(const std::string& optimizer) const override {
    if (optimizer == "schedule_free_adamw") {
      throw UserError(
          "optimizer 'schedule_free_adamw' keeps each parameter's training point in its state, "
          "which parallel 'zero' gives only the parameter's owner: use parallel.type = \"ddp\"");
    }
  }

  ZeroRedundancy(const Params& p, c10::DeviceType device)
      : DataParallel(p, device), stage_(p.integer("stage")) {}

  void attach(Model& model) override {
    DataParallel::attach(model);
    assign_owners(model.parameters());
    if (stage_ == 2 && world_size() > 1) {
      to_owners_ = std::make_unique<ReduceToOwners>(comm(), owned_, bucket_bytes());
    } else {
      all_reduce_ =
          std::make_unique<OverlappedAllReduce>(comm(), model.parameters(), bucket_bytes());
    }
  }

  void begin_micro_step(bool final_micro_step) override {
    if (to_owners_) {
      to_owners_->begin_micro_step();
    } else {
      all_reduce_->arm(final_micro_step);
    }
  }

  void finish_gradients(Model& model) override {
    if (to_owners_) {
      to_owners_->finish();
      return;
    }
    all_reduce_->finish();
    peak_gradient_bytes_ = 0;  // every gradient is held now, at its peak
    for (auto& p : model.parameters()) {
      if (p.grad().defined()) peak_gradient_bytes_ += static_cast<int64_t>(p.grad().nbytes());
    }
    for (int r = 0; r < world_size(); ++r) {
      if (r == rank()) continue;
      for (auto& p : owned_[r])
        p.mutable_grad() = at::Tensor();
    }
  }

  std::optional<int64_t> peak_gradient_bytes() const override {
    return to_owners_ ? to_owners_->peak_bytes() : peak_gradient_bytes_;
  }

  bool replicates_gradients() const override { return world_size() == 1; }

  at::Tensor global_norm(const at::Tensor& local_norm) override {
    return sum(local_norm * local_norm).sqrt();
  }

  void finish_update(Model&) override {
    if (world_size() == 1) return;
    at::NoGradGuard no_grad;
    for (int owner = 0; owner < world_size(); ++owner) {
      for (auto& bucket : make_buckets(owned_[owner], bucket_bytes())) {
        std::vector<at::Tensor> flat = {flatten(bucket)};
        comm().broadcast(flat, owner);
        if (owner != rank()) copy_from_flat(flat[0], bucket);
      }
    }
  }

  // The weights are whole everywhere (rank 0 writes them); each owner writes and reads the
  // optimizer state of its parameters alone.
  std::vector<StateSlice> state_slices(Model& model, torch::optim::Optimizer* optimizer) override {
    std::vector<StateSlice> slices;
    for (auto& slice : whole_state_slices(model, optimizer, rank() == 0)) {
      const bool state = slice.tensor.rfind("optimizer/", 0) == 0;
      if (state && !owned_by_me_.count(slice.parameter.unsafeGetTensorImpl())) continue;
      slice.writes = slice.writes || state;
      slices.push_back(std::move(slice));
    }
    return slices;
  }

  void shard_state(Model&, torch::optim::Optimizer& optimizer) override {
    keep_optimizer_state(optimizer, owned_by_me_);
  }

 private:
  // Rank r owns the trainable parameters whose middle element falls in the r-th of `world`
  // equal slices of all trainable elements: contiguous runs, balanced to within one parameter.
  // Frozen ones (an adapter's base) have no state to own, and counting them would hand every
  // adapter weight, registered after the model's, to the last rank.
  void assign_owners(const std::vector<at::Tensor>& parameters) {
    int64_t total = 0;
    for (auto& p : parameters)
      total += p.requires_grad() ? p.numel() : 0;
    owned_.assign(static_cast<size_t>(world_size()), {});
    int64_t offset = 0;
    for (auto& p : parameters) {
      if (!p.requires_grad()) continue;
      const int64_t middle = offset + p.numel() / 2;
      const int owner =
          static_cast<int>(std::min<int64_t>(world_size() - 1, middle * world_size() / total));
      offset += p.numel();
      owned_[owner].push_back(p);
      if (owner == rank()) owned_by_me_.insert(p.unsafeGetTensorImpl());
    }
  }

  int64_t stage_;
  std::vector<std::vector<at::Tensor>> owned_;  // by owning rank, in model order
  std::unordered_set<const void*> owned_by_me_;
  std::unique_ptr<OverlappedAllReduce> all_reduce_;  // stage 1, or a world of one
  std::unique_ptr<ReduceToOwners> to_owners_;        // stage 2
  int64_t peak_gradient_bytes_ = 0;                  // stage 1's, counted at finish_gradients
};

std::vector<ParamSpec> zero_params() {
  std::vector<ParamSpec> params = data_parallel_params();
  params.push_back(ParamSpec::integer("stage", 1,
                                      "1 = optimizer state sharded; 2 = gradients sharded too "
                                      "(each bucket summed into its owner during backward)")
                       .at_least(1)
                       .at_most(2));
  params.push_back(expert_parallel_param(/*built=*/false));
  return params;
}

const bool registered = ParallelRegistry::add(
    {"zero",
     "ZeRO data parallel: each rank keeps and updates only its shard of the optimizer state "
     "(stage 1) and of the gradients (stage 2)",
     zero_params()},
    [](const Params& p, c10::DeviceType device) -> std::shared_ptr<ParallelStrategy> {
      refuse_unbuilt_expert_parallel(p, "zero");
      return std::make_shared<ZeroRedundancy>(p, device);
    });

}  // namespace
}  // namespace kiln
