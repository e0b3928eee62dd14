// Packed rows (data.pack): several documents in one row, each with its own positions and with
// attention kept inside it. Checked against each document run alone, the definition packing has
// to meet: the same per-token losses and the same gradients, within 1e-5 (float32).
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>

#include "core/api/model.h"
#include "core/config/config.h"
#include "core/data/packing.h"
#include "core/layers/document_positions.h"
#include "core/layers/fused_attention.h"
#include "tensor_compare.h"

namespace kiln {
namespace {

using testing::max_difference;

// Positions of one row holding documents of `lengths` back to back, then a padding document up
// to `time`: each from 0, written out here rather than by Kiln's packing code.
at::Tensor row_positions(const std::vector<int64_t>& lengths, int64_t time) {
  std::vector<int64_t> positions;
  for (int64_t length : lengths) {
    for (int64_t i = 0; i < length; ++i)
      positions.push_back(i);
  }
  for (int64_t i = 0; static_cast<int64_t>(positions.size()) < time; ++i)
    positions.push_back(i);
  return at::tensor(positions, at::kLong).view({1, time});
}

// Causal attention of one document alone, in double: softmax(q k^T / sqrt(d)) v per head.
at::Tensor attention_alone(const at::Tensor& qkv, int64_t n_head) {
  const int64_t t = qkv.size(1), c = qkv.size(2) / 3, d = c / n_head;
  auto heads = [&](int64_t part) {
    return qkv.narrow(2, part * c, c).reshape({1, t, n_head, d}).permute({0, 2, 1, 3});
  };
  auto scores = at::matmul(heads(0), heads(1).transpose(-2, -1)) / std::sqrt(double(d));
  auto future = at::ones({t, t}, qkv.options().dtype(at::kBool)).triu(1);
  auto weights = at::softmax(scores.masked_fill(future, -INFINITY), -1);
  return at::matmul(weights, heads(2)).permute({0, 2, 1, 3}).reshape({1, t, c});
}

TEST(PackedRows, FusedAttentionSeesOnlyEachDocumentAsIfAlone) {
  // Lengths that are not multiples of the vector width or of the kernel's 8-row blocks, a
  // one-token document, and a row long enough that whole blocks of keys are skipped.
  const std::vector<std::vector<int64_t>> rows = {{5, 11, 1, 17}, {40}, {3, 70, 9, 29, 1}};
  const std::vector<int64_t> times = {40, 40, 130};
  const int64_t n_head = 3, head_dim = 13;
  for (size_t r = 0; r < rows.size(); ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    torch::manual_seed(static_cast<uint64_t>(r));
    const int64_t time = times[r];
    at::Tensor qkv = at::randn({1, time, 3 * n_head * head_dim}).requires_grad_();
    at::Tensor upstream = at::randn({1, time, n_head * head_dim});
    at::Tensor y = fused_causal_attention(qkv, n_head, row_positions(rows[r], time));
    (y * upstream).sum().backward();

    at::Tensor qkv64 = qkv.detach().to(at::kDouble).requires_grad_();
    int64_t start = 0;
    std::vector<int64_t> documents = rows[r];
    if (int64_t padding = time; true) {
      for (int64_t length : rows[r])
        padding -= length;
      if (padding > 0) documents.push_back(padding);
    }
    for (int64_t length : documents) {
      at::Tensor want = attention_alone(qkv64.narrow(1, start, length), n_head);
      (want * upstream.narrow(1, start, length).to(at::kDouble)).sum().backward();
      EXPECT_LT(max_difference(y.narrow(1, start, length), want), 1e-5) << "at " << start;
      start += length;
    }
    EXPECT_LT(max_difference(qkv.grad(), qkv64.grad()), 1e-5);
  }
}

struct ModelCase {
  std::string type;
  std::vector<std::string> sets;
};

// Per-token losses and the parameters' gradients of the records of one packed row, and of the
// same records each run alone as a batch of one, the model's own forward pass both times.
void expect_packed_equals_alone(const ModelCase& m) {
  SCOPED_TRACE(m.type + " " + (m.sets.empty() ? "" : m.sets.back()));
  ResolvedConfig config =
      load_config_text("[model]\ntype = \"" + m.type + "\"\n", "t.toml", m.sets);
  torch::manual_seed(11);
  auto model = build_model(*ModelRegistry::create(m.type, config.params("model")));
  const std::vector<int64_t> lengths = {7, 12, 1, 5};
  const int64_t time = 28;  // 25 tokens of records, then 3 of padding
  at::Tensor tokens = torch::randint(40, {1, time + 1}, torch::kLong);
  auto token_losses = [&](const at::Tensor& inputs, const at::Tensor& targets) {
    auto logits = model->forward(inputs);
    return torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  };
  auto gradients = [&] {
    std::vector<at::Tensor> grads;
    for (const auto& p : model->parameters()) {
      grads.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
      p.mutable_grad() = at::Tensor();
    }
    return grads;
  };

  // Packed: the records' targets are their own next tokens, the padding's count for nothing.
  at::Tensor inputs = tokens.narrow(1, 0, time).clone(), targets = inputs.clone();
  int64_t start = 0;
  for (int64_t length : lengths) {
    targets.narrow(1, start, length).copy_(tokens.narrow(1, start + 1, length));
    start += length;
  }
  at::Tensor packed;
  {
    PositionScope positions(row_positions(lengths, time));
    packed = token_losses(inputs, targets).narrow(0, 0, start);
  }
  packed.sum().backward();
  const auto packed_grads = gradients();

  start = 0;
  std::vector<at::Tensor> alone;
  for (int64_t length : lengths) {
    alone.push_back(
        token_losses(tokens.narrow(1, start, length), tokens.narrow(1, start + 1, length)));
    alone.back().sum().backward();
    start += length;
  }
  const auto alone_grads = gradients();
  EXPECT_LT(max_difference(packed, at::cat(alone)), 1e-5);
  ASSERT_EQ(packed_grads.size(), alone_grads.size());
  for (size_t i = 0; i < packed_grads.size(); ++i)
    EXPECT_LT(max_difference(packed_grads[i], alone_grads[i]), 1e-5) << "parameter " << i;
}

TEST(PackedRows, EachModelsLossesAndGradientsEqualTheRecordsRunAlone) {
  const std::vector<std::string> gpt = {"model.n_layer=2",     "model.n_head=2",
                                        "model.n_embd=32",     "model.block_size=32",
                                        "model.vocab_size=40", "model.dropout=0"};
  std::vector<ModelCase> cases = {
      {"gpt", gpt},
      {"llama",
       {"model.n_layer=2", "model.n_head=4", "model.n_kv_head=2", "model.n_embd=32",
        "model.ffn_dim=48", "model.block_size=32", "model.vocab_size=40"}},
      {"transformer_lm",
       {"model.vocab_size=40", "model.d_model=16", "model.nhead=2", "model.num_layers=2",
        "model.dim_feedforward=24", "model.max_len=32", "model.dropout=0"}}};
  for (const char* kernels : {"model.kernels=fused", "model.kernels=torch"}) {
    cases.push_back({"gpt", gpt});
    cases.back().sets.push_back(kernels);
  }
  for (const ModelCase& m : cases)
    expect_packed_equals_alone(m);
}

TEST(PackedRows, DocumentsFillRowsInOrderAndNeverSplit) {
  // Rows of 10: 4+5 | 3+6 (4 would overflow) | 10 | 1+1+1.
  EXPECT_EQ(pack_in_order({4, 5, 3, 6, 10, 1, 1, 1}, 10), (std::vector<int64_t>{0, 2, 4, 5, 8}));
  EXPECT_EQ(pack_in_order({}, 10), (std::vector<int64_t>{0}));
  EXPECT_THROW(pack_in_order({4, 11}, 10), std::invalid_argument);
}

TEST(PackedRows, PositionsRestartAfterEachSeparator) {
  const std::vector<int64_t> tokens = {5, 9, 0, 7, 0, 0, 3};  // separator 0
  std::vector<int64_t> positions(tokens.size());
  positions_after_separators(tokens.data(), 7, 0, positions.data());
  EXPECT_EQ(positions, (std::vector<int64_t>{0, 1, 2, 0, 1, 0, 0}));
}

TEST(PackedRows, TheMaskIsBlockDiagonalAndCausal) {
  at::Tensor mask = document_causal_mask(row_positions({2, 3}, 5));
  const std::vector<std::vector<int>> want = {
      {1, 0, 0, 0, 0}, {1, 1, 0, 0, 0}, {0, 0, 1, 0, 0}, {0, 0, 1, 1, 0}, {0, 0, 1, 1, 1}};
  for (int q = 0; q < 5; ++q) {
    for (int k = 0; k < 5; ++k)
      EXPECT_EQ(mask[0][0][q][k].item<bool>(), want[q][k] == 1) << q << "," << k;
  }
}

}  // namespace
}  // namespace kiln
