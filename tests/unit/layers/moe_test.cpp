// The mixture-of-experts layer's capacity against a case worked by hand, and its grouped products
// against a plain loop over experts (transformers' own layer is the judge of the rest:
// tests/interop/moe_transformers_test.cpp).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <torch/torch.h>

#include "core/layers/moe.h"

namespace kiln {
namespace {

MoeOptions four_experts(double capacity_factor) {
  MoeOptions o;
  o.n_embd = 4;
  o.experts = 4;
  o.top_k = 2;
  o.ffn_dim = 3;
  o.capacity_factor = capacity_factor;
  return o;
}

// Four tokens, two experts each: expert 0 is every token's first choice. With capacity factor 1,
// each expert takes ceil(1 x 8 / 4) = 2 assignments: expert 0 keeps tokens 0 and 1 and drops
// tokens 2 and 3; experts 1, 2 and 3 keep all theirs (2, 1 and 1).
TEST(MoeCapacity, DropsTheLatestTokensOfAnOverfullExpert) {
  const at::Tensor experts = torch::tensor({0, 1, 0, 2, 0, 1, 0, 3}, torch::kLong).view({4, 2});
  const MoeOptions o = four_experts(1.0);
  EXPECT_EQ(expert_capacity(8, o), 2);
  const Dispatch d = dispatch(experts, 4, expert_capacity(8, o));
  EXPECT_EQ(d.dropped, 2);
  EXPECT_EQ(d.width, 2);
  // Kept, by expert: 0 (token 0 slot 0), 2 (token 1 slot 0); 1, 5; 3; 7.
  EXPECT_TRUE(torch::equal(d.order, torch::tensor({0, 2, 1, 5, 3, 7}, torch::kLong)));
  EXPECT_TRUE(torch::equal(d.slot, torch::tensor({0, 1, 2, 3, 4, 6}, torch::kLong)));
  EXPECT_TRUE(torch::equal(d.counts, torch::tensor({4, 2, 1, 1}, torch::kLong)));
  // Dropless: nothing cut, padded to the fullest expert.
  const Dispatch all = dispatch(experts, 4, expert_capacity(8, four_experts(0)));
  EXPECT_EQ(all.dropped, 0);
  EXPECT_EQ(all.width, 4);
  EXPECT_EQ(all.order.numel(), 8);
}

// The same routing through the layer: a router that scores expert 0 highest for every token and
// experts 1, 2, 1, 3 next. The measures count 2 of 8 assignments dropped, an imbalance of
// 4 / (8 / 4) = 2, and the dropped tokens' output is their second expert's share alone.
TEST(MoeCapacity, TheLayerCountsAndLeavesOutDroppedAssignments) {
  torch::manual_seed(3);
  MixtureOfExperts layer(four_experts(1.0));
  MixtureOfExperts dropless(four_experts(0));
  torch::NoGradGuard no_grad;
  // Token t is the one-hot e_t; gate row e scores each token: expert 0 always 5, the second
  // choice 2, the rest 0.
  layer->router.copy_(
      torch::tensor({{5., 5., 5., 5.}, {2., 0., 2., 0.}, {0., 2., 0., 0.}, {0., 0., 0., 2.}}));
  layer->gate_up_proj.normal_();
  layer->down_proj.normal_();
  dropless->router.copy_(layer->router);
  dropless->gate_up_proj.copy_(layer->gate_up_proj);
  dropless->down_proj.copy_(layer->down_proj);
  const at::Tensor x = torch::eye(4).unsqueeze(0);
  layer->train();
  const at::Tensor y = layer->forward(x)[0];
  std::map<std::string, double> m;
  for (const auto& [name, value] : moe_measures(layer->take_tallies()))
    m[name] = value;
  EXPECT_DOUBLE_EQ(m.at("dropped_fraction"), 0.25);
  EXPECT_DOUBLE_EQ(m.at("load_imbalance"), 2.0);
  // softmax over the top two logits (5, 2): weights 1 / (1 + e^-3) and e^-3 / (1 + e^-3).
  const double second = std::exp(-3.0) / (1 + std::exp(-3.0));
  const at::Tensor full = dropless->forward(x)[0];
  // Tokens 0 and 1 keep both experts; tokens 2 and 3 only their second one.
  EXPECT_TRUE(torch::allclose(y.slice(0, 0, 2), full.slice(0, 0, 2), 1e-6, 1e-6));
  auto alone = [&](int64_t token, int64_t expert) {
    const auto h = torch::linear(x[0][token], layer->gate_up_proj[expert]).chunk(2);
    return torch::linear(torch::silu(h[0]) * h[1], layer->down_proj[expert]) * second;
  };
  EXPECT_TRUE(torch::allclose(y[2], alone(2, 1), 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(y[3], alone(3, 3), 1e-6, 1e-6));
}

TEST(MoeGroupedProducts, EqualALoopOverExpertsWithSharedExperts) {
  torch::manual_seed(5);
  MoeOptions o = four_experts(0);
  o.n_embd = 8;
  o.experts = 8;
  o.ffn_dim = 6;
  o.shared_ffn_dim = 12;
  MixtureOfExperts layer(o);
  torch::NoGradGuard no_grad;
  for (auto& p : layer->parameters())
    p.normal_();
  const at::Tensor x = torch::randn({2, 9, 8});
  EXPECT_TRUE(torch::allclose(layer->forward(x), layer->forward_by_loop(x), 1e-5, 1e-5));
}

}  // namespace
}  // namespace kiln
