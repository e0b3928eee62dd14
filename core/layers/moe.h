// A mixture-of-experts feed-forward: a router scores every token against E experts, each token
// goes to its top k, and the experts' SwiGLU outputs come back weighted by the router. What
// Mixtral, Qwen3-MoE and DeepSeek-V3 put where a dense block has its MLP; which models use it, and
// under which config keys, is theirs to say (docs/moe.md).
//
// Parameter names and layouts are transformers' (5.x): gate.weight [E, n_embd], and the experts
// stacked, experts.gate_up_proj [E, 2 ffn, n_embd] (gate rows first) and experts.down_proj
// [E, n_embd, ffn]; shared experts, when there are any, are one SwiGLU as wide as all of them
// together, shared_experts.{gate,up,down}_proj.weight (DeepSeek's names), added unweighted.
//
// The experts run as grouped products: the token-expert assignments are sorted by expert, gathered
// into one [E, C, n_embd] batch padded to the fullest expert's count C, and each projection is one
// batched matmul over all experts (docs/benchmarks.md measures it against a loop over experts).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "core/layers/expert_exchange.h"

namespace kiln {

enum class MoeRouting {
  kMixtral,  // softmax over the k largest logits (transformers' MixtralTopKRouter)
  kQwen3,    // softmax over every expert, the k largest kept, renormalised if norm_topk_prob
};

struct MoeOptions {
  int64_t n_embd = 0;
  int64_t experts = 0;
  int64_t top_k = 0;
  int64_t ffn_dim = 0;         // each expert's SwiGLU width
  int64_t shared_ffn_dim = 0;  // the shared experts' width together; 0 = none
  MoeRouting routing = MoeRouting::kMixtral;
  bool norm_topk_prob = false;  // kQwen3: the k kept probabilities renormalised to sum to 1
  double aux_loss_weight = 0;   // of the load-balancing loss in the training loss
  double z_loss_weight = 0;     // of the router z-loss in the training loss
  // 0 = dropless; otherwise each expert takes at most ceil(factor x tokens x k / E) of a forward
  // pass's assignments, the earliest tokens first, and the rest are dropped (they add nothing).
  double capacity_factor = 0;
  // DeepSeek-V3's auxiliary-loss-free balancing: the step a routing bias moves by after each
  // update (balance_bias); 0 = no bias.
  double bias_update_rate = 0;
};

// The router's choice for each of N tokens: the k experts [N, k] (int64) and their weights
// [N, k], in the order of transformers' topk. A routing `bias` [E] (DeepSeek-V3's), when given,
// is added to the probabilities only to choose the k; the weights are the unbiased ones.
struct RouterChoice {
  at::Tensor experts, weights;
};
RouterChoice route(const at::Tensor& logits, const MoeOptions& o,
                   const at::Tensor& bias = at::Tensor());

// Switch Transformer's load-balancing loss over one layer's router logits [N, E]: E times the sum
// over experts of (share of the N x k assignments it got) x (its mean router probability), as
// transformers' load_balancing_loss_func for one layer: k when perfectly balanced.
at::Tensor load_balancing_loss(const at::Tensor& logits, int64_t top_k);
// ST-MoE's router z-loss: the mean over tokens of logsumexp(logits)^2.
at::Tensor router_z_loss(const at::Tensor& logits);

// The most assignments one expert takes from a forward pass of `assignments` (tokens x k);
// -1 when capacity_factor is 0 (dropless).
int64_t expert_capacity(int64_t assignments, const MoeOptions& o);

// The assignments [N, k] sorted by expert, stably (within an expert, by token), and cut to
// `capacity` per expert (-1: none cut).
struct Dispatch {
  at::Tensor order;     // the kept assignments' flat indices (token x k + slot), by expert
  at::Tensor slot;      // each kept one's row in the padded batch: expert x width + rank
  at::Tensor counts;    // assignments per expert before the cut [E] (int64)
  int64_t width = 0;    // rows per expert in the padded batch
  int64_t dropped = 0;  // assignments cut
};
Dispatch dispatch(const at::Tensor& experts, int64_t n_experts, int64_t capacity);

// A layer's tallies (double): the router losses and counts summed over training forward passes,
// then each expert's assignments (before any capacity cut) from kCounts on.
enum MoeTally : int64_t { kAuxLoss, kZLoss, kPasses, kAssignments, kDropped, kCounts };

class MixtureOfExpertsImpl : public torch::nn::Module {
 public:
  explicit MixtureOfExpertsImpl(const MoeOptions& o);
  // x [..., n_embd] to the same shape. In training mode it also keeps the weighted auxiliary
  // losses for take_auxiliary_loss() and adds this pass to the measures.
  at::Tensor forward(const at::Tensor& x);
  // The same output by a loop over experts, one small product each: what the grouped path is
  // measured against (tools/bench/moe_grouped.cpp), and nothing else.
  at::Tensor forward_by_loop(const at::Tensor& x);

