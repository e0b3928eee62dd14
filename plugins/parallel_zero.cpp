// parallel "zero": data parallel with DeepSpeed's ZeRO redundancy removal. Each parameter has
// one owning rank (contiguous runs of parameters, balanced by element count); a rank keeps the
// optimizer state of the parameters it owns only, updates only those, and then every owner
// broadcasts its updated parameters to the others.
//   stage 1: gradients are all-reduced as in ddp (overlapping backward); each rank then drops
//            the gradients it does not own before the update, so optimizer state is 1/world.
//   stage 2: gradients are reduce-scattered instead: each rank receives the sum of its own
//            shard only (NCCL's reduce_scatter; on Gloo, which lacks it, an all-reduce of which
//            each rank keeps its shard), so gradients beyond the shard are freed before the update.
// The gradient norm for clipping is summed over the shards. Snapshots hold the whole optimizer
// state (rank 0 collects the shards first), so they resume at any world size and under ddp.
#include <unordered_set>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/api/model.h"
#include "core/dist/data_parallel.h"

namespace kiln {
namespace {

class ZeroRedundancy : public DataParallel {
 public:
  ZeroRedundancy(const Params& p, c10::DeviceType device)
      : DataParallel(p, device), stage_(p.integer("stage")) {}

  void attach(Model& model) override {
    DataParallel::attach(model);
    assign_owners(model.parameters());
    if (stage_ == 1) {
      all_reduce_ =
          std::make_unique<OverlappedAllReduce>(comm(), model.parameters(), bucket_bytes());
    }
  }

  void begin_micro_step(bool final_micro_step) override {
    if (all_reduce_) all_reduce_->arm(final_micro_step);
  }

  void finish_gradients(Model&) override {
    if (all_reduce_) {
      all_reduce_->finish();
    } else {
      reduce_scatter_gradients();
    }
    for (int r = 0; r < world_size(); ++r) {
      if (r == rank()) continue;
      for (auto& p : owned_[r])
        p.mutable_grad() = at::Tensor();
    }
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

  void gather_state(Model&, torch::optim::Optimizer& optimizer) override {
    if (world_size() == 1) return;
    std::vector<int> senders;
    for (int r = 1; r < world_size(); ++r)
      senders.push_back(r);
    gather_optimizer_state(comm(), optimizer, senders, fmt::format("zero/{}/", gathers_++));
  }

  void shard_state(Model&, torch::optim::Optimizer& optimizer) override {
    keep_optimizer_state(optimizer, owned_by_me_);
  }

 private:
  // Rank r owns the parameters whose middle element falls in the r-th of `world` equal slices
  // of all elements: contiguous runs, balanced to within one parameter.
  void assign_owners(const std::vector<at::Tensor>& parameters) {
    int64_t total = 0;
    for (auto& p : parameters)
      total += p.numel();
    owned_.assign(static_cast<size_t>(world_size()), {});
    int64_t offset = 0;
    for (auto& p : parameters) {
      const int64_t middle = offset + p.numel() / 2;
      const int owner =
          static_cast<int>(std::min<int64_t>(world_size() - 1, middle * world_size() / total));
      offset += p.numel();
      if (!p.requires_grad()) continue;
      owned_[owner].push_back(p);
      if (owner == rank()) owned_by_me_.insert(p.unsafeGetTensorImpl());
    }
  }

  // Rounds of one reduce-scatter each: every rank's chunk is the next ~bucket_mb/world of
  // gradients it owns, padded to the longest chunk of the round.
  void reduce_scatter_gradients() {
    const int world = world_size();
    const double scale = 1.0 / static_cast<double>(world);
    std::vector<size_t> next(static_cast<size_t>(world), 0);
    struct Round {
      std::vector<at::Tensor> mine;  // my gradients in this round
      at::Tensor output;
      Communicator::Pending pending;
    };
    std::vector<Round> rounds;
    const int64_t chunk_bytes = std::max<int64_t>(1, bucket_bytes() / world);
    while (true) {
      std::vector<std::vector<at::Tensor>> chunks(static_cast<size_t>(world));
      bool any = false;
      for (int r = 0; r < world; ++r) {
        int64_t bytes = 0;
        auto& owned = owned_[static_cast<size_t>(r)];
        while (next[r] < owned.size() && bytes < chunk_bytes) {
          const at::Tensor& grad = owned[next[r]++].grad();
          if (!grad.defined()) continue;
          chunks[r].push_back(grad);
          bytes += static_cast<int64_t>(grad.nbytes());
        }
        any = any || !chunks[r].empty();
      }
      if (!any) break;
      int64_t longest = 0;
      std::vector<at::Tensor> flats(static_cast<size_t>(world));
      at::TensorOptions options;
      for (int r = 0; r < world; ++r) {
        if (chunks[r].empty()) continue;
        flats[r] = flatten(chunks[r]);
        options = flats[r].options();
        longest = std::max(longest, flats[r].numel());
      }
      at::Tensor input = at::zeros({longest * world}, options);
      for (int r = 0; r < world; ++r) {
        if (flats[r].defined()) input.narrow(0, r * longest, flats[r].numel()).copy_(flats[r]);
      }
      Round round{chunks[static_cast<size_t>(rank())], at::empty({longest}, options), {}};
      round.pending = comm().start_reduce_scatter_sum(input, round.output);
      rounds.push_back(std::move(round));
    }
    for (auto& round : rounds) {
      round.pending.wait();
      if (round.mine.empty()) continue;
      round.output.mul_(scale);
      copy_from_flat(round.output, round.mine);
    }
  }

  int64_t stage_;
  int64_t gathers_ = 0;  // snapshots so far: each gather's store keys are new
  std::vector<std::vector<at::Tensor>> owned_;  // by owning rank, in model order
  std::unordered_set<const void*> owned_by_me_;
  std::unique_ptr<OverlappedAllReduce> all_reduce_;  // stage 1
};

std::vector<ParamSpec> zero_params() {
  std::vector<ParamSpec> params = data_parallel_params();
  params.push_back(ParamSpec::integer("stage", 1,
                                      "1 = optimizer state sharded; 2 = gradients sharded too "
                                      "(reduce-scatter)")
                       .at_least(1)
                       .at_most(2));
  return params;
}

const bool registered = ParallelRegistry::add(
    {"zero",
     "ZeRO data parallel: each rank keeps and updates only its shard of the optimizer state "
     "(stage 1) and of the gradients (stage 2)",
     zero_params()},
    [](const Params& p, c10::DeviceType device) -> std::shared_ptr<ParallelStrategy> {
      return std::make_shared<ZeroRedundancy>(p, device);
    });

}  // namespace
}  // namespace kiln
