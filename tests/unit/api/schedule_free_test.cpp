// Schedule-Free AdamW (plugins/optimizer_schedule_free_adamw.cpp) against the paper's update
// written here from Algorithm 1 of Defazio et al. 2024 with explicit x, y and z in double
// precision (the reference implementation's AdamWScheduleFreeReference form, not the plugin's
// in-place one): 20 steps with a warmup through the lr, weight decay and r > 0; the averaged
// iterate it shows for evaluation; and a snapshot taken while it shows x resumes bit for bit.
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
// weights (k+1)^r lr_max^2, y interpolates them; decay taken at y.
struct Reference {
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
      z[i] -= lr * (g[i] / denom + kDecay * y[i]);
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

TEST(ScheduleFree, FollowsThePapersUpdateAndShowsTheAveragedIterate) {
  const std::vector<double> start = {1.0, -2.0, 0.5, 3.0};
  auto p = torch::tensor(start, torch::kDouble).requires_grad_();
  auto opt = schedule_free({p});
  Reference ref{start, start, start, std::vector<double>(start.size(), 0.0)};
  auto* averaged = dynamic_cast<AveragedIterate*>(opt.get());
  ASSERT_NE(averaged, nullptr);
  for (int k = 0; k < 20; ++k) {
    step(*opt, p, k);
    ref.step(k);
    const std::vector<double> y = values(p);
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(y[i], ref.y[i], 1e-12) << "y, step " << k + 1 << ", element " << i;
    {
      const AveragedIterateScope scope(opt.get());
      const std::vector<double> x = values(p);
      for (size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(x[i], ref.x[i], 1e-12) << "x, step " << k + 1 << ", element " << i;
    }
    EXPECT_TRUE(torch::equal(p.detach(), torch::tensor(y, torch::kDouble)))
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
