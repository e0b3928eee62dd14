// The decoder block of the Llama architecture, the one Mistral, Qwen and SmolLM share: pre-RMSNorm
// sublayers of grouped-query causal attention with rotary position embeddings (optionally with
// Qwen 3's RMSNorm on each head's queries and keys) and a SwiGLU MLP, or a mixture of SwiGLU
// experts (core/layers/moe.h); no biases anywhere. The llama
// model wraps these blocks in its token embedding and head; the block is the family's rather than
// one model's, so it lives here with the other pieces models share.
//
// Inside a block, parameter names are Hugging Face's (self_attn.q_proj.weight,
// mlp.gate_proj.weight, input_layernorm.weight, ...) and the rotation is HF's rotate_half
// (core/layers/rotary.h), so a model that names what lies around its blocks as HF does loads HF
// checkpoints as they are. The names are part of the snapshot format as well.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "core/api/model.h"
#include "core/layers/dropout.h"
#include "core/layers/moe.h"
#include "core/layers/tensor_parallel.h"

namespace kiln {

// The block's sizes and choices; a model's options add what lies around its blocks.
struct LlamaBlockOptions {
  int64_t n_head, n_kv_head, n_embd, ffn_dim;
  double norm_eps, rope_theta;
  // Llama 3's rotary frequency scaling; factor 0 = none.
  double rope_factor, low_freq_factor, high_freq_factor;
  int64_t rope_original_context;
  bool qk_norm;
  // model.kernels = "fused": Kiln's RMSNorm and attention, oneDNN's linears
  bool fused_kernels = false;
  double dropout = 0;     // on the attention probabilities and each sublayer's output
  int64_t head_size = 0;  // each head's width; 0 = n_embd / n_head
  MoeOptions moe = {};    // experts = 0: every block dense (plugins/llama/llama_moe.h)
  int64_t moe_every = 1;  // every moe_every-th block routes to experts
  int64_t head_dim() const { return head_size > 0 ? head_size : n_embd / n_head; }
};

// The whole model's: the block's, and the sizes around the blocks.
struct LlamaOptions : LlamaBlockOptions {
  int64_t n_layer, block_size, vocab_size;
  bool tie_embeddings;
};

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, const LlamaBlockOptions& o);
  torch::Tensor forward(const torch::Tensor& x) { return normalise(x, weight); }
  // In float32 whatever the input, as HF's LlamaRMSNorm, then back to the input's type, times
  // `gain` (the weight, or what the caller made of it): core/kernels/fused_rms_norm.h.
  torch::Tensor normalise(const torch::Tensor& x, const torch::Tensor& gain);
  torch::Tensor weight;

 private:
  double eps_;
  bool fused_;
};
TORCH_MODULE(RmsNorm);

// A Linear without a bias, as every matrix of the family is.
torch::nn::Linear bias_free_linear(int64_t in, int64_t out);

// `layer` on x through Kiln's linear (core/layers/linear.h), which adds an adapter's low-rank
// update.
torch::Tensor project(const torch::nn::Linear& layer, const torch::Tensor& x);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  // `layer`: the block's index in the model's layers, which numbers its dropout sites.
  LlamaAttentionImpl(const LlamaBlockOptions& o, int64_t layer);
  torch::Tensor forward(const torch::Tensor& input);

  // This rank's query heads and the key/value heads they read (the rank's query heads are whole
  // groups): q, k and v column-parallel by heads, o_proj row-parallel. `name`: the attention's
  // prefix in the model's parameter names.
  std::vector<ParameterSplit> split(const TensorParallelGroup& group, const std::string& name);

  LayerDropout drop_;  // the block's, numbered by its index in the model's layers
  bool fused_;         // model.kernels = "fused"
  int64_t n_head_, n_kv_head_, head_dim_;  // heads on this rank
  torch::nn::Linear q_proj, k_proj, v_proj, o_proj;
  RmsNorm q_norm{nullptr}, k_norm{nullptr};
  torch::Tensor inv_freq;
  TensorParallelGroup tp;
};
TORCH_MODULE(LlamaAttention);

class SwiGluMlpImpl : public torch::nn::Module {
 public:
  explicit SwiGluMlpImpl(const LlamaBlockOptions& o);
  torch::Tensor forward(const torch::Tensor& input);
  // This rank's hidden units: gate and up column-parallel, down row-parallel.
  std::vector<ParameterSplit> split(const TensorParallelGroup& group, const std::string& name);

  torch::nn::Linear gate_proj, up_proj, down_proj;
  TensorParallelGroup tp;
};
TORCH_MODULE(SwiGluMlp);

class LlamaDecoderLayer : public Layer {
 public:
  // `layer`: the block's index in the model's layers (1 = the first); `checkpoint`: run it
  // through activation checkpointing (core/layers/activation_checkpoint.h).
  LlamaDecoderLayer(const LlamaBlockOptions& o, int64_t layer, bool checkpoint);
  torch::Tensor forward(const torch::Tensor& x) override;

  bool checkpoint_;
  LayerDropout drop_;
  LlamaAttention self_attn;
  // One of the two, registered as "mlp" (transformers' name for both).
  SwiGluMlp mlp{nullptr};
  MixtureOfExperts moe{nullptr};
  RmsNorm input_layernorm, post_attention_layernorm;

 private:
  torch::Tensor compute(const torch::Tensor& x);
};

}  // namespace kiln
