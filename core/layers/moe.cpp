#include "core/layers/moe.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace kiln {

namespace {

at::Tensor weight_of(torch::nn::Module& owner, const std::string& name, at::IntArrayRef shape) {
  auto module = owner.register_module(name, std::make_shared<torch::nn::Module>());
  return module->register_parameter("weight", torch::empty(shape));
}

// One expert's SwiGLU on x [n, n_embd]: gate_up [2 ffn, n_embd] (gate rows first), down
// [n_embd, ffn].
at::Tensor expert_swiglu(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down) {
  const auto halves = at::linear(x, gate_up).chunk(2, -1);
  return at::linear(at::silu(halves[0]) * halves[1], down);
}

}  // namespace

RouterChoice route(const at::Tensor& logits, const MoeOptions& o, const at::Tensor& bias) {
  // Mixtral's softmax over the k largest logits is the full softmax's k largest, renormalised.
  const auto probabilities = at::softmax(logits.to(at::kFloat), -1);
  auto [weights, experts] = at::topk(probabilities, o.top_k, -1);
  if (bias.defined()) {
    experts = std::get<1>(at::topk(probabilities + bias, o.top_k, -1));
    weights = probabilities.gather(-1, experts);
  }
  if (o.routing == MoeRouting::kMixtral || o.norm_topk_prob)
    weights = weights / weights.sum(-1, /*keepdim=*/true);
  return {experts, weights};
}

at::Tensor load_balancing_loss(const at::Tensor& logits, int64_t top_k) {
  const int64_t tokens = logits.size(0), n_experts = logits.size(1);
  const auto probabilities = at::softmax(logits.to(at::kFloat), -1);
  const auto chosen = std::get<1>(at::topk(probabilities, top_k, -1)).reshape(-1);
  const auto share = at::zeros({n_experts}, probabilities.options())
                         .scatter_add(0, chosen, at::ones_like(chosen, probabilities.options())) /
                     static_cast<double>(tokens);
  return (share * probabilities.mean(0)).sum() * static_cast<double>(n_experts);
}

at::Tensor router_z_loss(const at::Tensor& logits) {
  return at::logsumexp(logits.to(at::kFloat), -1).pow(2).mean();
}

int64_t expert_capacity(int64_t assignments, const MoeOptions& o) {
  if (o.capacity_factor <= 0) return -1;
  return static_cast<int64_t>(std::ceil(o.capacity_factor * static_cast<double>(assignments) /
                                        static_cast<double>(o.experts)));
}

Dispatch dispatch(const at::Tensor& experts, int64_t n_experts, int64_t capacity) {
  const auto flat = experts.reshape(-1);
  auto [expert, order] = at::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  Dispatch d;
  d.counts = at::bincount(flat, /*weights=*/{}, n_experts);
  const auto starts = d.counts.cumsum(0) - d.counts;
  auto rank = at::arange(flat.numel(), flat.options()) - starts.index_select(0, expert);
  const int64_t fullest = d.counts.max().item<int64_t>();
  d.width = capacity < 0 ? fullest : std::min(capacity, fullest);
  if (capacity >= 0 && fullest > capacity) {
    const auto kept = (rank < capacity).nonzero().squeeze(1);
    d.dropped = flat.numel() - kept.numel();
    order = order.index_select(0, kept);
    expert = expert.index_select(0, kept);
    rank = rank.index_select(0, kept);
  }
  d.order = order;
  d.slot = expert * d.width + rank;
  return d;
}

MixtureOfExpertsImpl::MixtureOfExpertsImpl(const MoeOptions& o) : options_(o) {
  router = weight_of(*this, "gate", {o.experts, o.n_embd});
  auto stacked = register_module("experts", std::make_shared<torch::nn::Module>());
  gate_up_proj = stacked->register_parameter("gate_up_proj",
                                             torch::empty({o.experts, 2 * o.ffn_dim, o.n_embd}));
  down_proj =
      stacked->register_parameter("down_proj", torch::empty({o.experts, o.n_embd, o.ffn_dim}));
  if (o.shared_ffn_dim > 0) {
    auto shared = register_module("shared_experts", std::make_shared<torch::nn::Module>());
    shared_gate = weight_of(*shared, "gate_proj", {o.shared_ffn_dim, o.n_embd});
    shared_up = weight_of(*shared, "up_proj", {o.shared_ffn_dim, o.n_embd});
    shared_down = weight_of(*shared, "down_proj", {o.n_embd, o.shared_ffn_dim});
  }
  if (o.bias_update_rate > 0) {
    routing_bias = named_children()["gate"]->register_buffer("e_score_correction_bias",
                                                             torch::zeros({o.experts}));
  }
}

