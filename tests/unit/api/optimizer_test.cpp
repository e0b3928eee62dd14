#include <cmath>
#include <optional>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "core/api/optimizer.h"
#include "core/config/config.h"
#include "core/util/error.h"
#include "core/util/torch_compat.h"
#include "test_util.h"

namespace kiln {
namespace {

std::shared_ptr<torch::optim::Optimizer> make(const std::string& type,
                                              const std::vector<std::string>& sets,
                                              const std::vector<torch::Tensor>& params) {
  std::vector<std::string> all = {"optimizer.type=" + type};
  all.insert(all.end(), sets.begin(), sets.end());
  ResolvedConfig c = load_config_text("[model]\ntype = \"gpt\"\n", "t.toml", all);
  return OptimizerRegistry::create(type, c.params("optimizer"), params);
}

TEST(Optimizer, LionFollowsItsUpdateRule) {
  auto p = torch::tensor({1.0, -2.0, 3.0}, torch::kDouble).requires_grad_();
  auto opt = make("lion",
                  {"optimizer.lr=0.1", "optimizer.beta1=0.9", "optimizer.beta2=0.99",
                   "optimizer.weight_decay=0.5"},
                  {p});
  auto expected = torch::tensor({1.0, -2.0, 3.0}, torch::kDouble);
  auto momentum = torch::zeros({3}, torch::kDouble);
  for (auto grad : {torch::tensor({0.5, -0.1, 0.0}, torch::kDouble),
                    torch::tensor({-1.0, 0.2, 0.3}, torch::kDouble)}) {
    p.mutable_grad() = grad.clone();
    opt->step();
    expected = expected * (1 - 0.1 * 0.5) - 0.1 * (momentum * 0.9 + grad * 0.1).sign();
    momentum = momentum * 0.99 + grad * 0.01;
    EXPECT_TRUE(torch::allclose(p.detach(), expected, 0, 1e-15)) << p << expected;
  }
}

TEST(Optimizer, LionStateSurvivesSaveAndLoad) {
  auto a = torch::ones({4}).requires_grad_(), b = torch::ones({4}).requires_grad_();
  auto first = make("lion", {}, {a});
  a.mutable_grad() = torch::full({4}, 0.3);
  first->step();
  torch::serialize::OutputArchive out;
  first->save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  auto second = make("lion", {}, {b});
  std::istringstream in_bytes(bytes.str());
  torch::serialize::InputArchive in;
  in.load_from(in_bytes);
  second->load(in);
  b.detach().copy_(a.detach());
  a.mutable_grad() = torch::full({4}, -0.2);
  b.mutable_grad() = torch::full({4}, -0.2);
  first->step();
  second->step();
  EXPECT_TRUE(torch::equal(a, b));
}

TEST(Optimizer, AdamWDecaysOnlyMatricesAndEveryKindTakesTheScheduleLr) {
  auto matrix = torch::ones({2, 2}).requires_grad_(), bias = torch::ones({2}).requires_grad_();
  auto adamw = make("adamw", {"optimizer.lr=0.1", "optimizer.weight_decay=0.5"}, {matrix, bias});
  ASSERT_EQ(adamw->param_groups().size(), 2u);
  matrix.mutable_grad() = torch::zeros({2, 2});
  bias.mutable_grad() = torch::zeros({2});
  adamw->step();
  EXPECT_FLOAT_EQ(matrix[0][0].item<float>(), 1.0f - 0.1f * 0.5f);
  EXPECT_FLOAT_EQ(bias[0].item<float>(), 1.0f);
  // A decay of 0.01 (AdamWOptions' own default) and an lr of 0.001 (its own too): LibTorch 2.14
  // merged such a group's values with the optimizer's defaults and lost the decay.
  auto m2 = torch::ones({2, 2}).requires_grad_(), b2 = torch::ones({2}).requires_grad_();
  auto merged = make("adamw", {"optimizer.lr=0.001", "optimizer.weight_decay=0.01"}, {m2, b2});
  m2.mutable_grad() = torch::zeros({2, 2});
  b2.mutable_grad() = torch::zeros({2});
  merged->step();
  EXPECT_FLOAT_EQ(m2[0][0].item<float>(), 1.0f - 0.001f * 0.01f);
  EXPECT_FLOAT_EQ(b2[0].item<float>(), 1.0f);
  for (const char* type : {"adam", "adamw", "sgd", "lion"}) {
    auto opt = make(type, {"optimizer.lr=0.25"}, {torch::ones({3}).requires_grad_()});
    EXPECT_DOUBLE_EQ(configured_lr(*opt), 0.25) << type;
    set_lr(*opt, 0.125);
    EXPECT_DOUBLE_EQ(configured_lr(*opt), 0.125) << type;
  }
}

// Every hyperparameter given, so the reference below does not lean on Kiln's defaults.
const std::vector<std::string> kAdamW = {"optimizer.lr=0.01", "optimizer.beta1=0.9",
                                         "optimizer.beta2=0.95", "optimizer.eps=1e-8",
                                         "optimizer.weight_decay=0.1"};

// AdamW as torch.optim.AdamW documents it (decoupled decay, bias-corrected moments), in double
// precision on the CPU: what both of Kiln's AdamW paths are held to.
class AdamWReference {
 public:
  AdamWReference(const std::vector<torch::Tensor>& params, std::vector<double> decay)
      : decay_(std::move(decay)) {
    for (const auto& p : params) {
      params_.push_back(p.detach().cpu().to(torch::kDouble));
      exp_avg_.push_back(torch::zeros_like(params_.back()));
      exp_avg_sq_.push_back(torch::zeros_like(params_.back()));
    }
  }

