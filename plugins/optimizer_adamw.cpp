// optimizer "adamw": Adam with decoupled weight decay (Loshchilov & Hutter). As in GPT-2
// recipes, decay applies only to parameters of 2 or more dimensions (matmul weights and
// embeddings), never to biases or LayerNorm gains.
#include <torch/optim/adamw.h>

#include "core/optimizer.h"

namespace kiln {
namespace {

std::shared_ptr<torch::optim::Optimizer> make_adamw(const Params& p,
                                                    const std::vector<torch::Tensor>& params) {
  auto options = [&](double weight_decay) {
    return torch::optim::AdamWOptions(p.real("lr"))
        .betas({p.real("beta1"), p.real("beta2")})
        .eps(p.real("eps"))
        .weight_decay(weight_decay);
  };
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& t : params)
    (t.dim() >= 2 ? decay : no_decay).push_back(t);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!decay.empty()) {
    groups.emplace_back(
        decay, std::make_unique<torch::optim::AdamWOptions>(options(p.real("weight_decay"))));
  }
  if (!no_decay.empty()) {
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(options(0.0)));
  }
  return std::make_shared<torch::optim::AdamW>(std::move(groups), options(0.0));
}

const bool registered = OptimizerRegistry::add(
    {"adamw",
     "AdamW; weight decay on parameters of 2+ dimensions only",
     {ParamSpec::real("lr", 6e-4, "peak learning rate (the schedule's base)").at_least(0),
      ParamSpec::real("beta1", 0.9, "decay of the first-moment average")
          .at_least(0)
          .at_most(0.999999),
      ParamSpec::real("beta2", 0.95, "decay of the second-moment average")
          .at_least(0)
          .at_most(0.999999),
      ParamSpec::real("eps", 1e-8, "added to the denominator for stability").at_least(0),
      ParamSpec::real("weight_decay", 0.1, "decoupled decay of 2D+ parameters").at_least(0)},
     true},
    make_adamw);

}  // namespace
}  // namespace kiln
