// Schedule-Free AdamW (plugins/optimizer_schedule_free_adamw.cpp) against the paper's update
// written here from Algorithm 1 of Defazio et al. 2024 with explicit x, y and z in double
// precision (the reference implementation's AdamWScheduleFreeReference form, not the plugin's
// in-place one): 20 steps with a warmup through the lr, weight decay and r > 0, the decay on a
// matrix and not on a vector beside it (as Kiln's adamw: biases and norm gains take none); the
// averaged iterate it shows for evaluation; and a snapshot taken while it shows x resumes bit for
// bit.
#include <cmath>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "core/api/optimizer.h"
#include "core/config/config.h"

namespace kiln {
namespace {

constexpr double kLr = 0.05, kBeta1 = 0.9, kBeta2 = 0.99, kEps = 1e-8, kDecay = 0.1, kR = 0.5;
constexpr int kWarmup = 5;

std::shared_ptr<torch::optim::Optimizer> schedule_free(const std::vector<torch::Tensor>& params) {
  ResolvedConfig c = load_config_text(
      "[model]\ntype = \"gpt\"\n", "t.toml",
      {"optimizer.type=\"schedule_free_adamw\"", "optimizer.lr=0.05", "optimizer.beta2=0.99",
       "optimizer.weight_decay=0.1", "optimizer.r=0.5", "schedule.type=\"constant\""});
  return OptimizerRegistry::create("schedule_free_adamw", c.params("optimizer"), params);
}

// The gradient at y: a quadratic's, pulled towards a different point per coordinate.
std::vector<double> gradient_at(const std::vector<double>& y, int step) {
  std::vector<double> g(y.size());
  for (size_t i = 0; i < y.size(); ++i)
    g[i] = 2.0 * (y[i] - 0.3 * static_cast<double>(i)) + 0.05 * std::sin(step + 1.0 * i);
  return g;
}

double lr_at(int step) {
  return kLr * std::min(1.0, (step + 1.0) / kWarmup);
}

// Algorithm 1 with AdamW's normalisation, in double: z takes the step, x averages z with
// weights (k+1)^r lr_max^2, y interpolates them; decay (this parameter's) taken at y.
struct ScheduleFreeReference {
  double decay;
  std::vector<double> x, y, z, v;
  double lr_max = -1, weight_sum = 0;
  void step(int k) {
    const std::vector<double> g = gradient_at(y, k);
    const double lr = lr_at(k);
    lr_max = std::max(lr_max, lr);
    const double weight = std::pow(k + 1.0, kR) * lr_max * lr_max;
    weight_sum += weight;
    const double c = weight / weight_sum;
    for (size_t i = 0; i < y.size(); ++i) {
      v[i] = kBeta2 * v[i] + (1 - kBeta2) * g[i] * g[i];
      const double denom = std::sqrt(v[i] / (1 - std::pow(kBeta2, k + 1.0))) + kEps;
      z[i] -= lr * (g[i] / denom + decay * y[i]);
      x[i] = (1 - c) * x[i] + c * z[i];
      y[i] = (1 - kBeta1) * z[i] + kBeta1 * x[i];
    }
  }
};

std::vector<double> values(const torch::Tensor& t) {
  const torch::Tensor d = t.detach().contiguous();
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

// One step of the plugin at its parameter's y.
void step(torch::optim::Optimizer& opt, torch::Tensor& p, int k) {
  const std::vector<double> g = gradient_at(values(p), k);
  p.mutable_grad() = torch::tensor(g, torch::kDouble);
  set_lr(opt, lr_at(k));
  opt.step();
}

// Each parameter against its own reference, after every step: y while training, x while shown.
void expect_near(const torch::Tensor& p, const std::vector<double>& want, const char* what, int k) {
  const std::vector<double> got = values(p);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12) << what << ", step " << k + 1 << ", element " << i;
}

// A 2 x 2 matrix, which decays, and a vector of 3 (a bias or norm gain), which does not.
TEST(ScheduleFree, FollowsThePapersUpdateAndShowsTheAveragedIterate) {
  const std::vector<double> matrix_start = {1.0, -2.0, 0.5, 3.0}, vector_start = {0.8, -1.5, 2.5};
  auto matrix = torch::tensor(matrix_start, torch::kDouble).reshape({2, 2}).requires_grad_();
  auto vector = torch::tensor(vector_start, torch::kDouble).requires_grad_();
  auto opt = schedule_free({matrix, vector});
  ScheduleFreeReference matrix_ref{kDecay, matrix_start, matrix_start, matrix_start,
                                   std::vector<double>(4)};
  ScheduleFreeReference vector_ref{0.0, vector_start, vector_start, vector_start,
                                   std::vector<double>(3)};
  ASSERT_NE(dynamic_cast<AveragedIterate*>(opt.get()), nullptr);
  for (int k = 0; k < 20; ++k) {
    matrix.mutable_grad() =
        torch::tensor(gradient_at(values(matrix), k), torch::kDouble).reshape({2, 2});
    vector.mutable_grad() = torch::tensor(gradient_at(values(vector), k), torch::kDouble);
    set_lr(*opt, lr_at(k));
    opt->step();
    matrix_ref.step(k);
    vector_ref.step(k);
    expect_near(matrix, matrix_ref.y, "matrix y", k);
    expect_near(vector, vector_ref.y, "vector y", k);
    const torch::Tensor y = matrix.detach().clone();
    {
      const AveragedIterateScope scope(opt.get());
      expect_near(matrix, matrix_ref.x, "matrix x", k);
      expect_near(vector, vector_ref.x, "vector x", k);
    }
    EXPECT_TRUE(torch::equal(matrix.detach(), y))
        << "y comes back bit for bit after the averaged iterate was shown";
  }
}

// A snapshot as Kiln takes one: the parameters showing x (model.pt), the state holding y. Loaded
// into a new optimizer, with the parameter set to the saved x and then given its training point
// back, it goes on exactly as the optimizer that never stopped.
TEST(ScheduleFree, ASnapshotOfTheAveragedIterateResumesBitForBit) {
  auto a = torch::tensor({1.0, -2.0, 0.5}, torch::kDouble).requires_grad_();
  auto first = schedule_free({a});
  for (int k = 0; k < 10; ++k)
    step(*first, a, k);
  std::ostringstream bytes;
  torch::Tensor saved_x;
  {
    const AveragedIterateScope scope(first.get());
    saved_x = a.detach().clone();
    torch::serialize::OutputArchive out;
    first->save(out);
    out.save_to(bytes);
  }
  auto b = saved_x.clone().requires_grad_();
  auto second = schedule_free({b});
  std::istringstream in_bytes(bytes.str());
  torch::serialize::InputArchive in;
  in.load_from(in_bytes);
  second->load(in);
  use_training_point(*second);
  EXPECT_TRUE(torch::equal(a.detach(), b.detach()));
  for (int k = 10; k < 20; ++k) {
    step(*first, a, k);
    step(*second, b, k);
  }
  EXPECT_TRUE(torch::equal(a.detach(), b.detach()));
}

}  // namespace
}  // namespace kiln
