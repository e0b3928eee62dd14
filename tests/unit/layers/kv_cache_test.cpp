// The key/value cache (core/layers/kv_cache.h) against each model's own forward pass over the whole
// sequence: rows of different lengths, left-padded, read as a prompt and then continued one token
// at a time give, at every position, the logits each row's tokens give alone (to 1e-5), for gpt,
// llama with grouped key/value heads and rotary positions (fused kernels on and off) and
// transformer_lm; a cache's rows selected and continued apart equal their own sequences too; and
// the bytes the cache says it holds are the bytes the allocator gave it.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/api/model.h"
#include "core/config/config.h"
#include "core/layers/kv_cache.h"
#include "core/util/allocation_meter.h"

namespace kiln {
namespace {

std::shared_ptr<Model> model_of(const std::string& type, const std::vector<std::string>& sets) {
  ResolvedConfig c = load_config_text("[model]\ntype = \"" + type + "\"\n", "t.toml", sets);
  auto model = build_model(*ModelRegistry::create(type, c.params("model")));
  model->eval();
  return model;
}

struct CachedModelCase {
  std::string name, type;
  std::vector<std::string> sets;
};

const std::vector<CachedModelCase> kCases = {
    {"gpt",
     "gpt",
     {"model.n_layer=2", "model.n_head=2", "model.n_embd=16", "model.block_size=24",
      "model.vocab_size=40", "model.kernels=\"torch\""}},
    {"gpt_fused",
     "gpt",
     {"model.n_layer=2", "model.n_head=2", "model.n_embd=16", "model.block_size=24",
      "model.vocab_size=40", "model.kernels=\"fused\""}},
    {"llama_gqa",
     "llama",
     {"model.n_layer=2", "model.n_head=4", "model.n_kv_head=2", "model.n_embd=32",
      "model.ffn_dim=48", "model.block_size=24", "model.vocab_size=40", "model.kernels=\"torch\""}},
    {"llama_gqa_fused",
     "llama",
     {"model.n_layer=2", "model.n_head=4", "model.n_kv_head=1", "model.n_embd=32",
      "model.ffn_dim=48", "model.block_size=24", "model.vocab_size=40", "model.kernels=\"fused\""}},
    {"transformer_lm",
     "transformer_lm",
     {"model.num_layers=2", "model.nhead=2", "model.d_model=16", "model.dim_feedforward=32",
      "model.max_len=24", "model.vocab_size=40", "model.dropout=0.0"}},
};

// Each row's tokens: a prompt of its own length, then the tokens fed after it.
std::vector<std::vector<int64_t>> sequences(const std::vector<int64_t>& prompt_lengths,
                                            int64_t continued, int64_t vocab) {
  torch::manual_seed(7);
  std::vector<std::vector<int64_t>> out;
  for (int64_t length : prompt_lengths) {
    auto ids = torch::randint(vocab, {length + continued}, torch::kLong);
    out.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }
  return out;
}

// The model's logits for one row alone: [time, vocab].
torch::Tensor alone(Model& model, const std::vector<int64_t>& row) {
  return model.forward(torch::tensor(row).unsqueeze(0))[0];
}

class KvCacheModels : public ::testing::TestWithParam<CachedModelCase> {};

TEST_P(KvCacheModels, PrefillThenOneTokenAtATimeEqualsTheWholeForwardPass) {
  torch::NoGradGuard no_grad;
  auto model = model_of(GetParam().type, GetParam().sets);
  const std::vector<int64_t> lengths = {5, 11, 1};
  const int64_t continued = 6;
  const auto rows = sequences(lengths, continued, model->vocab_size());
  const int64_t longest = 11, batch = 3;
  std::vector<int64_t> pad;
  auto prompt = torch::zeros({batch, longest}, torch::kLong);
  for (int64_t b = 0; b < batch; ++b) {
    pad.push_back(longest - lengths[b]);
    for (int64_t t = 0; t < lengths[b]; ++t)
      prompt[b][pad.back() + t] = rows[b][t];
  }
  KvCache cache(pad, longest + continued, model->context_length());
  torch::Tensor logits;
  {
    KvCacheScope scope(cache, longest, torch::kCPU);
    logits = model->forward(prompt);
  }
  for (int64_t b = 0; b < batch; ++b) {
    const torch::Tensor expected = alone(*model, rows[b]);
    EXPECT_TRUE(torch::allclose(logits[b].narrow(0, pad[b], lengths[b]),
                                expected.narrow(0, 0, lengths[b]), 1e-5, 1e-5))
        << GetParam().name << " row " << b << " prompt";
  }
  for (int64_t step = 0; step < continued; ++step) {
    auto next = torch::zeros({batch, 1}, torch::kLong);
    for (int64_t b = 0; b < batch; ++b)
      next[b][0] = rows[b][lengths[b] + step];
    torch::Tensor out;
    {
      KvCacheScope scope(cache, 1, torch::kCPU);
      out = model->forward(next);
    }
    for (int64_t b = 0; b < batch; ++b) {
      const torch::Tensor expected = alone(*model, rows[b])[lengths[b] + step];
      EXPECT_TRUE(torch::allclose(out[b][0], expected, 1e-5, 1e-5))
          << GetParam().name << " row " << b << " step " << step << ": largest difference "
          << (out[b][0] - expected).abs().max().item<double>();
    }
  }
  EXPECT_EQ(cache.length(), longest + continued);
}

TEST_P(KvCacheModels, SelectedRowsContinueApart) {
  torch::NoGradGuard no_grad;
  auto model = model_of(GetParam().type, GetParam().sets);
  const auto rows = sequences({4, 7}, 3, model->vocab_size());
  // Two contexts, then row 0's read on with two different tails, row 1's with one.
  auto prompt = torch::zeros({2, 7}, torch::kLong);
  for (int64_t t = 0; t < 4; ++t)
    prompt[0][3 + t] = rows[0][t];
  for (int64_t t = 0; t < 7; ++t)
    prompt[1][t] = rows[1][t];
  KvCache context({3, 0}, 10, model->context_length());
  {
    KvCacheScope scope(context, 7, torch::kCPU);
    model->forward(prompt);
  }
  KvCache choices = context.select({0, 0, 1});
  const std::vector<std::vector<int64_t>> tails = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  auto next = torch::zeros({3, 3}, torch::kLong);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t t = 0; t < 3; ++t)
      next[r][t] = tails[r][t];
  torch::Tensor out;
  {
    KvCacheScope scope(choices, 3, torch::kCPU);
    out = model->forward(next);
  }
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<int64_t> whole(rows[r < 2 ? 0 : 1].begin(),
                               rows[r < 2 ? 0 : 1].begin() + (r < 2 ? 4 : 7));
    whole.insert(whole.end(), tails[r].begin(), tails[r].end());
    const torch::Tensor expected =
        alone(*model, whole).narrow(0, static_cast<int64_t>(whole.size()) - 3, 3);
    EXPECT_TRUE(torch::allclose(out[r], expected, 1e-5, 1e-5)) << GetParam().name << " " << r;
  }
}

