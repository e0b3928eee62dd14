#include <cmath>

#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>

#include "core/api/model.h"
#include "core/config/config.h"

namespace kiln {
namespace {

std::shared_ptr<Model> gpt(const std::vector<std::string>& sets) {
  ResolvedConfig c = load_config_text("[model]\ntype = \"gpt\"\n", "t.toml", sets);
  return build_model(*ModelRegistry::create("gpt", c.params("model")));
}

const std::vector<std::string> kSmall = {"model.n_layer=2", "model.n_head=4", "model.n_embd=32",
                                         "model.block_size=16", "model.vocab_size=50"};

TEST(Gpt, LogitsHaveOneRowPerPositionAndPaddedVocabularyColumns) {
  torch::manual_seed(0);
  auto model = gpt(kSmall);
  auto tokens = torch::randint(50, {3, 16}, torch::kLong);
  EXPECT_EQ(model->forward(tokens).sizes(), (std::vector<int64_t>{3, 16, 50}));
  auto padded = gpt({"model.n_layer=1", "model.n_head=2", "model.n_embd=8", "model.block_size=8",
                     "model.vocab_size=50257", "model.vocab_multiple=64"});
  EXPECT_EQ(padded->forward(torch::zeros({1, 4}, torch::kLong)).size(-1), 50304);
  EXPECT_EQ(padded->vocab_size(), 50257);
}

TEST(Gpt, ParameterCountMatchesGpt2WithTiedHead) {
  const int64_t v = 50, t = 16, c = 32, l = 2;
  // wte + wpe + per block (2 LayerNorms, qkv, proj, fc, proj) + final LayerNorm; no head matrix.
  const int64_t expected = v * c + t * c + l * (12 * c * c + 13 * c) + 2 * c;
  EXPECT_EQ(gpt(kSmall)->parameter_count(), expected);
}

TEST(Gpt, ExposesItsLayersAsAnOrderedSequence) {
  torch::manual_seed(0);
  auto model = gpt(kSmall);
  ASSERT_EQ(model->layers().size(), 4u);  // embedding, 2 blocks, head
  auto tokens = torch::randint(50, {2, 8}, torch::kLong);
  torch::Tensor x = tokens;
  for (const auto& layer : model->layers())
    x = layer->forward(x);
  EXPECT_TRUE(torch::equal(x, model->forward(tokens)));
}

TEST(Gpt, InitialisesLikeGpt2) {
  torch::manual_seed(0);
  auto model = gpt({"model.n_layer=4", "model.n_head=4", "model.n_embd=256", "model.block_size=64",
                    "model.vocab_size=1000"});
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const auto& p = item.value();
    double std = p.std().item<double>(), mean = p.mean().item<double>();
    if (name.find("ln_") != std::string::npos) {
      const double want = name.find("weight") != std::string::npos ? 1.0 : 0.0;
      EXPECT_EQ(std, 0.0) << name;
      EXPECT_EQ(mean, want) << name;
    } else if (p.dim() == 1) {
      EXPECT_EQ(p.abs().max().item<double>(), 0.0) << name;  // biases start at zero
    } else if (name.find("_proj.weight") != std::string::npos) {
      EXPECT_NEAR(std, 0.02 / std::sqrt(8.0), 0.0005) << name;  // 1/sqrt(2 n_layer)
    } else {
      EXPECT_NEAR(std, 0.02, 0.0005) << name;
      EXPECT_NEAR(mean, 0.0, 0.001) << name;
    }
  }
}

TEST(Gpt, LossAtInitIsCloseToUniformPrediction) {
  torch::manual_seed(0);
  auto model = gpt({"model.n_layer=2", "model.n_head=4", "model.n_embd=64", "model.block_size=32",
                    "model.vocab_size=200"});
  auto tokens = torch::randint(200, {8, 33}, torch::kLong);
  auto logits = model->forward(tokens.narrow(1, 0, 32));
  double loss = torch::nn::functional::cross_entropy(logits.reshape({-1, 200}),
                                                     tokens.narrow(1, 1, 32).reshape(-1))
                    .item<double>();
  EXPECT_NEAR(loss, std::log(200.0), 0.1);
}

// Accumulating 4 micro-batches of 2 sequences, each loss divided by 4, gives the gradients of
// one batch of 8.
TEST(Gpt, GradientAccumulationMatchesOneLargeBatch) {
  torch::manual_seed(0);
  auto model = gpt(kSmall);
  auto tokens = torch::randint(50, {8, 17}, torch::kLong);
  auto loss_of = [&](const torch::Tensor& rows) {
    auto logits = model->forward(rows.narrow(1, 0, 16));
    return torch::nn::functional::cross_entropy(logits.reshape({-1, 50}),
                                                rows.narrow(1, 1, 16).reshape(-1));
  };
  loss_of(tokens).backward();
  std::vector<torch::Tensor> whole;
  for (auto& p : model->parameters()) {
    whole.push_back(p.grad().clone());
    p.mutable_grad() = torch::Tensor();
  }
  for (int micro = 0; micro < 4; ++micro)
    (loss_of(tokens.narrow(0, 2 * micro, 2)) / 4).backward();
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_LT((params[i].grad() - whole[i]).abs().max().item<double>(), 1e-6) << i;
  }
}

// A plan is what a sweep checks and what the memory floor counts (core/api/model.h): for every
// model plugin its counts are those of the model it builds, as torch counts its tensors.
TEST(ModelPlan, SizesMatchTheBuiltModelForEveryModelPlugin) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"gpt", kSmall},
      {"gpt",
       {"model.n_layer=3", "model.n_head=2", "model.n_embd=16", "model.block_size=8",
        "model.vocab_size=50", "model.vocab_multiple=64", "model.bias=false"}},
      {"transformer_lm",
       {"model.vocab_size=40", "model.d_model=16", "model.nhead=2", "model.num_layers=2",
        "model.dim_feedforward=24", "model.max_len=12"}},
      // Mixtures of experts in both blocks, each with its routing bias (a buffer).
      {"llama",
       {"model.n_layer=2", "model.n_head=2", "model.n_embd=16", "model.ffn_dim=32",
        "model.block_size=8", "model.vocab_size=50", "model.moe_experts=4",
        "model.moe_bias_update_rate=0.001"}},
  };
  for (const auto& [type, sets] : cases) {
    SCOPED_TRACE(type + " " + sets.back());
    ResolvedConfig c = load_config_text("[model]\ntype = \"" + type + "\"\n", "t.toml", sets);
    const std::shared_ptr<ModelPlan> plan = ModelRegistry::create(type, c.params("model"));
    const std::shared_ptr<Model> model = build_model(*plan);
    EXPECT_EQ(plan->parameters, static_cast<double>(model->parameter_count()));
    int64_t buffers = 0;
    for (const auto& b : model->buffers())
      buffers += b.numel();
    EXPECT_EQ(plan->buffers, static_cast<double>(buffers));
    EXPECT_EQ(plan->vocab_size, model->vocab_size());
    EXPECT_EQ(plan->context_length, model->context_length());
    EXPECT_EQ(plan->layers, static_cast<int64_t>(model->layers().size()));
  }
}

}  // namespace
}  // namespace kiln
