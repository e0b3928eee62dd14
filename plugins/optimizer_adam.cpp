// optimizer "adam": Adam (Kingma & Ba) with optional L2 weight decay added to the gradient
// (coupled, unlike adamw's decoupled decay).
#include <torch/optim/adam.h>

#include "core/api/optimizer.h"

namespace kiln {
namespace {

// LibTorch's Adam, declaring its per-parameter state (core/api/optimizer.h).
class DeclaredAdam : public torch::optim::Adam, public DeclaredState {
 public:
  using Adam::Adam;

  std::vector<torch::Tensor*> state_tensors(
      torch::optim::OptimizerParamState& entry) const override {
    auto& s = static_cast<torch::optim::AdamParamState&>(entry);
    return {&s.exp_avg(), &s.exp_avg_sq(), &s.max_exp_avg_sq()};
  }
};

const bool registered = OptimizerRegistry::add(
    {"adam",
     "Adam; weight_decay is an L2 term in the gradient (use adamw for decoupled decay)",
     {ParamSpec::real("lr", 1e-3, "peak learning rate (the schedule's base)").at_least(0),
      ParamSpec::real("beta1", 0.9, "decay of the first-moment average")
          .at_least(0)
          .at_most(0.999999),
      ParamSpec::real("beta2", 0.999, "decay of the second-moment average")
          .at_least(0)
          .at_most(0.999999),
      ParamSpec::real("eps", 1e-8, "added to the denominator for stability").at_least(0),
      ParamSpec::real("weight_decay", 0.0, "L2 penalty added to the gradient").at_least(0)}},
    [](const Params& p,
       const std::vector<torch::Tensor>& params) -> std::shared_ptr<torch::optim::Optimizer> {
      return std::make_shared<DeclaredAdam>(params, torch::optim::AdamOptions(p.real("lr"))
                                                        .betas({p.real("beta1"), p.real("beta2")})
                                                        .eps(p.real("eps"))
                                                        .weight_decay(p.real("weight_decay")));
    });

}  // namespace
}  // namespace kiln
