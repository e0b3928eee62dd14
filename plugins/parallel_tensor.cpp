// parallel "tensor": tensor parallelism (Megatron-LM's split of attention heads and MLP units,
// core/layers/tensor_parallel.h) composed with data parallelism in a 2-D mesh of tp x dp ranks.
// Rank r sits at tensor-parallel place r % tp of data-parallel replica r / tp, so the ranks of
// one tensor-parallel group are neighbours (on one node, where their per-layer all-reduces are
// cheapest). Each replica reads its own share of the data; its tp ranks read the same batches
// and draw the same masks where their tensors are whole, each its own heads' slice of the
// attention masks (core/layers/random_draws.h). Gradients of a parameter
// slice are averaged over the replicas holding that slice (a dp group per tensor-parallel
// place, overlapped with backward like ddp); replicated parameters (embeddings, norms, the head)
// get equal gradients on every rank of a tp group, which Megatron's pairing of enter and leave
// guarantees, so they need nothing more; an adapter's tensors are cut with their layer, and its
// whole ones get their gradients summed over the tp group (core/api/adapter.h). In a snapshot
// each rank of the first replica writes its slices (state_slices), so a run resumes at any
// mesh, world size or strategy.
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <torch/optim/optimizer.h>

#include "core/api/adapter.h"
#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/distributed/data_parallel.h"
#include "core/distributed/expert_placement.h"
#include "core/distributed/tensor_parallel_ops.h"
#include "core/layers/low_rank.h"
#include "core/util/error.h"

namespace kiln {
namespace {

// Where a rank sits: tp_index within its tensor-parallel group, dp_index its replica.
struct Mesh {
  int tp = 1, dp = 1;
  int tp_index = 0, dp_index = 0;
};

// The replicas of a tp group in a world of `world` ranks: parallel.tp must divide it, and a
// given parallel.dp must be what is left.
WorldShape tensor_world_shape(const Params& p, int world) {
  const int tp = static_cast<int>(p.integer("tp"));
  if (world % tp != 0) {
    throw UserError(fmt::format(
        "parallel.tp = {} does not divide the world of {} process(es): start a multiple of tp "
        "ranks (kiln launch --nproc-per-node N) or change parallel.tp",
        tp, world));
  }
  if (const int64_t dp = p.integer("dp"); dp != 0 && dp != world / tp) {
    throw UserError(fmt::format(
        "parallel.dp = {} x parallel.tp = {} is a mesh of {} processes, but the world has {}: "
        "set parallel.dp = 0 (the world / tp) or start {} ranks",
        dp, tp, dp * tp, world, dp * tp));
  }
  return WorldShape{world / tp, 0};
}

// The mesh parallel.tp and parallel.dp ask for, checked against the world the environment
// describes, before this process joins it (so every rank refuses alike, and none builds a model).
Mesh mesh_for(const Params& p) {
  const WorldEnv world = read_world_env();
  Mesh mesh;
  mesh.tp = static_cast<int>(p.integer("tp"));
  mesh.dp = tensor_world_shape(p, world.world_size).data_world;
  mesh.tp_index = world.rank % mesh.tp;
  mesh.dp_index = world.rank / mesh.tp;
  return mesh;
}

class TensorParallel : public DataParallel {
 public:
  TensorParallel(const Params& p, c10::DeviceType device, Mesh mesh)
      : DataParallel(p, device), mesh_(mesh) {
    std::vector<int> group, replicas;
    for (int i = 0; i < mesh_.tp; ++i)
      group.push_back(mesh_.dp_index * mesh_.tp + i);
    for (int i = 0; i < mesh_.dp; ++i)
      replicas.push_back(i * mesh_.tp + mesh_.tp_index);
    tp_comm_ = comm().subgroup(fmt::format("tp{}/", mesh_.dp_index), group);
    dp_comm_ = comm().subgroup(fmt::format("dp{}/", mesh_.tp_index), replicas);
  }

  int data_rank() const override { return mesh_.dp_index; }
  int data_world() const override { return mesh_.dp; }
  int64_t tensor_parallel() const override { return mesh_.tp; }

  void check_optimizer(const std::string& optimizer) const override {
    if (optimizer == "muon" && mesh_.tp > 1) {
      throw UserError(
          "optimizer 'muon' orthogonalises each whole weight matrix, but parallel 'tensor' gives "
          "each rank only a slice of it: use optimizer.type = \"adamw\" or parallel.tp = 1");
    }
  }

  // Every rank builds the whole model from run.seed and takes rank 0's weights (as ddp), then
  // keeps its slices: the slices of one process's initialisation, whatever the mesh.
  void attach(Model& model) override {
    DataParallel::attach(model);
    const TensorParallelGroup group = tensor_parallel_group(*tp_comm_);
    std::vector<ParameterSplit> splits = model.split_for_tensor_parallel(group);
    LowRankSplits low_rank = split_low_rank_sites(model, splits, group);
    splits.insert(splits.end(), low_rank.splits.begin(), low_rank.splits.end());
    summed_ = std::move(low_rank.summed);
    std::unordered_set<const void*> sliced;
    for (auto& split : splits) {
      at::Tensor param = *model.named_parameters().find(split.name);
      std::vector<int64_t> whole = param.sizes().vec();
      whole[static_cast<size_t>(split.dim)] *= mesh_.tp;
      sliced.insert(param.unsafeGetTensorImpl());
      sliced_.push_back({std::move(split), param, std::move(whole)});
    }
    for (const auto& p : model.parameters()) {
      if (!sliced.count(p.unsafeGetTensorImpl())) replicated_.push_back(p);
    }
    if (mesh_.dp > 1) {
      replicas_ =
          std::make_unique<OverlappedAllReduce>(*dp_comm_, model.parameters(), bucket_bytes());
    }
  }

