// optimizer "schedule_free_adamw": Schedule-Free AdamW (Defazio, Yang, Mehta, Mishchenko, Khaled
// and Cutkosky, "The Road Less Scheduled", NeurIPS 2024; facebookresearch/schedule_free's
// AdamWScheduleFree, version 1.3 on, whose update this follows line by line). It needs no decay
// of the learning rate and no stopping time: the gradient is taken at y, a base sequence z takes
// Adam-normalised steps, and x, the model, is z's running average weighted by lr_max^2,
//   z <- z - lr g~,   x <- (1 - c) x + c z,   y <- (1 - beta1) z + beta1 x,
// with g~ = g / (sqrt(v / (1 - beta2^k)) + eps) + weight_decay y and c = w_k / sum of w. As in
// Kiln's adamw, the decay term is there only for parameters of two or more dimensions (matmul
// weights and embeddings; core/api/optimizer.h: takes_weight_decay), never for biases or norm
// gains, where the reference implementation decays whatever its group holds. Every step's x is an
// any-time result, so an asha search scores its rungs without a cooldown.
// The parameters hold y while training; eval, task scores and snapshots' model.pt hold x
// (core/api/optimizer.h: AveragedIterate), and y rides in the state meanwhile, so a resume
// continues bit for bit. The schedule must be "constant" (its warmup is the paper's warmup).
#include <cmath>

#include <torch/optim/optimizer.h>
#include <torch/optim/serialize.h>

#include "core/api/optimizer.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

struct ScheduleFreeOptions : public torch::optim::OptimizerCloneableOptions<ScheduleFreeOptions> {
  explicit ScheduleFreeOptions(double lr = 0.0025) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.999;
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0.0;
  TORCH_ARG(double, r) = 0.0;
  TORCH_ARG(double, weight_lr_power) = 2.0;

 public:  // TORCH_ARG leaves the section private
  void serialize(torch::serialize::OutputArchive& archive) const override {
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta1);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta2);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(r);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_lr_power);
  }
  void serialize(torch::serialize::InputArchive& archive) override {
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta1);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta2);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, r);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_lr_power);
  }
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

struct ScheduleFreeState : public torch::optim::OptimizerCloneableParamState<ScheduleFreeState> {
  TORCH_ARG(torch::Tensor, z);
  TORCH_ARG(torch::Tensor, exp_avg_sq);
  TORCH_ARG(torch::Tensor, y);  // the training point, while the parameter holds x; else undefined

 public:
  void serialize(torch::serialize::OutputArchive& archive) const override {
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(z);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(y);
  }
  void serialize(torch::serialize::InputArchive& archive) override {
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, z);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg_sq);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, y);
  }
};

