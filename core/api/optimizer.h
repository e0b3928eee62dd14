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
// and erases other ranks' entries after (core/dist/data_parallel.h), so the per-parameter state
// must live in state(), and save()/load() must round-trip a state that covers only some
// parameters.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "core/config/registry.h"

namespace kiln {

struct OptimizerKind {
  static constexpr const char* name = "optimizer";
  using Product = torch::optim::Optimizer;
  // `parameters`: the model's, in its parameters() order.
  using Factory = std::function<std::shared_ptr<torch::optim::Optimizer>(
      const Params&, const std::vector<torch::Tensor>& parameters)>;
};
using OptimizerRegistry = Registry<OptimizerKind>;

inline double configured_lr(const torch::optim::Optimizer& optimizer) {
  return optimizer.param_groups().front().options().get_lr();
}

inline void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups())
    group.options().set_lr(lr);
}

}  // namespace kiln
