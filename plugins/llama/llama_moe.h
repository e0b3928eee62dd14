// The llama family's mixture-of-experts keys (docs/moe.md): which blocks route their tokens to
// experts (core/layers/moe.h) instead of one SwiGLU MLP, and how. All of them were added after
// dense llamas were run, so at their defaults they leave a run's config hash as it was.
#pragma once

#include <cstdint>
#include <vector>

#include "core/config/params.h"
#include "core/layers/moe.h"

namespace kiln {

// model.moe_experts, moe_top_k, moe_ffn_dim, moe_shared_experts, moe_every, moe_routing,
// moe_norm_topk_prob, moe_aux_loss_weight, moe_z_loss_weight, moe_capacity_factor and
// moe_bias_update_rate.
std::vector<ParamSpec> moe_params();

// The mixture the keys declare for a llama of `n_embd`, `ffn_dim` and `n_layer` (experts = 0: a
// dense llama); a UserError for a mixture that cannot be built (top-k above the experts).
MoeOptions moe_options_from(const Params& p, int64_t n_embd, int64_t ffn_dim, int64_t n_layer);

// Whether block `layer` (1 = the first) is a mixture of experts: every moe_every-th, as
// transformers' decoder_sparse_step counts them.
bool is_moe_block(const MoeOptions& moe, int64_t every, int64_t layer);

// How many of the blocks are mixtures of experts; a UserError when activation checkpointing
// would recompute one (`checkpointed`: each block's choice).
int64_t count_moe_blocks(const MoeOptions& moe, int64_t every,
                         const std::vector<bool>& checkpointed);

// A UserError for a mixture of experts, none of which has a tensor-parallel form yet: a
// ParamError of parallel.type where the strategy's own attach() asks.
void refuse_tensor_parallel_experts(const MoeOptions& moe);

// The parameters of one mixture-of-experts block's feed-forward, and those of them a token does
// not use (the experts it is not routed to): what the plan counts and what MFU leaves out.
double moe_parameters(const MoeOptions& moe);
double moe_inactive_parameters(const MoeOptions& moe);
// The numbers one mixture-of-experts block holds besides its parameters: its routing bias.
double moe_buffers(const MoeOptions& moe);

}  // namespace kiln
