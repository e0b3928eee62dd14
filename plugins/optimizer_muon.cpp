// optimizer "muon": MomentUm Orthogonalized by Newton-schulz (Keller Jordan et al., the optimizer
// of the modded-nanogpt speed records). Each 2-D weight matrix of the model's blocks takes SGD
// momentum (Nesterov by default) whose update is replaced by the nearest semi-orthogonal matrix,
// found by five steps of a quintic Newton-Schulz iteration, scaled by sqrt(max(1, rows / cols)).
// Everything else (the embedding, the head, norms, biases, any parameter not 2-D) takes AdamW
// with its own learning rate, betas and weight decay, as in modded-nanogpt.
//
// The iteration runs in float32, where modded-nanogpt uses bfloat16 on GPUs: LibTorch 1.13's CPU
// has no fast bfloat16 matmul, and float32 keeps the update the same on every backend.
//
// The schedule drives `lr` (Muon's); the AdamW group's rate is adam_lr scaled by the same
// schedule factor (adam_lr / lr times the scheduled lr).
#include <algorithm>
#include <cmath>

#include <torch/optim/optimizer.h>
#include <torch/optim/serialize.h>

#include "core/api/optimizer.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

// The quintic's coefficients, chosen to push every singular value in (0, 1] quickly towards 1
// (they end in about [0.7, 1.2], which training tolerates) rather than to converge exactly.
constexpr double kNsA = 3.4445, kNsB = -4.7750, kNsC = 2.0315;

// G -> approximately U V^T for G = U S V^T.
torch::Tensor newton_schulz(const torch::Tensor& g, int64_t steps) {
  const bool tall = g.size(0) > g.size(1);
  auto x = g.to(torch::kFloat);
  if (tall) x = x.t();
  x = x / (x.norm() + 1e-7);  // the Frobenius norm bounds the spectral norm: all within 1
  for (int64_t i = 0; i < steps; ++i) {
    auto a = x.matmul(x.t());
    auto b = kNsB * a + kNsC * a.matmul(a);
    x = kNsA * x + b.matmul(x);
  }
  return tall ? x.t() : x;
}

struct MuonOptions : public torch::optim::OptimizerCloneableOptions<MuonOptions> {
  explicit MuonOptions(double lr = 0.02) : lr_(lr) {}
  TORCH_ARG(double, lr);
  // This group's rate over the schedule's: 1 for Muon's matrices, adam_lr / lr for the rest.
  TORCH_ARG(double, lr_ratio) = 1.0;
  TORCH_ARG(bool, orthogonalise) = true;  // false: the AdamW group
  TORCH_ARG(double, momentum) = 0.95;
  TORCH_ARG(bool, nesterov) = true;
  TORCH_ARG(int64_t, ns_steps) = 5;
  TORCH_ARG(double, beta1) = 0.8;
  TORCH_ARG(double, beta2) = 0.95;
  TORCH_ARG(double, eps) = 1e-10;
  TORCH_ARG(double, weight_decay) = 0.0;

 public:  // TORCH_ARG leaves the section private
  void serialize(torch::serialize::OutputArchive& archive) const override {
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr_ratio);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(orthogonalise);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(momentum);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(nesterov);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(ns_steps);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta1);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta2);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
  }
  void serialize(torch::serialize::InputArchive& archive) override {
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr_ratio);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, orthogonalise);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, momentum);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, nesterov);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, ns_steps);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta1);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta2);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
  }
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

// Muon's matrices keep momentum_buffer; the AdamW group keeps step, exp_avg and exp_avg_sq.
// Undefined tensors are not written (the serialize macros skip them).
struct MuonParamState : public torch::optim::OptimizerCloneableParamState<MuonParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(torch::Tensor, momentum_buffer);
  TORCH_ARG(torch::Tensor, exp_avg);
  TORCH_ARG(torch::Tensor, exp_avg_sq);

 public:
  void serialize(torch::serialize::OutputArchive& archive) const override {
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(step);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(momentum_buffer);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg);
    _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq);
  }
  void serialize(torch::serialize::InputArchive& archive) override {
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, step);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, momentum_buffer);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg);
    _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg_sq);
  }
};

class Muon : public torch::optim::Optimizer, public DeclaredState {
 public:
  std::vector<torch::Tensor*> state_tensors(
      torch::optim::OptimizerParamState& entry) const override {
    auto& s = static_cast<MuonParamState&>(entry);
    return {&s.momentum_buffer(), &s.exp_avg(), &s.exp_avg_sq()};
  }

