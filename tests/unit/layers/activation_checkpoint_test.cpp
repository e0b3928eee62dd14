// Activation checkpointing changes no number: the same model, seed and batch give bit-equal
// losses, gradients and random number streams with and without it (dropout on, so the recomputed
// masks must be the forward pass's), in float32 and under bf16 autocast.
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>

#include "core/api/model.h"
#include "core/config/config.h"
#include "core/layers/activation_checkpoint.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

std::shared_ptr<Model> build(const std::string& type, std::vector<std::string> sets,
                             const std::string& checkpointing) {
  sets.push_back("model.activation_checkpointing=" + checkpointing);
  ResolvedConfig c = load_config_text("[model]\ntype = \"" + type + "\"\n", "t.toml", sets);
  torch::manual_seed(7);  // the same initial weights for every variant
  return build_model(*ModelRegistry::create(type, c.params("model")));
}

struct Outcome {
  at::Tensor loss;
  std::vector<at::Tensor> grads;
  at::Tensor next_random;  // what the generator gives after the step
};

Outcome step(Model& model, const at::Tensor& tokens, bool bf16) {
  torch::manual_seed(11);
  at::Tensor loss;
  {
    std::optional<compat::AutocastGuard> autocast;
    if (bf16) autocast.emplace(at::kCPU, at::kBFloat16);
    auto logits = model.forward(tokens.narrow(1, 0, tokens.size(1) - 1));
    loss =
        torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(at::kFloat),
                                             tokens.narrow(1, 1, tokens.size(1) - 1).reshape(-1));
  }
  loss.backward();
  Outcome out{loss.detach(), {}, torch::rand({4})};
  for (const auto& p : model.parameters())
    out.grads.push_back(p.grad().clone());
  return out;
}

void expect_same(const std::string& type, const std::vector<std::string>& sets,
                 const std::string& mode, bool bf16) {
  SCOPED_TRACE(type + " " + mode + (bf16 ? " bf16" : ""));
  auto tokens = torch::randint(40, {4, 17}, torch::kLong);
  auto plain = build(type, sets, "none"), checked = build(type, sets, mode);
  plain->train();
  checked->train();
  Outcome a = step(*plain, tokens, bf16), b = step(*checked, tokens, bf16);
  EXPECT_TRUE(torch::equal(a.loss, b.loss)) << a.loss << b.loss;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_TRUE(torch::equal(a.grads[i], b.grads[i])) << i;
  EXPECT_TRUE(torch::equal(a.next_random, b.next_random));
}

const std::vector<std::string> kGpt = {"model.n_layer=3",     "model.n_head=2",
                                       "model.n_embd=16",     "model.block_size=16",
                                       "model.vocab_size=40", "model.dropout=0.1"};
const std::vector<std::string> kTransformerLm = {
    "model.num_layers=3", "model.nhead=2",       "model.d_model=16", "model.dim_feedforward=24",
    "model.max_len=16",   "model.vocab_size=40", "model.dropout=0.2"};
const std::vector<std::string> kLlama = {
    "model.n_layer=3",  "model.n_head=2",      "model.n_kv_head=1",  "model.n_embd=16",
    "model.ffn_dim=24", "model.block_size=16", "model.vocab_size=40"};

TEST(ActivationCheckpoint, SameLossGradientsAndRandomStreamAsWithout) {
  for (const std::string mode : {"full", "every_n"}) {
    expect_same("gpt", kGpt, mode, false);
    expect_same("transformer_lm", kTransformerLm, mode, false);
    expect_same("llama", kLlama, mode, false);
  }
  expect_same("gpt", kGpt, "full", true);
  expect_same("llama", kLlama, "full", true);
}

TEST(ActivationCheckpoint, EveryNPicksBlocksZeroNTwoN) {
  ResolvedConfig c = load_config_text(
      "[model]\ntype = \"gpt\"\n", "t.toml",
      {"model.activation_checkpointing=every_n", "model.activation_checkpointing_every=3"});
  std::vector<bool> picked;
  for (int64_t i = 0; i < 7; ++i)
    picked.push_back(checkpoints_block(c.params("model"), i));
  EXPECT_EQ(picked, (std::vector<bool>{true, false, false, true, false, false, true}));
}

TEST(ActivationCheckpoint, KeepsOnlyTheInputForBackward) {
  // The recomputation is what proves nothing was kept: a block that counts its calls runs once
  // in forward and once more in backward; without autograd, once.
  int calls = 0;
  auto w = torch::randn({8, 8}).requires_grad_();
  auto block = [&](const at::Tensor& x) {
    ++calls;
    return torch::tanh(x.matmul(w));
  };
  auto x = torch::randn({2, 8}).requires_grad_();
  auto y = checkpointed(block, x);
  EXPECT_EQ(calls, 1);
  y.sum().backward();
  EXPECT_EQ(calls, 2);
  auto direct_w = w.detach().clone().requires_grad_();
  auto direct_x = x.detach().clone().requires_grad_();
  torch::tanh(direct_x.matmul(direct_w)).sum().backward();
  EXPECT_TRUE(torch::allclose(w.grad(), direct_w.grad()));
  EXPECT_TRUE(torch::allclose(x.grad(), direct_x.grad()));
  torch::NoGradGuard no_grad;
  checkpointed(block, x);
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace kiln
