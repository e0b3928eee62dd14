#include "plugins/llama/llama_moe.h"

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

std::vector<ParamSpec> moe_params() {
  return {
      ParamSpec::integer("moe_experts", 0,
                         "routed experts in each mixture-of-experts block (Hugging Face: "
                         "num_local_experts, num_experts); 0 = a dense SwiGLU MLP")
          .at_least(0)
          .at_most(4096)
          .added_later(),
      ParamSpec::integer("moe_top_k", 2, "experts each token goes to (num_experts_per_tok)")
          .at_least(1)
          .at_most(4096)
          .added_later(),
      ParamSpec::integer("moe_ffn_dim", 0,
                         "each expert's SwiGLU width (moe_intermediate_size); 0 = ffn_dim")
          .at_least(0)
          .added_later(),
      ParamSpec::integer("moe_shared_experts", 0,
                         "experts every token goes through, unweighted, as one SwiGLU "
                         "moe_shared_experts x moe_ffn_dim wide (DeepSeek's n_shared_experts)")
          .at_least(0)
          .at_most(64)
          .added_later(),
      ParamSpec::integer("moe_every", 1,
                         "every n-th block is a mixture of experts, the others dense "
                         "(decoder_sparse_step)")
          .at_least(1)
          .added_later(),
      ParamSpec::text("moe_routing", "mixtral",
                      "\"mixtral\": softmax over the top-k logits; \"qwen3\": softmax over all "
                      "experts, then the top k")
          .one_of({"mixtral", "qwen3"})
          .added_later(),
      ParamSpec::flag("moe_norm_topk_prob", false,
                      "qwen3 routing: the k kept probabilities renormalised (norm_topk_prob)")
          .added_later(),
      ParamSpec::real("moe_aux_loss_weight", 0.001,
                      "weight of the load-balancing loss in the training loss "
                      "(router_aux_loss_coef)")
          .at_least(0)
          .at_most(100)
          .added_later(),
      ParamSpec::real("moe_z_loss_weight", 0.0,
                      "weight of the router z-loss in the training loss (router_z_loss_coef)")
          .at_least(0)
          .at_most(100)
          .added_later(),
      ParamSpec::real("moe_capacity_factor", 0.0,
                      "each expert takes at most factor x tokens x top_k / experts of a batch, "
                      "the rest dropped; 0 = dropless")
          .at_least(0)
          .at_most(1000)
          .added_later(),
      ParamSpec::real("moe_bias_update_rate", 0.0,
                      "DeepSeek-V3's auxiliary-loss-free balancing: each expert's routing bias "
                      "moves by this much per step toward the mean load; 0 = no bias")
          .at_least(0)
          .at_most(1)
          .added_later(),
  };
}

MoeOptions moe_options_from(const Params& p, int64_t n_embd, int64_t ffn_dim, int64_t n_layer) {
  MoeOptions o;
  o.experts = p.integer("moe_experts");
  if (o.experts == 0) return o;
  o.n_embd = n_embd;
  o.top_k = p.integer("moe_top_k");
  o.ffn_dim = p.integer("moe_ffn_dim") > 0 ? p.integer("moe_ffn_dim") : ffn_dim;
  o.shared_ffn_dim = p.integer("moe_shared_experts") * o.ffn_dim;
  o.routing = p.text("moe_routing") == "qwen3" ? MoeRouting::kQwen3 : MoeRouting::kMixtral;
  o.norm_topk_prob = p.flag("moe_norm_topk_prob");
  o.aux_loss_weight = p.real("moe_aux_loss_weight");
  o.z_loss_weight = p.real("moe_z_loss_weight");
  o.capacity_factor = p.real("moe_capacity_factor");
  o.bias_update_rate = p.real("moe_bias_update_rate");
  if (o.top_k > o.experts) {
    throw ParamError("moe_top_k", fmt::format("model.moe_top_k = {} is more than model.moe_experts "
                                              "= {}: each token goes to that many "
                                              "different experts; lower moe_top_k or add experts",
                                              o.top_k, o.experts));
  }
  if (p.integer("moe_every") > n_layer) {
    throw ParamError(
        "moe_every",
        fmt::format(
            "model.moe_every = {} is more than model.n_layer = {}: no block would be a mixture of "
            "experts; lower moe_every or set moe_experts = 0",
            p.integer("moe_every"), n_layer));
  }
  return o;
}

bool is_moe_block(const MoeOptions& moe, int64_t every, int64_t layer) {
  return moe.experts > 0 && layer % every == 0;
}

int64_t count_moe_blocks(const MoeOptions& moe, int64_t every,
                         const std::vector<bool>& checkpointed) {
  int64_t count = 0;
  for (size_t i = 0; i < checkpointed.size(); ++i) {
    if (!is_moe_block(moe, every, static_cast<int64_t>(i) + 1)) continue;
    ++count;
    // Recomputed in backward, the block's router losses would have no gradient in forward.
    if (checkpointed[i]) {
      throw ParamError(
          "activation_checkpointing",
          fmt::format(
              "model.activation_checkpointing recomputes block {}, a mixture of experts whose "
              "router losses need the first pass's gradient: set activation_checkpointing = "
              "\"none\", or moe_experts = 0",
              i));
    }
  }
  return count;
}

void refuse_tensor_parallel_experts(const MoeOptions& moe) {
  if (moe.experts == 0) return;
  throw ParamError(
      "type",
      fmt::format(
          "model.moe_experts = {}: a mixture of experts has no tensor-parallel form yet: use "
          "parallel.type = \"ddp\", \"zero\" or \"fsdp\", or moe_experts = 0",
          moe.experts));
}

double moe_parameters(const MoeOptions& moe) {
  const double c = static_cast<double>(moe.n_embd);
  return static_cast<double>(moe.experts) * (c + 3 * c * static_cast<double>(moe.ffn_dim)) +
         3 * c * static_cast<double>(moe.shared_ffn_dim);
}

double moe_inactive_parameters(const MoeOptions& moe) {
  return static_cast<double>(moe.experts - moe.top_k) * 3 * static_cast<double>(moe.n_embd) *
         static_cast<double>(moe.ffn_dim);
}

double moe_buffers(const MoeOptions& moe) {
  return moe.bias_update_rate > 0 ? static_cast<double>(moe.experts) : 0;
}

}  // namespace kiln