  Muon(std::vector<torch::optim::OptimizerParamGroup> groups, MuonOptions defaults)
      : Optimizer(std::move(groups), std::make_unique<MuonOptions>(defaults)) {}

  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::Tensor loss = closure ? closure() : torch::Tensor();  // with autograd, before the guard
    torch::NoGradGuard no_grad;
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const MuonOptions&>(group.options());
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        if (o.orthogonalise()) {
          muon_update(p, o);
        } else {
          adamw_update(p, o);
        }
      }
    }
    return loss;
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    torch::optim::serialize<MuonParamState, MuonOptions>(archive, *this);
  }
  void load(torch::serialize::InputArchive& archive) override {
    torch::optim::serialize<MuonParamState, MuonOptions>(archive, *this);
  }

 private:
  MuonParamState& state_of(const torch::Tensor& p) {
    auto& slot = state_[compat::optimizer_state_key(p)];
    if (!slot) slot = std::make_unique<MuonParamState>();
    return static_cast<MuonParamState&>(*slot);
  }

  // modded-nanogpt's: buf = lerp(buf, g, 1 - momentum); the update is lerp(g, buf, momentum)
  // (Nesterov) or buf, orthogonalised.
  void muon_update(torch::Tensor& p, const MuonOptions& o) {
    MuonParamState& s = state_of(p);
    if (!s.momentum_buffer().defined()) {
      s.momentum_buffer(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    }
    auto& buf = s.momentum_buffer();
    buf.lerp_(p.grad(), 1.0 - o.momentum());
    auto update = o.nesterov() ? p.grad().lerp(buf, o.momentum()) : buf;
    update = newton_schulz(update, o.ns_steps()).to(p.dtype());
    const double lr = o.lr() * o.lr_ratio();
    const double rows = static_cast<double>(p.size(0)), cols = static_cast<double>(p.size(1));
    p.mul_(1.0 - lr * o.weight_decay());
    p.add_(update, -lr * std::sqrt(std::max(1.0, rows / cols)));
  }

  // torch::optim::AdamW's update.
  void adamw_update(torch::Tensor& p, const MuonOptions& o) {
    MuonParamState& s = state_of(p);
    if (!s.exp_avg().defined()) {
      s.exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      s.exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    }
    s.step(s.step() + 1);
    const auto& grad = p.grad();
    const double lr = o.lr() * o.lr_ratio();
    const double step = static_cast<double>(s.step());
    p.mul_(1.0 - lr * o.weight_decay());
    s.exp_avg().mul_(o.beta1()).add_(grad, 1.0 - o.beta1());
    s.exp_avg_sq().mul_(o.beta2()).addcmul_(grad, grad, 1.0 - o.beta2());
    const double bias1 = 1.0 - std::pow(o.beta1(), step), bias2 = 1.0 - std::pow(o.beta2(), step);
    auto denom = (s.exp_avg_sq().sqrt() / std::sqrt(bias2)).add_(o.eps());
    p.addcdiv_(s.exp_avg(), denom, -lr / bias1);
  }
};

std::shared_ptr<torch::optim::Optimizer> make_muon(const Params& p, const ModelParameters& params) {
  const double lr = p.real("lr");
  MuonOptions muon(lr);
  muon.momentum(p.real("momentum"))
      .nesterov(p.flag("nesterov"))
      .ns_steps(p.integer("ns_steps"))
      .weight_decay(p.real("weight_decay"));
  MuonOptions adamw(lr);
  adamw.orthogonalise(false)
      .lr_ratio(lr > 0 ? p.real("adam_lr") / lr : 0.0)
      .beta1(p.real("adam_beta1"))
      .beta2(p.real("adam_beta2"))
      .eps(p.real("adam_eps"))
      .weight_decay(p.real("adam_weight_decay"));
  // Without the model's layers (a stand-in parameter), every matrix counts as a block's.
  std::vector<torch::Tensor> matrices, rest;
  for (size_t i = 0; i < params.size(); ++i) {
    const bool hidden = params.hidden.empty() || params.hidden[i];
    (hidden && params[i].dim() == 2 ? matrices : rest).push_back(params[i]);
  }
  // Either group's lr is the schedule's (the ratio is apart), so configured_lr() reads the base
  // from whichever comes first.
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::vector<MuonOptions> group_options;
  if (!matrices.empty()) {
    groups.emplace_back(matrices, std::make_unique<MuonOptions>(muon));
    group_options.push_back(muon);
  }
  if (!rest.empty()) {
    groups.emplace_back(rest, std::make_unique<MuonOptions>(adamw));
    group_options.push_back(adamw);
  }
  return compat::with_group_options(std::make_shared<Muon>(std::move(groups), muon), group_options);
}

const bool registered = OptimizerRegistry::add(
    {"muon",
     "Muon: Newton-Schulz orthogonalised momentum for the blocks' matrices, AdamW for the rest",
     {ParamSpec::real("lr", 0.02, "Muon's learning rate (the schedule's base)").at_least(0),
      ParamSpec::real("momentum", 0.95, "Muon's momentum").at_least(0).at_most(0.999999),
      ParamSpec::flag("nesterov", true, "Nesterov momentum for Muon"),
      ParamSpec::integer("ns_steps", 5, "Newton-Schulz iterations").at_least(1).at_most(100),
      ParamSpec::real("weight_decay", 0.0, "decoupled weight decay of Muon's matrices").at_least(0),
      ParamSpec::real("adam_lr", 0.008,
                      "AdamW's learning rate for the embedding, head, norms and biases (follows "
                      "the schedule in proportion to lr)")
          .at_least(0),
      ParamSpec::real("adam_beta1", 0.8, "AdamW's first-moment decay")
          .at_least(0)
          .at_most(0.999999),
      ParamSpec::real("adam_beta2", 0.95, "AdamW's second-moment decay")
          .at_least(0)
          .at_most(0.999999),
      ParamSpec::real("adam_eps", 1e-10, "added to AdamW's denominator").at_least(0),
      ParamSpec::real("adam_weight_decay", 0.0, "AdamW's decoupled weight decay").at_least(0)}},
    make_muon);

}  // namespace
}  // namespace kiln