  void begin_micro_step(bool final_micro_step) override {
    if (replicas_) replicas_->arm(final_micro_step);
  }

  void finish_gradients(Model&) override {
    if (replicas_) replicas_->finish();
    std::vector<at::Tensor> parts;
    for (const auto& p : summed_) {
      if (p.grad().defined()) parts.push_back(p.grad());
    }
    if (!parts.empty()) tp_comm_->all_reduce_sum(parts);
  }

  // A rank's slices hold different gradients from its group's others; an overflow seen by one
  // rank only would make ranks disagree on skipping a step.
  bool replicates_gradients() const override { return mesh_.tp == 1; }

  // The sliced parameters' squares summed over the tp group, the replicated ones counted once
  // (every rank of the group holds them equal); the replicas hold the same after averaging.
  // Counted from the gradients, as the trainer counted local_norm, which mixes the two.
  at::Tensor global_norm(const at::Tensor& local_norm) override {
    if (mesh_.tp == 1) return local_norm;
    at::NoGradGuard no_grad;
    const auto zero = at::zeros({}, local_norm.options().dtype(at::kFloat));
    std::vector<at::Tensor> sliced = {zero.clone()};
    at::Tensor replicated = zero.clone();
    for (const auto& s : sliced_)
      add_square(sliced[0], s.param);
    for (const auto& p : replicated_)
      add_square(replicated, p);
    tp_comm_->all_reduce_sum(sliced);
    return (sliced[0] + replicated).sqrt().to(local_norm.scalar_type());
  }

  // A sliced weight's part on this rank is one box per stacked block (gpt's fused q, k, v: 3),
  // each written by the first replica's rank; replicated ones are rank 0's to write.
  std::vector<StateSlice> state_slices(Model& model, torch::optim::Optimizer* optimizer) override {
    std::unordered_map<const void*, const Sliced*> sliced;
    for (const auto& s : sliced_)
      sliced.emplace(s.param.unsafeGetTensorImpl(), &s);
    std::vector<StateSlice> slices;
    for (auto& slice : whole_state_slices(model, optimizer, rank() == 0)) {
      const auto found = slice.parameter.defined()
                             ? sliced.find(slice.parameter.unsafeGetTensorImpl())
                             : sliced.end();
      if (found == sliced.end()) {
        slices.push_back(std::move(slice));
        continue;
      }
      const Sliced& s = *found->second;
      const auto dim = static_cast<size_t>(s.split.dim);
      const int64_t block = s.whole[dim] / s.split.blocks, mine = block / mesh_.tp;
      for (int64_t b = 0; b < s.split.blocks; ++b) {
        StateSlice part = slice;
        part.whole = s.whole;
        part.offsets[dim] = b * block + mesh_.tp_index * mine;
        part.local = slice.local.narrow(s.split.dim, b * mine, mine);
        part.writes = mesh_.dp_index == 0;
        slices.push_back(std::move(part));
      }
    }
    return slices;
  }

  void shard_state(Model&, torch::optim::Optimizer& optimizer) override {
    at::NoGradGuard no_grad;
    for (auto& s : sliced_) {
      const auto slice_of = [&](const at::Tensor& whole) {
        return slice_for_rank(whole, s.split, mesh_.tp_index, mesh_.tp);
      };
      for (at::Tensor* t : parameter_state(optimizer, s.param))
        *t = slice_of(*t);
      s.param.set_data(slice_of(s.param.detach()));
    }
  }

  void before_restore(Model&) override {
    at::NoGradGuard no_grad;
    for (auto& s : sliced_)
      s.param.set_data(at::zeros(s.whole, s.param.options()));
  }

 private:
  struct Sliced {
    ParameterSplit split;
    at::Tensor param;            // the model's
    std::vector<int64_t> whole;  // its shape on one process
  };

  static void add_square(at::Tensor& sum, const at::Tensor& param) {
    if (param.grad().defined()) sum += param.grad().to(at::kFloat).pow(2).sum();
  }

  Mesh mesh_;
  std::unique_ptr<Communicator> tp_comm_, dp_comm_;
  std::vector<Sliced> sliced_;
  std::vector<at::Tensor> replicated_;  // every other parameter: whole on every rank
  // Adapter tensors whole on every rank whose gradient each rank holds a part of
  // (core/api/adapter.h): summed over the tp group.
  std::vector<at::Tensor> summed_;
  std::unique_ptr<OverlappedAllReduce> replicas_;  // dp > 1: slices averaged over replicas
};

std::vector<ParamSpec> tensor_params() {
  auto params = data_parallel_params();
  params.push_back(ParamSpec::integer("tp", 2,
                                      "ranks over which each block's heads and MLP units are "
                                      "split; consecutive ranks form a group")
                       .at_least(1)
                       .at_most(1 << 16));
  params.push_back(ParamSpec::integer("dp", 0,
                                      "data-parallel replicas of the tp group; 0 = the world "
                                      "size / tp (a given value is checked against it)")
                       .at_least(0)
                       .at_most(1 << 16));
  params.push_back(expert_parallel_param(/*built=*/false));
  return params;
}

const bool registered = ParallelRegistry::add(
    {"tensor",
     "tensor parallel (attention heads and MLP units split over parallel.tp ranks) x data "
     "parallel over the rest of the world, as a 2-D mesh",
     tensor_params()},
    [](const Params& p, c10::DeviceType device) -> std::shared_ptr<ParallelStrategy> {
      refuse_unbuilt_expert_parallel(p, "tensor");
      return std::make_shared<TensorParallel>(p, device, mesh_for(p));
    });
const bool shaped = add_world_shape_rule("tensor", tensor_world_shape);

}  // namespace
}  // namespace kiln
