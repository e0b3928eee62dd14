// optimizer "adam": Adam (Kingma & Ba) with optional L2 weight decay added to the gradient
// (coupled, unlike adamw's decoupled decay).
#include <torch/optim/adam.h>

#include "core/api/optimizer.h"
#include "plugins/adam_params.h"

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
    {"adam", "Adam; weight_decay is an L2 term in the gradient (use adamw for decoupled decay)",
     adam_params({1e-3, 0.999, 0.0, "L2 penalty added to the gradient"})},
    [](const Params& p,
       const std::vector<torch::Tensor>& params) -> std::shared_ptr<torch::optim::Optimizer> {
      return std::make_shared<DeclaredAdam>(params, torch::optim::AdamOptions(p.real("lr"))
                                                        .betas({p.real("beta1"), p.real("beta2")})
                                                        .eps(p.real("eps"))
                                                        .weight_decay(p.real("weight_decay")));
    });

}  // namespace
}  // namespace kiln
