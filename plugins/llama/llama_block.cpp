#include "plugins/llama/llama_block.h"

#include "core/kernels/fused_rms_norm.h"
#include "core/layers/activation_checkpoint.h"
#include "core/layers/fused_attention.h"
#include "core/layers/linear.h"
#include "core/layers/rotary.h"
#include "plugins/llama/llama_moe.h"

namespace kiln {

RmsNormImpl::RmsNormImpl(int64_t dim, const LlamaBlockOptions& o)
    : eps_(o.norm_eps), fused_(o.fused_kernels) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RmsNormImpl::normalise(const torch::Tensor& x, const torch::Tensor& gain) {
  return rms_norm(x, gain, eps_, fused_);
}

torch::nn::Linear bias_free_linear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

torch::Tensor project(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return linear(x, layer->weight, layer->bias);
}

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaBlockOptions& o, int64_t layer)
    : drop_{o.dropout, layer},
      fused_(o.fused_kernels),
      n_head_(o.n_head),
      n_kv_head_(o.n_kv_head),
      head_dim_(o.head_dim()),
      q_proj(register_module("q_proj", bias_free_linear(o.n_embd, o.n_head * o.head_dim()))),
      k_proj(register_module("k_proj", bias_free_linear(o.n_embd, o.n_kv_head * o.head_dim()))),
      v_proj(register_module("v_proj", bias_free_linear(o.n_embd, o.n_kv_head * o.head_dim()))),
      o_proj(register_module("o_proj", bias_free_linear(o.n_head * o.head_dim(), o.n_embd))) {
  // Qwen 3's spelling and place: RMSNorm over each head's dimensions, before the rotation.
  if (o.qk_norm) {
    q_norm = register_module("q_norm", RmsNorm(head_dim_, o));
    k_norm = register_module("k_norm", RmsNorm(head_dim_, o));
  }
  // A buffer so that it moves with the block to the block's device; a pure function of the
  // options, so a snapshot's copy is the same numbers.
  inv_freq = register_buffer(
      "inv_freq",
      rotary_inverse_frequencies({o.head_dim(), o.rope_theta, o.rope_factor, o.low_freq_factor,
                                  o.high_freq_factor, o.rope_original_context}));
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& input) {
  const auto x = tp.enter(input);
  const int64_t b = x.size(0), t = x.size(1);
  auto heads = [&](const torch::Tensor& m, int64_t n) { return m.view({b, t, n, head_dim_}); };
  auto q = project(q_proj, x);
  auto k = project(k_proj, x);
  if (q_norm) {
    // Replicated gains applied to this rank's heads only: their gradients are partial sums,
    // which enter adds up over the group in backward.
    q = q_norm->normalise(heads(q, n_head_), tp.enter(q_norm->weight)).reshape({b, t, -1});
    k = k_norm->normalise(heads(k, n_kv_head_), tp.enter(k_norm->weight)).reshape({b, t, -1});
  }
  // This rank's heads are heads [rank * n_head_, (rank + 1) * n_head_) of the model's.
  const SliceOf mine{1, tp.rank * n_head_, tp.size * n_head_};
  auto y =
      rotary_self_attention(q, k, project(v_proj, x), n_head_, inv_freq, drop_.p, is_training(),
                            fused_, drop_.site(DropoutPlace::kAttentionWeights), mine);
  return tp.leave(project(o_proj, y));
}

std::vector<ParameterSplit> LlamaAttentionImpl::split(const TensorParallelGroup& group,
                                                      const std::string& name) {
  tp = group;
  n_head_ /= group.size;
  n_kv_head_ /= group.size;
  return {{name + "q_proj.weight", 0, 1},
          {name + "k_proj.weight", 0, 1},
          {name + "v_proj.weight", 0, 1},
          {name + "o_proj.weight", 1, 1}};
}

SwiGluMlpImpl::SwiGluMlpImpl(const LlamaBlockOptions& o)
    : gate_proj(register_module("gate_proj", bias_free_linear(o.n_embd, o.ffn_dim))),
      up_proj(register_module("up_proj", bias_free_linear(o.n_embd, o.ffn_dim))),
      down_proj(register_module("down_proj", bias_free_linear(o.ffn_dim, o.n_embd))) {}

torch::Tensor SwiGluMlpImpl::forward(const torch::Tensor& input) {
  const auto x = tp.enter(input);
  const auto hidden = torch::silu(project(gate_proj, x)) * project(up_proj, x);
  return tp.leave(project(down_proj, hidden));
}

std::vector<ParameterSplit> SwiGluMlpImpl::split(const TensorParallelGroup& group,
                                                 const std::string& name) {
  tp = group;
  return {{name + "gate_proj.weight", 0, 1},
          {name + "up_proj.weight", 0, 1},
          {name + "down_proj.weight", 1, 1}};
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaBlockOptions& o, int64_t layer, bool checkpoint)
    : checkpoint_(checkpoint),
      drop_{o.dropout, layer},
      self_attn(register_module("self_attn", LlamaAttention(o, layer))),
      mlp(is_moe_block(o.moe, o.moe_every, layer) ? SwiGluMlp{nullptr}
                                                  : register_module("mlp", SwiGluMlp(o))),
      moe(is_moe_block(o.moe, o.moe_every, layer) ? register_module("mlp", MixtureOfExperts(o.moe))
                                                  : MixtureOfExperts{nullptr}),
      input_layernorm(register_module("input_layernorm", RmsNorm(o.n_embd, o))),
      post_attention_layernorm(register_module("post_attention_layernorm", RmsNorm(o.n_embd, o))) {}

torch::Tensor LlamaDecoderLayer::forward(const torch::Tensor& x) {
  if (!checkpoint_) return compute(x);
  return checkpointed([this](const torch::Tensor& in) { return compute(in); }, x);
}

torch::Tensor LlamaDecoderLayer::compute(const torch::Tensor& x) {
  auto h = x + drop_(self_attn(input_layernorm(x)), DropoutPlace::kAttentionOutput, is_training());
  const auto normed = post_attention_layernorm(h);
  return h + drop_(moe ? moe(normed) : mlp(normed), DropoutPlace::kMlpOutput, is_training());
}

}  // namespace kiln
