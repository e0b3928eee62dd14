// A model's loss and gradients under model.kernels = "fused" against "torch" (LibTorch's ops):
// the same tiny model, seed and tokens both times, every tensor within 1e-5. For the tests of
// the fused kernels a model uses (tests/unit/kernels/fused_*_test.cpp,
// tests/unit/layers/fused_attention_test.cpp).
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>

#include "core/api/model.h"
#include "core/config/config.h"

namespace kiln::testing {

// The loss of model `type` (its keys in `sets`, vocabulary 40, context >= 24) on 3 random rows
// of 23 tokens, then every parameter's gradient.
inline std::vector<at::Tensor> loss_and_gradients(const std::string& type,
                                                  std::vector<std::string> sets,
                                                  const std::string& kernels) {
  sets.push_back("model.vocab_size=40");
  sets.push_back("model.kernels=" + kernels);
  ResolvedConfig c = load_config_text("[model]\ntype = \"" + type + "\"\n", "t.toml", sets);
  torch::manual_seed(3);
  auto model = build_model(*ModelRegistry::create(type, c.params("model")));
  auto tokens = torch::randint(40, {3, 24}, torch::kLong);
  auto logits = model->forward(tokens.narrow(1, 0, 23));
  auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                   tokens.narrow(1, 1, 23).reshape({-1}));
  loss.backward();
  std::vector<at::Tensor> out = {loss.detach()};
  for (const auto& p : model->parameters())
    out.push_back(p.grad());
  return out;
}

inline void expect_fused_kernels_match_torch(const std::string& type,
                                             const std::vector<std::string>& sets) {
  const auto fused = loss_and_gradients(type, sets, "fused");
  const auto ops = loss_and_gradients(type, sets, "torch");
  ASSERT_EQ(fused.size(), ops.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_LT((fused[i].to(at::kDouble) - ops[i].to(at::kDouble)).abs().max().item<double>(), 1e-5)
        << "tensor " << i << " (0: the loss)";
  }
}

}  // namespace kiln::testing