at::Tensor MixtureOfExpertsImpl::forward(const at::Tensor& x) {
  const MoeOptions& o = options_;
  const auto flat = x.reshape({-1, o.n_embd});
  const auto logits = at::linear(flat, router);
  const RouterChoice choice = route(logits, o, routing_bias);
  const int64_t assignments = choice.experts.numel();
  const Dispatch d = dispatch(choice.experts, o.experts, expert_capacity(assignments, o));
  const auto tokens = at::floor_divide(d.order, o.top_k);
  const auto rows = flat.index_select(0, tokens);
  const auto out = placement.size == 1
                       ? grouped_swiglu(rows, d, gate_up_proj, down_proj)
                       : experts_over_group(rows, d, gate_up_proj, down_proj, placement);
  const auto weights = choice.weights.reshape(-1).index_select(0, d.order).unsqueeze(1);
  auto y =
      at::zeros_like(flat).index_add(0, tokens, (out * weights.to(out.dtype())).to(flat.dtype()));
  if (shared_gate.defined()) y = y + shared_output(flat).to(flat.dtype());
  auxiliary_loss_ = at::Tensor();
  if (is_training()) record(logits, d, assignments);
  return y.view(x.sizes());
}

at::Tensor MixtureOfExpertsImpl::forward_by_loop(const at::Tensor& x) {
  const MoeOptions& o = options_;
  const auto flat = x.reshape({-1, o.n_embd});
  const RouterChoice choice = route(at::linear(flat, router), o, routing_bias);
  auto y = at::zeros_like(flat);
  for (int64_t e = 0; e < o.experts; ++e) {
    const auto where = (choice.experts == e).nonzero();  // [n, 2]: token, slot
    if (where.size(0) == 0) continue;
    const auto tokens = where.select(1, 0);
    const auto weights = choice.weights.index({tokens, where.select(1, 1)}).unsqueeze(1);
    const auto out = expert_swiglu(flat.index_select(0, tokens), gate_up_proj[e], down_proj[e]);
    y.index_add_(0, tokens, (out * weights.to(out.dtype())).to(flat.dtype()));
  }
  if (shared_gate.defined()) y = y + shared_output(flat).to(flat.dtype());
  return y.view(x.sizes());
}

at::Tensor MixtureOfExpertsImpl::shared_output(const at::Tensor& flat) {
  return at::linear(at::silu(at::linear(flat, shared_gate)) * at::linear(flat, shared_up),
                    shared_down);
}

void MixtureOfExpertsImpl::record(const at::Tensor& logits, const Dispatch& d,
                                  int64_t assignments) {
  const MoeOptions& o = options_;
  const auto balance = load_balancing_loss(logits, o.top_k);
  const auto z = router_z_loss(logits);
  if (o.aux_loss_weight > 0 || o.z_loss_weight > 0)
    auxiliary_loss_ = balance * o.aux_loss_weight + z * o.z_loss_weight;
  const auto counted = at::tensor(
      {1.0, static_cast<double>(assignments), static_cast<double>(d.dropped)}, at::kDouble);
  const auto pass = at::cat({at::stack({balance.detach(), z.detach()}).to(at::kDouble),
                             counted.to(logits.device()), d.counts.to(at::kDouble)});
  tallies_ = tallies_.defined() ? tallies_ + pass : pass;
  if (routing_bias.defined())
    loads_ = loads_.defined() ? loads_ + d.counts : d.counts.to(at::kDouble);
}

at::Tensor MixtureOfExpertsImpl::take_auxiliary_loss() {
  return std::exchange(auxiliary_loss_, at::Tensor());
}

at::Tensor MixtureOfExpertsImpl::take_loads() {
  if (!loads_.defined()) return at::zeros({options_.experts}, router.options().dtype(at::kDouble));
  return std::exchange(loads_, at::Tensor());
}

void MixtureOfExpertsImpl::balance_bias(const at::Tensor& loads) {
  const auto underloaded = at::sign(loads.mean() - loads).to(routing_bias.dtype());
  routing_bias.add_(underloaded, options_.bias_update_rate);
}

at::Tensor MixtureOfExpertsImpl::take_tallies() {
  return std::exchange(tallies_, at::Tensor());
}

std::vector<std::pair<std::string, double>> moe_measures(const at::Tensor& tallies) {
  const auto host = tallies.to(at::kDouble).cpu().contiguous();
  const double* t = host.data_ptr<double>();
  const double mean_count = t[kAssignments] / static_cast<double>(host.numel() - kCounts);
  return {{"aux_loss", t[kAuxLoss] / t[kPasses]},
          {"z_loss", t[kZLoss] / t[kPasses]},
          {"load_imbalance", *std::max_element(t + kCounts, t + host.numel()) / mean_count},
          {"dropped_fraction", t[kDropped] / t[kAssignments]}};
}

std::vector<std::pair<std::string, double>> take_moe_measures(
    const std::vector<std::pair<size_t, MixtureOfExperts>>& layers,
    const SumOverRanks& sum_over_ranks) {
  std::vector<at::Tensor> tallies;
  for (auto [index, layer] : layers) {  // a copy of each holder: taking changes the layer
    tallies.push_back(layer->take_tallies());
    if (!tallies.back().defined()) return {};  // not trained since the last call, on any rank
  }
  if (tallies.empty()) return {};
  const at::Tensor summed = sum_over_ranks(at::stack(tallies));  // one collective for all
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 0; i < layers.size(); ++i) {
    for (const auto& [name, value] : moe_measures(summed[static_cast<int64_t>(i)]))
      out.emplace_back(fmt::format("moe_{}.{}", layers[i].first, name), value);
  }
  return out;
}

}  // namespace kiln
