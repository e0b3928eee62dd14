// optimizer "sgd": stochastic gradient descent with optional (Nesterov) momentum.
#include <torch/optim/sgd.h>

#include "core/api/optimizer.h"
#include "core/util/error.h"

namespace kiln {
namespace {

// LibTorch's SGD, declaring its per-parameter state (core/api/optimizer.h).
class DeclaredSgd : public torch::optim::SGD, public DeclaredState {
 public:
  using SGD::SGD;

  std::vector<torch::Tensor*> state_tensors(
      torch::optim::OptimizerParamState& entry) const override {
    return {&static_cast<torch::optim::SGDParamState&>(entry).momentum_buffer()};
  }
};

const bool registered = OptimizerRegistry::add(
    {"sgd",
     "stochastic gradient descent with optional momentum",
     {ParamSpec::real("lr", 0.1, "learning rate (the schedule's base)").at_least(0),
      ParamSpec::real("momentum", 0.0, "momentum factor; 0 = plain SGD").at_least(0).at_most(1),
      ParamSpec::flag("nesterov", false, "Nesterov momentum (needs momentum > 0)"),
      ParamSpec::real("weight_decay", 0.0, "L2 penalty added to the gradient").at_least(0)}},
    [](const Params& p,
       const std::vector<torch::Tensor>& params) -> std::shared_ptr<torch::optim::Optimizer> {
      if (p.flag("nesterov") && p.real("momentum") <= 0) {
        throw ParamError("nesterov", "optimizer.nesterov = true needs optimizer.momentum > 0");
      }
      return std::make_shared<DeclaredSgd>(params, torch::optim::SGDOptions(p.real("lr"))
                                                       .momentum(p.real("momentum"))
                                                       .nesterov(p.flag("nesterov"))
                                                       .weight_decay(p.real("weight_decay")));
    });

}  // namespace
}  // namespace kiln