TEST_P(KvCacheModels, AReadForTheLastLogitsKeepsTheSameCache) {
  torch::NoGradGuard no_grad;
  auto model = model_of(GetParam().type, GetParam().sets);
  const auto prompt = torch::randint(model->vocab_size(), {2, 6}, torch::kLong);
  KvCache every({0, 2}, 7, model->context_length()), last({0, 2}, 7, model->context_length());
  torch::Tensor all, one;
  {
    KvCacheScope scope(every, 6, torch::kCPU);
    all = model->forward(prompt);
  }
  {
    KvCacheScope scope(last, 6, torch::kCPU, CachedLogits::kLast);
    one = model->forward(prompt);
  }
  ASSERT_EQ(one.size(1), 1);
  EXPECT_TRUE(torch::allclose(one.select(1, 0), all.select(1, 5), 1e-5, 1e-5)) << GetParam().name;
  const auto next = torch::ones({2, 1}, torch::kLong);
  torch::Tensor after_every, after_last;
  {
    KvCacheScope scope(every, 1, torch::kCPU);
    after_every = model->forward(next);
  }
  {
    KvCacheScope scope(last, 1, torch::kCPU);
    after_last = model->forward(next);
  }
  EXPECT_TRUE(torch::allclose(after_every, after_last, 1e-6, 1e-6)) << GetParam().name;
}

INSTANTIATE_TEST_SUITE_P(Models, KvCacheModels, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

TEST(KvCache, ItsBytesAreWhatTheAllocatorGaveIt) {
  install_allocation_meter();
  torch::NoGradGuard no_grad;
  auto model = model_of("llama", kCases[2].sets);
  const int64_t before = allocation_counts(torch::kCPU).live;
  KvCache cache({0, 2}, 20, model->context_length());
  {
    KvCacheScope scope(cache, 6, torch::kCPU);
    model->forward(torch::ones({2, 6}, torch::kLong));
  }
  // 2 layers x (keys + values) x [2 rows, 2 key/value heads, 20 tokens, 8 dims] of float.
  EXPECT_EQ(cache.bytes(), 2 * 2 * 2 * 2 * 20 * 8 * 4);
  EXPECT_EQ(allocation_counts(torch::kCPU).live - before, cache.bytes());
}

}  // namespace
}  // namespace kiln