  void step(const std::vector<torch::Tensor>& grads) {
    const double lr = 0.01, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
    ++steps_;
    const double correction1 = 1 - std::pow(beta1, steps_);
    const double correction2 = 1 - std::pow(beta2, steps_);
    for (size_t i = 0; i < params_.size(); ++i) {
      const auto g = grads[i].cpu().to(torch::kDouble);
      params_[i] = params_[i] * (1 - lr * decay_[i]);
      exp_avg_[i] = exp_avg_[i] * beta1 + g * (1 - beta1);
      exp_avg_sq_[i] = exp_avg_sq_[i] * beta2 + g * g * (1 - beta2);
      const auto denom = exp_avg_sq_[i].sqrt() / std::sqrt(correction2) + eps;
      params_[i] = params_[i] - (lr / correction1) * exp_avg_[i] / denom;
    }
  }

  const torch::Tensor& param(size_t i) const { return params_[i]; }

 private:
  std::vector<double> decay_;
  std::vector<torch::Tensor> params_, exp_avg_, exp_avg_sq_;
  int steps_ = 0;
};

// Fused AdamW must follow the AdamW update step by step and keep torch::optim::AdamW's state, so
// that snapshots move between the two.
TEST(Optimizer, FusedAdamWFollowsTheAdamWUpdateAndItsSnapshotResumesUnfused) {
  // Kiln's own kernel on the CPU (core/kernels/fused_adamw.h), on every LibTorch.
  const torch::Device device(torch::kCPU);
  torch::manual_seed(0);
  // 13 elements: one vector of 8 and a tail of 5 taken element by element.
  const auto weight = torch::randn({16, 8}), bias = torch::randn({13});
  auto params = [&] {
    return std::vector<torch::Tensor>{weight.to(device).clone().requires_grad_(),
                                      bias.to(device).clone().requires_grad_()};
  };
  auto with_fused = kAdamW;
  with_fused.push_back("optimizer.fused=true");
  auto fused_params = params(), plain_params = params();
  auto fused = make("adamw", with_fused, fused_params);
  auto plain = make("adamw", kAdamW, plain_params);
  AdamWReference reference({weight, bias}, {0.1, 0.0});  // no decay for the 1-D bias
  auto as_double = [](const torch::Tensor& t) { return t.detach().cpu().to(torch::kDouble); };
  auto step_both = [&](torch::optim::Optimizer& a, torch::optim::Optimizer& b) {
    std::vector<torch::Tensor> grads;
    for (size_t i = 0; i < fused_params.size(); ++i) {
      grads.push_back(torch::randn(fused_params[i].sizes()));
      fused_params[i].mutable_grad() = grads[i].to(device);
      plain_params[i].mutable_grad() = grads[i].to(device);
    }
    a.step();
    b.step();
    reference.step(grads);
    for (size_t i = 0; i < fused_params.size(); ++i) {
      const auto fused_value = as_double(fused_params[i]), plain_value = as_double(plain_params[i]);
      EXPECT_TRUE(torch::allclose(fused_value, reference.param(i), 1e-5, 1e-5))
          << "fused: " << (fused_value - reference.param(i)).abs().max();
      EXPECT_TRUE(torch::allclose(plain_value, reference.param(i), 1e-5, 1e-5))
          << "unfused: " << (plain_value - reference.param(i)).abs().max();
    }
  };
  for (int step = 0; step < 10; ++step)
    step_both(*fused, *plain);
  EXPECT_GT((as_double(fused_params[0]) - weight.to(torch::kDouble)).abs().max().item<double>(),
            0.05)
      << "it did train";

  // The fused optimizer's snapshot resumes an unfused one: both keep following the update.
  torch::serialize::OutputArchive out;
  fused->save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  auto resumed = make("adamw", kAdamW, plain_params);
  std::istringstream in_bytes(bytes.str());
  torch::serialize::InputArchive in;
  in.load_from(in_bytes);
  resumed->load(in);
  for (size_t i = 0; i < fused_params.size(); ++i)
    plain_params[i].detach().copy_(fused_params[i].detach());
  for (int step = 0; step < 5; ++step)
    step_both(*fused, *resumed);
}

}  // namespace
}  // namespace kiln
