#include <gtest/gtest.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "core/config.h"
#include "core/error.h"
#include "core/optimizer.h"
#include "core/torch_compat.h"
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
  for (const char* type : {"adam", "adamw", "sgd", "lion"}) {
    auto opt = make(type, {"optimizer.lr=0.25"}, {torch::ones({3}).requires_grad_()});
    EXPECT_DOUBLE_EQ(configured_lr(*opt), 0.25) << type;
    set_lr(*opt, 0.125);
    EXPECT_DOUBLE_EQ(configured_lr(*opt), 0.125) << type;
  }
}

// Where LibTorch has the fused kernel for the CPU (2.4+) it must follow torch::optim::AdamW step
// by step and keep AdamW's state, so that snapshots move between the two; elsewhere asking for
// it is an error that says why.
TEST(Optimizer, FusedAdamWFollowsAdamWOrSaysWhyItCannot) {
  torch::manual_seed(0);
  const auto weight = torch::randn({16, 8}), bias = torch::randn({8});
  auto params = [&] {
    return std::vector<torch::Tensor>{weight.clone().requires_grad_(),
                                      bias.clone().requires_grad_()};
  };
  const std::vector<std::string> sets = {"optimizer.lr=0.01", "optimizer.weight_decay=0.1"};
  auto with_fused = sets;
  with_fused.push_back("optimizer.fused=true");
  auto fused_params = params();
  if (!compat::has_fused_adamw(torch::kCPU)) {
    try {
      make("adamw", with_fused, fused_params);
      FAIL() << "fused AdamW was built without a fused kernel";
    } catch (const ParamError& e) {
      EXPECT_EQ(e.key(), "fused");
      EXPECT_NE(std::string(e.what()).find(compat::torch_version()), std::string::npos) << e.what();
    }
    return;
  }
  auto fused = make("adamw", with_fused, fused_params);
  auto plain_params = params();
  auto plain = make("adamw", sets, plain_params);
  auto step_both = [&](torch::optim::Optimizer& a, torch::optim::Optimizer& b) {
    for (size_t i = 0; i < fused_params.size(); ++i) {
      auto grad = torch::randn(fused_params[i].sizes());
      fused_params[i].mutable_grad() = grad.clone();
      plain_params[i].mutable_grad() = grad.clone();
    }
    a.step();
    b.step();
    for (size_t i = 0; i < fused_params.size(); ++i) {
      EXPECT_TRUE(torch::allclose(fused_params[i], plain_params[i], 1e-5, 1e-6))
          << (fused_params[i] - plain_params[i]).abs().max();
    }
  };
  for (int step = 0; step < 10; ++step)
    step_both(*fused, *plain);
  EXPECT_GT((fused_params[0] - weight).abs().max().item<double>(), 0.05) << "it did train";

  // The fused optimizer's snapshot resumes a plain one: both keep going in step.
  torch::serialize::OutputArchive out;
  fused->save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  auto resumed = make("adamw", sets, plain_params);
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
