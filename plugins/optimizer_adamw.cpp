// optimizer "adamw": Adam with decoupled weight decay (Loshchilov & Hutter). As in GPT-2
// recipes, decay applies only to parameters of 2 or more dimensions (matmul weights and
// embeddings), never to biases or LayerNorm gains. `fused = true` runs each step as one pass over
// each parameter's memory instead of a dozen small ops per parameter: Kiln's own kernel on the CPU
// (core/kernels/fused_adamw.h, any LibTorch), LibTorch's fused kernel on CUDA (2.0+).
#include <fmt/format.h>
#include <torch/optim/adamw.h>

#include "core/api/optimizer.h"
#include "core/kernels/fused_adamw.h"
#include "core/util/error.h"
#include "core/util/torch_compat.h"
#include "plugins/adam_params.h"

namespace kiln {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

// LibTorch's AdamW, declaring its per-parameter state (core/api/optimizer.h).
class DeclaredAdamW : public torch::optim::AdamW, public DeclaredState {
 public:
  using AdamW::AdamW;

  std::vector<torch::Tensor*> state_tensors(
      torch::optim::OptimizerParamState& entry) const override {
    auto& s = static_cast<AdamWParamState&>(entry);
    return {&s.exp_avg(), &s.exp_avg_sq(), &s.max_exp_avg_sq()};
  }
};

// The same optimizer, state and snapshots as torch::optim::AdamW (a fused run resumes unfused and
// the other way round); only step() differs.
class FusedAdamW : public DeclaredAdamW {
 public:
  using DeclaredAdamW::DeclaredAdamW;

  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::Tensor loss = closure ? closure() : torch::Tensor();  // with autograd, before the guard
    torch::NoGradGuard no_grad;
    for (auto& group : param_groups_) {
      std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
      std::vector<int64_t> steps;
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        AdamWParamState& state = state_of(p);
        state.step(state.step() + 1);
        params.push_back(p);
        grads.push_back(p.grad());
        exp_avgs.push_back(state.exp_avg());
        exp_avg_sqs.push_back(state.exp_avg_sq());
        steps.push_back(state.step());
      }
      if (params.empty()) continue;
      const auto& o = static_cast<const AdamWOptions&>(group.options());
      if (params.front().is_cpu()) {
        const AdamWHyper hyper{o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()),
                               o.weight_decay(), o.eps()};
        for (size_t i = 0; i < params.size(); ++i) {
          fused_adamw_cpu(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], steps[i], hyper);
        }
        continue;
      }
      // The kernel reads each step count, as float32, from its parameter's device: one copy for
      // the group.
      auto counts =
          torch::tensor(steps).to(params.front().device(), torch::kFloat, /*non_blocking=*/true);
      compat::fused_adamw(params, grads, exp_avgs, exp_avg_sqs, counts.unbind(), o.lr(),
                          std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(),
                          o.eps());
    }
    return loss;
  }

 private:
  AdamWParamState& state_of(const torch::Tensor& p) {
    auto& slot = state_[compat::optimizer_state_key(p)];
    if (!slot) {
      auto fresh = std::make_unique<AdamWParamState>();
      fresh->step(0);
      fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      slot = std::move(fresh);
    }
    return static_cast<AdamWParamState&>(*slot);
  }
};

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
    (takes_weight_decay(t) ? decay : no_decay).push_back(t);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::vector<torch::optim::AdamWOptions> group_options;
  if (!decay.empty()) {
    group_options.push_back(options(p.real("weight_decay")));
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(group_options.back()));
  }
  if (!no_decay.empty()) {
    group_options.push_back(options(0.0));
    groups.emplace_back(no_decay,
                        std::make_unique<torch::optim::AdamWOptions>(group_options.back()));
  }
  if (!p.flag("fused")) {
    return compat::with_group_options(
        std::make_shared<DeclaredAdamW>(std::move(groups), options(0.0)), group_options);
  }
  const auto device = params.empty() ? torch::kCPU : params.front().device().type();
  if (device != torch::kCPU && device != torch::kCUDA) {
    throw ParamError("fused",
                     fmt::format("optimizer.fused = true runs on the CPU and on CUDA, not on {}: "
                                 "set optimizer.fused = false",
                                 c10::DeviceTypeName(device)));
  }
  return compat::with_group_options(std::make_shared<FusedAdamW>(std::move(groups), options(0.0)),
                                    group_options);
}

// Adam's with decoupled decay, and the choice of the fused step.
std::vector<ParamSpec> adamw_params() {
  std::vector<ParamSpec> params =
      adam_params({6e-4, 0.95, 0.1, "decoupled decay of 2D+ parameters"});
  params.push_back(ParamSpec::flag(
      "fused", false,
      "one pass over each parameter per step (Kiln's kernel on the CPU, LibTorch 2.0+ on CUDA)"));
  return params;
}

const bool registered = OptimizerRegistry::add(
    {"adamw", "AdamW; weight decay on parameters of 2+ dimensions only", adamw_params(), true},
    make_adamw);

}  // namespace
}  // namespace kiln