class ScheduleFreeAdamW : public torch::optim::Optimizer,
                          public DeclaredState,
                          public AveragedIterate {
 public:
  ScheduleFreeAdamW(std::vector<torch::Tensor> params, ScheduleFreeOptions defaults)
      : Optimizer({torch::optim::OptimizerParamGroup(std::move(params))},
                  std::make_unique<ScheduleFreeOptions>(defaults)) {}

  std::vector<torch::Tensor*> state_tensors(
      torch::optim::OptimizerParamState& entry) const override {
    auto& s = static_cast<ScheduleFreeState&>(entry);
    return {&s.z(), &s.exp_avg_sq(), &s.y()};
  }

  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::Tensor loss = closure ? closure() : torch::Tensor();  // with autograd, before the guard
    torch::NoGradGuard no_grad;
    TORCH_CHECK(!averaged_, "schedule_free_adamw stepped while its parameters hold x");
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const ScheduleFreeOptions&>(group.options());
      const double lr = o.lr();
      const double bias_correction2 = 1.0 - std::pow(o.beta2(), static_cast<double>(k_ + 1));
      lr_max_ = std::max(lr, lr_max_);
      const double weight =
          std::pow(static_cast<double>(k_ + 1), o.r()) * std::pow(lr_max_, o.weight_lr_power());
      weight_sum_ += weight;
      const double c = weight_sum_ == 0 ? 0.0 : weight / weight_sum_;
      for (auto& y : group.params()) {
        if (!y.grad().defined()) continue;
        ScheduleFreeState& s = state_of(y);
        const torch::Tensor& grad = y.grad();
        s.exp_avg_sq().mul_(o.beta2()).addcmul_(grad, grad, 1.0 - o.beta2());
        torch::Tensor normalized = grad / (s.exp_avg_sq() / bias_correction2).sqrt_().add_(o.eps());
        if (o.weight_decay() != 0 && takes_weight_decay(y)) {
          normalized.add_(y, o.weight_decay());  // decay taken at y
        }
        y.lerp_(s.z(), c);
        y.add_(normalized, lr * (o.beta1() * (1.0 - c) - 1.0));
        s.z().sub_(normalized, lr);
      }
    }
    ++k_;
    return loss;
  }

  // x = (y - (1 - beta1) z) / beta1, y kept.
  bool use_average() override {
    if (averaged_) return false;
    torch::NoGradGuard no_grad;
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const ScheduleFreeOptions&>(group.options());
      for (auto& p : group.params()) {
        auto found = state_.find(compat::optimizer_state_key(p));
        if (found == state_.end()) continue;  // no step yet: x = y = z
        auto& s = static_cast<ScheduleFreeState&>(*found->second);
        s.y(p.detach().clone());
        p.lerp_(s.z(), 1.0 - 1.0 / o.beta1());
      }
    }
    averaged_ = true;
    return true;
  }

  void use_training_point() override {
    if (!averaged_) return;
    torch::NoGradGuard no_grad;
    for (auto& group : param_groups_) {
      for (auto& p : group.params()) {
        auto found = state_.find(compat::optimizer_state_key(p));
        if (found == state_.end()) continue;
        auto& s = static_cast<ScheduleFreeState&>(*found->second);
        if (!s.y().defined()) continue;
        p.copy_(s.y());
        s.y(torch::Tensor());
      }
    }
    averaged_ = false;
  }

  // LibTorch's serialisation keeps each parameter's state but not a group's options: the
  // progress is written beside it.
  void save(torch::serialize::OutputArchive& archive) const override {
    torch::optim::serialize<ScheduleFreeState, ScheduleFreeOptions>(archive, *this);
    archive.write("schedule_free/k", torch::tensor(k_, torch::kLong));
    archive.write("schedule_free/lr_max", torch::tensor(lr_max_, torch::kDouble));
    archive.write("schedule_free/weight_sum", torch::tensor(weight_sum_, torch::kDouble));
    archive.write("schedule_free/averaged", torch::tensor(averaged_ ? 1 : 0, torch::kLong));
  }
  void load(torch::serialize::InputArchive& archive) override {
    torch::optim::serialize<ScheduleFreeState, ScheduleFreeOptions>(archive, *this);
    // A fresh tensor each: read() into a defined one keeps its dtype and reinterprets the bytes.
    auto read = [&](const char* key) {
      torch::Tensor value;
      archive.read(key, value);
      return value;
    };
    k_ = read("schedule_free/k").item<int64_t>();
    lr_max_ = read("schedule_free/lr_max").item<double>();
    weight_sum_ = read("schedule_free/weight_sum").item<double>();
    averaged_ = read("schedule_free/averaged").item<int64_t>() != 0;
  }

 private:
  // The group's progress (Kiln builds one group): steps taken, the largest lr so far (-1 before
  // the first), the sum of the averaging weights, and whether the parameters hold x (in a
  // snapshot, they do).
  int64_t k_ = 0;
  double lr_max_ = -1.0;
  double weight_sum_ = 0.0;
  bool averaged_ = false;

  ScheduleFreeState& state_of(const torch::Tensor& p) {
    auto key = compat::optimizer_state_key(p);
    if (!state_.count(key)) {
      auto fresh = std::make_unique<ScheduleFreeState>();
      fresh->z(p.detach().clone());
      fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      state_[key] = std::move(fresh);
    }
    return static_cast<ScheduleFreeState&>(*state_[key]);
  }
};

const bool registered = OptimizerRegistry::add(
    {"schedule_free_adamw",
     "Schedule-Free AdamW (Defazio et al. 2024): no lr decay, every step's averaged iterate an "
     "any-time result; eval and snapshots use it; schedule.type must be \"constant\"",
     {ParamSpec::real("lr", 0.0025, "learning rate (the schedule's base)").at_least(0),
      ParamSpec::real("beta1", 0.9, "interpolation between z and the average x (y's momentum)")
          .at_least(1e-6)
          .at_most(1),
      ParamSpec::real("beta2", 0.999, "decay of the squared-gradient average")
          .at_least(0)
          .at_most(1),
      ParamSpec::real("eps", 1e-8, "added to the denominator").at_least(0),
      ParamSpec::real("weight_decay", 0.0, "decoupled decay of 2D+ parameters, taken at y")
          .at_least(0),
      ParamSpec::real("r", 0.0, "averaging weight's power of the step count").at_least(0),
      ParamSpec::real("weight_lr_power", 2.0, "averaging weight's power of the largest lr so far")
          .at_least(0)}},
    [](const Params& p,
       const std::vector<torch::Tensor>& params) -> std::shared_ptr<torch::optim::Optimizer> {
      return std::make_shared<ScheduleFreeAdamW>(params,
                                                 ScheduleFreeOptions(p.real("lr"))
                                                     .beta1(p.real("beta1"))
                                                     .beta2(p.real("beta2"))
                                                     .eps(p.real("eps"))
                                                     .weight_decay(p.real("weight_decay"))
                                                     .r(p.real("r"))
                                                     .weight_lr_power(p.real("weight_lr_power")));
    });

}  // namespace
}  // namespace kiln
