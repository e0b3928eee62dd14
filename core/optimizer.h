// Optimizer plugins build a torch::optim::Optimizer over the model's parameters. The learning
// rate they are configured with is the schedule's base; the trainer overwrites each group's lr
// every step.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "core/registry.h"

namespace kiln {

struct OptimizerKind {
  static constexpr const char* name = "optimizer";
  using Product = torch::optim::Optimizer;
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
