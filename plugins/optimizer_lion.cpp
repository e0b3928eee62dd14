// optimizer "lion": EvoLved Sign Momentum (Chen et al. 2023). The update is the sign of an
// interpolation between momentum and gradient, so every coordinate moves by exactly lr: use a
// learning rate 3-10x smaller than AdamW's and a weight decay 3-10x larger. One moment buffer
// per parameter instead of Adam's two.
#include <torch/optim/optimizer.h>
#include <torch/optim/serialize.h>

#include "core/api/optimizer.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

struct LionOptions : public torch::optim::OptimizerCloneableOptions<LionOptions> {
  explicit LionOptions(double lr = 1e-4) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.99;
  TORCH_ARG(double, weight_decay) = 0.0;

 public:  // TORCH_ARG leaves the section private
  void serialize(torch::serialize::OutputArchive& archive) const override {
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta1);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta2);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
  }
  void serialize(torch::serialize::InputArchive& archive) override {
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta1);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta2);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
  }
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct LionParamState : public torch::optim::OptimizerCloneableParamState<LionParamState> {
  TORCH_ARG(torch::Tensor, exp_avg);

 public:
  void serialize(torch::serialize::OutputArchive& archive) const override {
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg);
  }
  void serialize(torch::serialize::InputArchive& archive) override {
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg);
  }
};

class Lion : public torch::optim::Optimizer, public DeclaredState {
 public:
  std::vector<torch::Tensor*> state_tensors(
      torch::optim::OptimizerParamState& entry) const override {
    return {&static_cast<LionParamState&>(entry).exp_avg()};
  }

  Lion(std::vector<torch::Tensor> params, LionOptions defaults)
      : Optimizer({torch::optim::OptimizerParamGroup(std::move(params))},
                  std::make_unique<LionOptions>(defaults)) {}

  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::Tensor loss = closure ? closure() : torch::Tensor();  // with autograd, before the guard
    torch::NoGradGuard no_grad;
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const LionOptions&>(group.options());
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        const auto& grad = p.grad();
        auto key = compat::optimizer_state_key(p);
        if (!state_.count(key)) {
          auto fresh = std::make_unique<LionParamState>();
          fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          state_[key] = std::move(fresh);
        }
        auto& exp_avg = static_cast<LionParamState&>(*state_[key]).exp_avg();
        p.mul_(1.0 - o.lr() * o.weight_decay());
        p.add_((exp_avg * o.beta1() + grad * (1.0 - o.beta1())).sign_(), -o.lr());
        exp_avg.mul_(o.beta2()).add_(grad, 1.0 - o.beta2());
      }
    }
    return loss;
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    torch::optim::serialize<LionParamState, LionOptions>(archive, *this);
  }
  void load(torch::serialize::InputArchive& archive) override {
    torch::optim::serialize<LionParamState, LionOptions>(archive, *this);
  }
};

const bool registered = OptimizerRegistry::add(
    {"lion",
     "Lion: sign of interpolated momentum; one state buffer per parameter",
     {ParamSpec::real("lr", 1e-4, "learning rate (the schedule's base)").at_least(0),
      ParamSpec::real("beta1", 0.9, "momentum weight in the update's sign").at_least(0).at_most(1),
      ParamSpec::real("beta2", 0.99, "decay of the momentum buffer").at_least(0).at_most(1),
      ParamSpec::real("weight_decay", 0.0, "decoupled weight decay").at_least(0)}},
    [](const Params& p,
       const std::vector<torch::Tensor>& params) -> std::shared_ptr<torch::optim::Optimizer> {
      return std::make_shared<Lion>(params, LionOptions(p.real("lr"))
                                                .beta1(p.real("beta1"))
                                                .beta2(p.real("beta2"))
                                                .weight_decay(p.real("weight_decay")));
    });

}  // namespace
}  // namespace kiln