  // The weighted load-balancing and z-losses of the last training forward pass, then forgotten;
  // undefined when there was none since or both weights are 0.
  at::Tensor take_auxiliary_loss();
  // What the training forward passes since the last call add up to (MoeTally), then forgotten;
  // undefined when there was none. Sums, so that the ranks' tallies add before moe_measures
  // reads them.
  at::Tensor take_tallies();
  // With a bias_update_rate: the assignments each expert got [E] (double) over the training
  // forward passes since the last call, before any capacity cut; zeros when there was none.
  at::Tensor take_loads();
  // DeepSeek-V3's update (docs/moe.md): bias_i += rate x sign(mean load - load_i), for the
  // `loads` [E] of a whole step, every rank's summed. Outside the gradient.
  void balance_bias(const at::Tensor& loads);

  const MoeOptions& options() const { return options_; }
  at::Tensor router, gate_up_proj, down_proj;      // gate.weight, experts.*
  at::Tensor shared_gate, shared_up, shared_down;  // shared_experts.*_proj.weight, if any
  // gate.e_score_correction_bias [E] (float32, a buffer: DeepSeek-V3's name), if balancing
  at::Tensor routing_bias;
  // Where the experts live: all here, unless a strategy spread them over ranks and kept this
  // rank's share of gate_up_proj and down_proj (core/distributed/expert_placement.h).
  ExpertParallelGroup placement;

 private:
  at::Tensor shared_output(const at::Tensor& flat);
  void record(const at::Tensor& logits, const Dispatch& d, int64_t assignments);

  MoeOptions options_;
  at::Tensor auxiliary_loss_;
  at::Tensor tallies_;  // MoeTally, summed over passes (detached, double)
  at::Tensor loads_;    // assignments per expert since take_loads (with a bias_update_rate)
};
TORCH_MODULE(MixtureOfExperts);

// From a layer's tallies (summed over ranks, or one rank's): aux_loss and z_loss, their means
// over the passes; load_imbalance, the fullest expert's assignments over the mean; and
// dropped_fraction, of the assignments. Counts are added before the ratio is taken, so a step's
// imbalance is that of all its tokens, as one process with the whole batch would count it.
std::vector<std::pair<std::string, double>> moe_measures(const at::Tensor& tallies);

// Sums a tensor over the ranks that trained on different tokens (ParallelStrategy::sum).
using SumOverRanks = std::function<at::Tensor(const at::Tensor&)>;
// Each layer's measures as moe_L.NAME, L the index beside it, from every layer's tallies summed
// over the ranks by one call of `sum_over_ranks` (a collective: every rank calls this after every
// step); empty when the layers were not trained since the last call.
std::vector<std::pair<std::string, double>> take_moe_measures(
    const std::vector<std::pair<size_t, MixtureOfExperts>>& layers,
    const SumOverRanks& sum_over_ranks);

}  // namespace kiln
