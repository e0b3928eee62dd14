// Optimizer plugins build a torch::optim::Optimizer over the model's parameters. The learning
// rate they are configured with is the schedule's base; the trainer overwrites each group's lr
// every step.
//
// Over a run: assemble() calls the factory once per rank, after the parallel strategy's
// attach(), with every parameter of the model (on the run's device, but for the layers a
// pipeline stage never runs, which attach() moved to the CPU). Each step the trainer sets
// the lr (set_lr), calls zero_grad(), and, unless the step is skipped, step() once the gradients
// are synced, unscaled and clipped. step() must pass over parameters without a gradient: a rank
// of a sharding strategy (zero, pipeline) holds gradients only for its part. Snapshots keep the
// state through save() and load(); a sharding strategy gathers the ranks' parts on rank 0 before
// and erases other ranks' entries after (core/distributed/data_parallel.h), so the per-parameter
// state must live in state(), and save()/load() must round-trip a state that covers only some
// parameters.
#pragma once

#include <functional>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include <torch/optim/optimizer.h>

#include "core/api/model.h"
#include "core/config/registry.h"

namespace kiln {

// The parameters an optimizer is built over: the model's, in its parameters() order. `hidden`,
// where the caller knows it, says of each whether it belongs to one of the model's inner layers
// (its blocks) rather than to its first (the embedding) or last (the head): muon orthogonalises
// only those. A plain vector of tensors converts to it with `hidden` empty, so a factory may take
// `const std::vector<torch::Tensor>&` and ignore the rest.
struct ModelParameters : std::vector<torch::Tensor> {
  ModelParameters(std::vector<torch::Tensor> tensors = {})  // NOLINT: converts on purpose
      : std::vector<torch::Tensor>(std::move(tensors)) {}
  std::vector<bool> hidden;  // empty = unknown
};

// `model`'s trainable parameters (an adapter freezes the model's own: core/api/adapter.h), with
// `hidden` from its layers(): what assemble() builds the optimizer on.
inline ModelParameters parameters_of(const Model& model) {
  std::unordered_set<const void*> inner;
  const auto& layers = model.layers();
  for (size_t i = 1; i + 1 < layers.size(); ++i) {
    for (const auto& p : layers[i]->parameters())
      inner.insert(p.unsafeGetTensorImpl());
  }
  ModelParameters out;
  for (const auto& p : model.parameters()) {
    if (!p.requires_grad()) continue;
    out.push_back(p);
    out.hidden.push_back(inner.count(p.unsafeGetTensorImpl()) > 0);
  }
  return out;
}

// What an optimizer declares of its per-parameter state (the entry state() keeps under the
// parameter's key): the entry's tensors, each holding one value per element of that parameter
// (exp_avg, exp_avg_sq, a momentum buffer), so that a strategy cuts and joins them by their
// parameter's own rule (fsdp's row blocks, tensor parallelism's slices) rather than by guessing
// from shapes, and their bytes are counted without serialising the optimizer. Step counts are
// not tensors and are not listed; a tensor an option leaves undefined (amsgrad's max_exp_avg_sq)
// is listed, and callers pass over it. tests/unit/api/optimizer_state_test.cpp checks every
// registered optimizer's declaration against LibTorch's own serialisation of its state.
class DeclaredState {
 public:
  virtual ~DeclaredState() = default;
  virtual std::vector<torch::Tensor*> state_tensors(
      torch::optim::OptimizerParamState& entry) const = 0;
};

// The defined state tensors of `param`'s entry in `optimizer`'s state, to read or replace in
// place; empty while it has none (before its first step). std::logic_error for an optimizer that
// does not implement DeclaredState (a plugin breaking the contract above).
std::vector<torch::Tensor*> parameter_state(torch::optim::Optimizer& optimizer,
                                            const torch::Tensor& param);
// The bytes of every state tensor `optimizer` holds.
int64_t optimizer_state_bytes(torch::optim::Optimizer& optimizer);

// An optimizer whose parameters hold, while it trains, a point that is not the one to evaluate:
// schedule-free AdamW computes gradients at y and averages its iterates into x (Defazio et al.
// 2024), and x is the model. Evaluation, task scores and a snapshot's model.pt (so eval, sample
// and export) use x; training goes on at y, restored bit for bit (kept in the state meanwhile,
// and in a snapshot's optimizer state).
class AveragedIterate {
 public:
  virtual ~AveragedIterate() = default;
  // x into the parameters, y kept in the state; false (nothing done) when they hold x already.
  virtual bool use_average() = 0;
  // y back into the parameters; nothing when they hold it.
  virtual void use_training_point() = 0;
};

// While it lives, `optimizer`'s parameters hold its averaged iterate, for an optimizer that has
// one (what it switched, it switches back); nothing for any other.
class AveragedIterateScope {
 public:
  explicit AveragedIterateScope(torch::optim::Optimizer* optimizer)
      : iterate_(dynamic_cast<AveragedIterate*>(optimizer)) {
    switched_ = iterate_ && iterate_->use_average();
  }
  ~AveragedIterateScope() {
    if (switched_) iterate_->use_training_point();
  }
  AveragedIterateScope(const AveragedIterateScope&) = delete;
  AveragedIterateScope& operator=(const AveragedIterateScope&) = delete;

 private:
  AveragedIterate* iterate_;
  bool switched_ = false;
};

// After a snapshot was loaded to train on: the training point back in the parameters (the
// snapshot's model.pt holds the averaged iterate). Nothing for other optimizers.
inline void use_training_point(torch::optim::Optimizer& optimizer) {
  if (auto* iterate = dynamic_cast<AveragedIterate*>(&optimizer)) iterate->use_training_point();
}

struct OptimizerKind {
  static constexpr const char* name = "optimizer";
  using Product = torch::optim::Optimizer;
  using Factory = std::function<std::shared_ptr<torch::optim::Optimizer>(
      const Params&, const ModelParameters& parameters)>;
};
using OptimizerRegistry = Registry<OptimizerKind>;

// Whether decoupled weight decay applies to `param`: as in GPT-2 recipes, to parameters of two or
// more dimensions (matmul weights, embeddings, adapter matrices), never to biases or norm gains.
// adamw and schedule_free_adamw both ask this.
inline bool takes_weight_decay(const torch::Tensor& param) {
  return param.dim() >= 2;
}

inline double configured_lr(const torch::optim::Optimizer& optimizer) {
  return optimizer.param_groups().front().options().get_lr();
}

inline void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups())
    group.options().set_lr(lr);
}

}  // namespace kiln
