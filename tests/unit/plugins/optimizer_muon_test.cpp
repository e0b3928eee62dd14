// The muon optimizer: its orthogonalised update checked with LibTorch's SVD, its AdamW group
// against AdamW's published update, and its state through save and load.
#include <gtest/gtest.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "core/api/optimizer.h"
#include "core/config/config.h"

namespace kiln {
namespace {

std::shared_ptr<torch::optim::Optimizer> muon(const std::vector<std::string>& sets,
                                              const ModelParameters& params) {
  std::vector<std::string> all = {"optimizer.type=muon"};
  all.insert(all.end(), sets.begin(), sets.end());
  ResolvedConfig c = load_config_text("[model]\ntype = \"gpt\"\n", "t.toml", all);
  return OptimizerRegistry::create("muon", c.params("optimizer"), params);
}

TEST(Muon, TheUpdateOfAMatrixIsItsGradientOrthogonalised) {
  torch::manual_seed(0);
  for (auto shape : {std::vector<int64_t>{64, 32}, std::vector<int64_t>{24, 48}}) {
    auto p = torch::zeros(shape).requires_grad_();
    auto grad = torch::randn(shape);
    p.mutable_grad() = grad.clone();
    muon({"optimizer.lr=0.1"}, std::vector<torch::Tensor>{p})->step();
    // p = -lr sqrt(max(1, rows / cols)) X: X is the orthogonalised gradient.
    const double scale = 0.1 * std::sqrt(std::max(1.0, double(shape[0]) / double(shape[1])));
    auto x = -p.detach() / scale;
    auto [u, s, vh] = torch::linalg_svd(grad, false);
    auto sx = std::get<1>(torch::linalg_svd(x, false));
    // The quintic leaves singular values in about [0.7, 1.2] rather than exactly 1 ...
    EXPECT_GT(sx.min().item<double>(), 0.6) << sx;
    EXPECT_LT(sx.max().item<double>(), 1.25) << sx;
    // ... and keeps the gradient's singular vectors: U^T X V is diagonal.
    auto inner = u.t().matmul(x).matmul(vh.t());
    auto off = inner - torch::diag(torch::diagonal(inner));
    EXPECT_LT(off.abs().max().item<double>(), 1e-3);
    EXPECT_GT(torch::diagonal(inner).min().item<double>(), 0.6);
  }
}

TEST(Muon, EmbeddingHeadAndVectorsTakeAdamWAndFollowTheSchedule) {
  auto embedding = torch::ones({10, 4}).requires_grad_();
  auto hidden = torch::ones({4, 4}).requires_grad_();
  auto gain = torch::ones({4}).requires_grad_();
  ModelParameters params(std::vector<torch::Tensor>{embedding, hidden, gain});
  params.hidden = {false, true, true};
  auto opt = muon({"optimizer.lr=0.02", "optimizer.adam_lr=0.004"}, params);
  ASSERT_EQ(opt->param_groups().size(), 2u);
  set_lr(*opt, 0.01);  // the schedule halves the base: AdamW's rate halves too, to 0.002
  auto g = torch::randn({10, 4});
  embedding.mutable_grad() = g.clone();
  hidden.mutable_grad() = torch::randn({4, 4});
  gain.mutable_grad() = torch::full({4}, -3.0);
  opt->step();
  // AdamW's first step moves each coordinate by lr m / (sqrt(v) + eps) = lr sign(g).
  EXPECT_TRUE(torch::allclose(embedding.detach(), 1 - 0.002 * g.sign(), 0, 1e-6));
  EXPECT_TRUE(torch::allclose(gain.detach(), torch::full({4}, 1.002), 0, 1e-6));
  auto moved = (hidden.detach() - 1) / -0.01;  // square: scale 1
  auto sv = std::get<1>(torch::linalg_svd(moved, false));
  EXPECT_GT(sv.min().item<double>(), 0.6) << sv;
}

TEST(Muon, StateSurvivesSaveAndLoad) {
  auto run = [](torch::optim::Optimizer& opt, torch::Tensor& a, torch::Tensor& b, int seed) {
    torch::manual_seed(seed);
    a.mutable_grad() = torch::randn(a.sizes());
    b.mutable_grad() = torch::randn(b.sizes());
    opt.step();
  };
  auto make = [](torch::Tensor& a, torch::Tensor& b) {
    ModelParameters params(std::vector<torch::Tensor>{a, b});
    params.hidden = {true, false};
    return muon({}, params);
  };
  auto a1 = torch::ones({6, 3}).requires_grad_(), b1 = torch::ones({5, 3}).requires_grad_();
  auto first = make(a1, b1);
  run(*first, a1, b1, 1);
  torch::serialize::OutputArchive out;
  first->save(out);
  std::ostringstream bytes;
  out.save_to(bytes);

  auto a2 = a1.detach().clone().requires_grad_(), b2 = b1.detach().clone().requires_grad_();
  auto second = make(a2, b2);
  std::istringstream in_bytes(bytes.str());
  torch::serialize::InputArchive in;
  in.load_from(in_bytes);
  second->load(in);
  for (int seed : {2, 3}) {
    run(*first, a1, b1, seed);
    run(*second, a2, b2, seed);
  }
  EXPECT_TRUE(torch::equal(a1, a2));
  EXPECT_TRUE(torch::equal(b1, b2));
}

}  // namespace
}  // namespace kiln
