// Expert parallelism under the data-parallel strategies (parallel.ep, for ddp and fsdp): the world
// is cut into groups of ep consecutive ranks, and rank r holds share r % ep of the experts of every
// mixture-of-experts layer (dim-0 slices of its stacked experts, core/layers/expert_exchange.h);
// its tokens reach the group's other experts and come back by all-to-all. Every other parameter
// stays data parallel over the whole world. The world / ep ranks that hold one share (one per
// group) are its replicas: an expert's gradient is summed over them and divided by the world,
// which is the mean over ranks that data parallelism takes of every other gradient. A rank routes
// its own micro-batch, as one process routes each of its micro-batches: the router's losses and
// an expert's capacity count that micro-batch's tokens, wherever its experts live.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/api/parallel.h"
#include "core/config/params.h"

namespace torch::optim {
class Optimizer;
}

namespace kiln {

class Communicator;
class Model;

// parallel.ep: `built` for the strategies that place experts (ddp, fsdp); the others declare it
// too, so that setting it is refused in refuse_unbuilt_expert_parallel's words, not as an unknown
// key (whose suggestion, parallel.tp or pp, would mislead).
ParamSpec expert_parallel_param(bool built);
// A ParamError for parallel.ep > 1 under `strategy`, which has no form for experts split over
// ranks.
void refuse_unbuilt_expert_parallel(const Params& params, const std::string& strategy);
// A UserError unless parallel.ep divides a world of `world` ranks; the data world is all of it.
WorldShape expert_world_shape(const Params& params, int world);

class ExpertPlacement {
 public:
  // Collective. Gives every mixture-of-experts layer of `model` (found among its modules) its
  // place; with ep > 1, each keeps this rank's share of its experts. `model` holds rank 0's
  // weights on every rank. A ParamError of parallel.ep for ep > 1 and a model without experts, or
  // a layer whose experts are not a multiple of ep.
  ExpertPlacement(Communicator& world, Model& model, int ep);
  ~ExpertPlacement();
  ExpertPlacement(const ExpertPlacement&) = delete;
  ExpertPlacement& operator=(const ExpertPlacement&) = delete;

  // `parameters` less the expert shares, whose gradients finish_gradients handles; the shares'
  // TensorImpl addresses.
  std::vector<at::Tensor> data_parallel(const std::vector<at::Tensor>& parameters) const;
  const std::unordered_set<const void*>& shares() const { return share_set_; }
  // Collective. After the last backward of a step: each share's gradient is the one-process
  // gradient of those experts (summed over the replicas, divided by the world).
  void finish_gradients();
  // The squared norm of this rank's shares' gradients, and (collective) of its whole group's.
  at::Tensor own_squares() const;
  at::Tensor group_squares() const;

  // Snapshots: the shares and their optimizer state among `slices` (ParallelStrategy's
  // state_slices) declared as dim-0 slices of the whole experts, each written by the first
  // group's rank that holds it. For a snapshot of whole files: make_whole_shaped gives the shares
  // whole shapes before the load, and shard keeps this rank's share after it.
  void declare_shares(std::vector<StateSlice>& slices) const;
  void shard(torch::optim::Optimizer& optimizer);
  void make_whole_shaped();

 private:
  struct Groups;
  std::unique_ptr<Groups> groups_;
  std::vector<at::Tensor> shares_;  // this rank's slices of the stacked experts
  std::unordered_set<const void*> share_set_;
};

}  // namespace kiln
