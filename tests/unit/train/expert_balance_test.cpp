// DeepSeek-V3's auxiliary-loss-free balancing (arXiv 2412.19437, section 2.1.2) against NumPy:
// four steps of a mixture of 4 experts, top 2, on the same six tokens, the bias moved by 0.1 x
// sign(mean load - load) after each. The expected numbers are what this NumPy script printed
// (float64), not anything Kiln computed:
//
//   p = softmax(x @ W.T); b = zeros(4)
//   for step in range(4):
//       chosen = argsort(-(p + b), axis=1)[:, :2]
//       counts = bincount(chosen.ravel(), minlength=4)
//       b += 0.1 * sign(counts.mean() - counts)
//   weights = take_along_axis(p, chosen, 1), renormalised over the two
#include <gtest/gtest.h>

#include <vector>

#include <torch/torch.h>

#include "core/api/model.h"
#include "core/api/parallel.h"
#include "core/layers/moe.h"
#include "core/train/expert_balance.h"

namespace kiln {
namespace {

MoeOptions balanced_options(double rate) {
  MoeOptions o;
  o.n_embd = 4;
  o.experts = 4;
  o.top_k = 2;
  o.ffn_dim = 3;
  o.bias_update_rate = rate;
  return o;
}

// A model of one mixture, which is all balance_expert_biases looks for.
class OneMixture : public Model {
 public:
  explicit OneMixture(const MoeOptions& o) : moe(register_module("mlp", MixtureOfExperts(o))) {
    torch::NoGradGuard no_grad;
    moe->router.copy_(torch::tensor({{2.0, 0.1, 0.0, 0.3},
                                     {0.5, 1.0, -0.2, 0.0},
                                     {0.3, -0.5, 1.0, 0.2},
                                     {0.1, 0.4, 0.3, 1.0}}));
    moe->gate_up_proj.normal_();
    moe->down_proj.normal_();
  }
  int64_t vocab_size() const override { return 1; }
  int64_t context_length() const override { return 1; }
  MixtureOfExperts moe;
};

at::Tensor six_tokens() {
  return torch::tensor({{1.0, 0.2, -0.3, 0.5},
                        {0.9, -0.1, 0.4, 0.0},
                        {1.2, 0.3, 0.1, -0.2},
                        {0.8, 0.5, -0.6, 0.3},
                        {1.1, -0.4, 0.2, 0.6},
                        {0.7, 0.1, 0.3, -0.5}});
}

void expect_near(const at::Tensor& got, const std::vector<double>& want, double tolerance) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  const auto host = got.to(at::kDouble).contiguous();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(host.data_ptr<double>()[i], want[i], tolerance) << i;
}

// A second rank, as the strategy's sum adds it: it sent all its 12 assignments to expert 3.
class TwoRanks : public ParallelStrategy {
 public:
  int world_size() const override { return 2; }
  at::Tensor sum(const at::Tensor& value) override {
    ++sums;
    return value + torch::tensor({{0.0, 0.0, 0.0, 12.0}}, value.options());
  }
  int sums = 0;
};

TEST(ExpertBalance, MovesTheBiasAsNumPyDoesAndLeavesTheWeightsUnbiased) {
  OneMixture model(balanced_options(0.1));
  ParallelStrategy single;
  // The loads were [6 4 2 0], [6 0 4 2], [6 0 0 6], [4 4 3 1]: the last leaves expert 2, at the
  // mean, where it was.
  const std::vector<std::vector<double>> biases = {
      {-0.1, -0.1, 0.1, 0.1}, {-0.2, 0.0, 0.0, 0.2}, {-0.3, 0.1, 0.1, 0.1}, {-0.4, 0.0, 0.1, 0.2}};
  at::Tensor bias_before_last;
  for (const auto& bias : biases) {
    bias_before_last = model.moe->routing_bias.clone();
    model.moe->forward(six_tokens());
    balance_expert_biases(model, single);
    expect_near(model.moe->routing_bias, bias, 1e-6);
  }
  // The fourth step's choice: the biased scores choose, the router's own probabilities weigh.
  torch::NoGradGuard no_grad;
  const RouterChoice choice =
      route(at::linear(six_tokens(), model.moe->router), model.moe->options(), bias_before_last);
  EXPECT_TRUE(
      torch::equal(choice.experts,
                   torch::tensor({0, 1, 2, 0, 0, 1, 1, 3, 0, 2, 1, 2}, torch::kLong).view({6, 2})));
  expect_near(choice.weights,
              {0.8037659, 0.1962341, 0.2554031, 0.7445969, 0.8160783, 0.1839217, 0.6502185,
               0.3497815, 0.8160783, 0.1839217, 0.5074994, 0.4925006},
              1e-6);
}

// Under data parallelism the update follows every rank's loads: here [6 4 2 0] + [0 0 0 12],
// mean 6, where this rank's alone would give -0.1, -0.1, 0.1, 0.1.
TEST(ExpertBalance, FollowsTheLoadsSummedOverRanks) {
  OneMixture model(balanced_options(0.1));
  TwoRanks ranks;
  model.moe->forward(six_tokens());
  balance_expert_biases(model, ranks);
  EXPECT_EQ(ranks.sums, 1);
  expect_near(model.moe->routing_bias, {0.0, 0.1, 0.1, -0.1}, 1e-7);
}

// Without a rate there is no bias, no buffer for a snapshot to hold, and no collective.
TEST(ExpertBalance, AMixtureWithoutARateHasNoBiasAndSumsNothing) {
  OneMixture model(balanced_options(0));
  TwoRanks ranks;
  model.moe->forward(six_tokens());
  balance_expert_biases(model, ranks);
  EXPECT_EQ(ranks.sums, 0);
  EXPECT_FALSE(model.moe->routing_bias.defined());
  EXPECT_TRUE(model.buffers().empty());
}

}  // namespace
}  // namespace kiln
