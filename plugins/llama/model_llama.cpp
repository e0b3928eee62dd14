// model "llama": the Llama architecture (Llama 2/3, and the SmolLM / Mistral-style models that
// share its block). Token embedding without positions; pre-RMSNorm blocks of grouped-query causal
// attention with rotary position embeddings and a SwiGLU MLP (plugins/llama/llama_block.h); a final
// RMSNorm and an output head, optionally tied to the embedding. No biases anywhere.
//
// Parameter names are Hugging Face LlamaForCausalLM's without its "model." prefix
// (embed_tokens.weight, layers.0.self_attn.q_proj.weight, ..., norm.weight, lm_head.weight), and
// the rotary embedding rotates the first half of each head's dimensions against the second half
// (HF's rotate_half), so HF checkpoints load as they are. Meta's original checkpoints pair
// adjacent dimensions instead; their q_proj/k_proj rows would need permuting first.
//
// Initialisation (as gpt, GPT-2's): every matrix N(0, 0.02), except o_proj and down_proj, which
// write into the residual stream and get 0.02 / sqrt(2 n_layer); RMSNorm gains start at 1.
#include <cmath>

#include <fmt/format.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include "core/api/kernel_choice.h"
#include "core/api/model.h"
#include "core/layers/activation_checkpoint.h"
#include "core/layers/linear.h"
#include "core/util/error.h"
#include "plugins/llama/llama_block.h"
#include "plugins/llama/llama_interchange.h"
#include "plugins/llama/llama_moe.h"

namespace kiln {
namespace {

class TokenEmbedding : public Layer {
 public:
  explicit TokenEmbedding(const LlamaOptions& o) {
    weight = register_parameter("weight", torch::empty({o.vocab_size, o.n_embd}));
  }
  torch::Tensor forward(const torch::Tensor& tokens) override {
    return torch::embedding(weight, tokens);
  }
  torch::Tensor weight;
};

// The final norm and the output head. Registered in the model under its top-level names (norm,
// lm_head) rather than as one submodule, so that the names stay HF's; registered here too, so
// that this layer's parameters() are its own for the pipeline strategy.
class Head : public Layer {
 public:
  Head(RmsNorm norm_module, torch::nn::Linear lm_head_module,
       std::shared_ptr<TokenEmbedding> embedding)
      : norm(register_module("norm", std::move(norm_module))), embedding_(std::move(embedding)) {
    if (lm_head_module) lm_head = register_module("lm_head", std::move(lm_head_module));
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    if (lm_head) return project(lm_head, norm(x));
    return linear(norm(x), embedding_->weight, at::Tensor());  // tied
  }
  std::vector<torch::Tensor> borrowed_parameters() const override {
    if (lm_head) return {};
    return {embedding_->weight};
  }

  RmsNorm norm;
  torch::nn::Linear lm_head{nullptr};

 private:
  std::shared_ptr<TokenEmbedding> embedding_;
};

class Llama : public Model {
 public:
  Llama(const LlamaOptions& o, const std::vector<bool>& checkpointed_blocks) : options_(o) {
    embed_tokens_ = register_module("embed_tokens", std::make_shared<TokenEmbedding>(o));
    blocks_ = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < o.n_layer; ++i)
      blocks_->push_back(std::make_shared<LlamaDecoderLayer>(o, i + 1, checkpointed_blocks[i]));
    auto norm = register_module("norm", RmsNorm(o.n_embd, o));
    torch::nn::Linear lm_head{nullptr};
    if (!o.tie_embeddings)
      lm_head = register_module("lm_head", bias_free_linear(o.n_embd, o.vocab_size));
    head_ = std::make_shared<Head>(norm, lm_head, embed_tokens_);
    append_layer(embed_tokens_);
    for (const auto& block : *blocks_)
      append_layer(std::dynamic_pointer_cast<Layer>(block));
    append_layer(head_);
    initialise();
  }

  int64_t vocab_size() const override { return options_.vocab_size; }
  int64_t context_length() const override { return options_.block_size; }

  // Heads and SwiGLU units split; the embedding, norms (QK norms too: per head dimension) and
  // head replicated.
  std::vector<ParameterSplit> split_for_tensor_parallel(const TensorParallelGroup& group) override {
    refuse_tensor_parallel_experts(options_.moe);  // any tp, 1 included
    std::vector<ParameterSplit> splits;
    for (size_t i = 0; i < blocks_->size(); ++i) {
      auto& block = *blocks_->ptr<LlamaDecoderLayer>(i);
      const std::string name = fmt::format("layers.{}.", i);
      for (auto& split : block.self_attn->split(group, name + "self_attn."))
        splits.push_back(std::move(split));
      for (auto& split : block.mlp->split(group, name + "mlp."))  // dense: tp refuses experts
        splits.push_back(std::move(split));
    }
    keep_slices(*this, splits, group);
    return splits;
  }

  // 6N for the weights' matmuls plus 12 L H Q T for attention scores and their use (PaLM
  // appendix B, as gpt), with H the query heads (grouped-query attention shares keys and values,
  // not the score work). N leaves out an untied embedding, a lookup that does no matmul; a tied
  // one is the head's matmul and counts.
  double flops_per_token(int64_t seq_len) const override {
    // Only the experts a token is routed to count (the active parameters), wherever they live:
    // under expert parallelism this rank holds a share of each block's experts.
    double n = static_cast<double>(parameter_count());
    for (const auto& [index, moe] : moe_blocks()) {
      const auto elsewhere = static_cast<double>(options_.moe.experts - moe->gate_up_proj.size(0));
      n += elsewhere * 3 * static_cast<double>(options_.moe.n_embd * options_.moe.ffn_dim) -
           moe_inactive_parameters(options_.moe);
    }
    if (!options_.tie_embeddings) n -= static_cast<double>(embed_tokens_->weight.numel());
    return 6.0 * n + 12.0 * static_cast<double>(options_.n_layer * options_.n_head) *
                         static_cast<double>(options_.head_dim()) * static_cast<double>(seq_len);
  }

  at::Tensor with_auxiliary_loss(const at::Tensor& loss, double micro_steps) override {
    at::Tensor total = loss;
    for (auto& [index, moe] : moe_blocks()) {
      if (const at::Tensor auxiliary = moe->take_auxiliary_loss(); auxiliary.defined())
        total = total + auxiliary / micro_steps;
    }
    return total;
  }

  // moe_L.aux_loss, moe_L.z_loss, moe_L.load_imbalance, moe_L.dropped_fraction for each mixture
  // of experts, L its block's index in the parameter names (layers.L.mlp).
  std::vector<std::pair<std::string, double>> take_layer_measures(
      const SumOverRanks& sum_over_ranks) override {
    return take_moe_measures(moe_blocks(), sum_over_ranks);
  }

  // Hugging Face's LlamaForCausalLM, MixtralForCausalLM or Qwen3MoeForCausalLM
  // (plugins/llama/llama_interchange.h).
  std::vector<std::pair<std::string, torch::Tensor>> export_weights() const override {
    return hf_tensors_of(options_, named_parameters());
  }

  // As transformers holds them in memory, where PEFT finds them: ours with "model." in front,
  // but for the head.
  std::map<std::string, InterchangeName> interchange_names() const override {
    std::map<std::string, InterchangeName> out;
    for (const auto& item : named_parameters())
      out[item.key()] = {item.key() == "lm_head.weight" ? item.key() : "model." + item.key(),
                         false};
    return out;
  }

  void import_weights(const std::map<std::string, torch::Tensor>& weights) override {
    auto parameters = named_parameters();
    load_hf_tensors(options_, weights, parameters);
  }

  std::string interchange_config() const override { return hf_config_of(options_); }

 private:
  std::vector<std::pair<size_t, MixtureOfExperts>> moe_blocks() const {
    std::vector<std::pair<size_t, MixtureOfExperts>> out;
    for (size_t i = 0; i < blocks_->size(); ++i) {
      if (const auto& moe = blocks_->ptr<LlamaDecoderLayer>(i)->moe) out.emplace_back(i, moe);
    }
    return out;
  }

  void initialise() {
    torch::NoGradGuard no_grad;
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(options_.n_layer));
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      if (item.value().dim() < 2) continue;  // RMSNorm gains keep their ones
      const bool residual = name.find("o_proj.weight") != std::string::npos ||
                            name.find("down_proj") != std::string::npos;
      item.value().normal_(0.0, residual ? residual_std : 0.02);
    }
  }

  LlamaOptions options_;
  std::shared_ptr<TokenEmbedding> embed_tokens_;
  torch::nn::ModuleList blocks_;
  std::shared_ptr<Head> head_;
};

// Meta's rule for the SwiGLU width when ffn_dim is not given: two thirds of 4 n_embd (so the
// three matrices cost what GPT's two 4x ones do), times the multiplier, rounded up to a multiple
// of multiple_of.
int64_t swiglu_width(int64_t n_embd, double multiplier, int64_t multiple_of) {
  int64_t hidden = 2 * (4 * n_embd) / 3;
  hidden = static_cast<int64_t>(multiplier * static_cast<double>(hidden));
  return (hidden + multiple_of - 1) / multiple_of * multiple_of;
}

LlamaOptions options_from(const Params& p) {
  LlamaOptions o{
      {p.integer("n_head"), p.integer("n_kv_head"), p.integer("n_embd"), p.integer("ffn_dim"),
       p.real("norm_eps"), p.real("rope_theta"), p.real("rope_scaling_factor"),
       p.real("rope_low_freq_factor"), p.real("rope_high_freq_factor"),
       p.integer("rope_original_context"), p.flag("qk_norm"), uses_fused_kernels(p),
       p.real("dropout"), p.integer("head_dim")},
      p.integer("n_layer"),
      p.integer("block_size"),
      p.integer("vocab_size"),
      p.flag("tie_embeddings")};
  if (o.n_kv_head == 0) o.n_kv_head = o.n_head;
  if (o.ffn_dim == 0) {
    o.ffn_dim = swiglu_width(o.n_embd, p.real("ffn_dim_multiplier"), p.integer("multiple_of"));
  }
  o.moe = moe_options_from(p, o.n_embd, o.ffn_dim, o.n_layer);
  o.moe_every = p.integer("moe_every");
  if (o.head_size == 0 && (o.n_embd % o.n_head != 0 || o.head_dim() % 2 != 0)) {
    throw UserError(fmt::format(
        "model.n_embd = {} must be divisible by model.n_head = {} into an even head size: the "
        "rotary embedding turns pairs of each head's dimensions",
        o.n_embd, o.n_head));
  }
  if (o.head_size % 2 != 0) {
    throw UserError(
        fmt::format("model.head_dim = {} must be even: the rotary embedding turns "
                    "pairs of each head's dimensions",
                    o.head_size));
  }
  if (o.n_head % o.n_kv_head != 0) {
    throw UserError(fmt::format(
        "model.n_head = {} is not a multiple of model.n_kv_head = {}: each key/value head "
        "serves an equal group of query heads",
        o.n_head, o.n_kv_head));
  }
  if (o.rope_factor > 0 && o.high_freq_factor <= o.low_freq_factor) {
    throw UserError(fmt::format(
        "model.rope_high_freq_factor = {} must be above model.rope_low_freq_factor = {}",
        o.high_freq_factor, o.low_freq_factor));
  }
  return o;
}

std::vector<ParamSpec> llama_params() {
  std::vector<ParamSpec> params = moe_params();
  params.insert(
      params.begin(),
      {ParamSpec::integer("n_layer", 12, "decoder blocks").at_least(1).at_most(10000),
       ParamSpec::integer("n_head", 12, "query heads per block").at_least(1).at_most(1 << 20),
       ParamSpec::integer("n_kv_head", 0, "key/value heads (grouped-query attention); 0 = n_head")
           .at_least(0)
           .at_most(1 << 20),
       ParamSpec::integer("n_embd", 768, "width of the residual stream").at_least(2),
       ParamSpec::integer("head_dim", 0, "each attention head's width; 0 = n_embd / n_head")
           .at_least(0)
           .at_most(1 << 20)
           .added_later(),
       ParamSpec::integer("ffn_dim", 0,
                          "SwiGLU hidden width; 0 = Meta's rule from ffn_dim_multiplier and "
                          "multiple_of")
           .at_least(0),
       ParamSpec::real("ffn_dim_multiplier", 1.0, "scales 2/3 x 4 n_embd when ffn_dim = 0")
           .at_least(0.01)
           .at_most(100),
       ParamSpec::integer("multiple_of", 256, "the SwiGLU width is rounded up to a multiple of it")
           .at_least(1)
           .at_most(1 << 20),
       ParamSpec::integer("block_size", 2048, "longest sequence").at_least(1),
       ParamSpec::integer("vocab_size", 32000, "token ids the data may contain")
           .at_least(1)
           .at_most(INT32_MAX),
       ParamSpec::real("norm_eps", 1e-5, "RMSNorm epsilon").at_least(0),
       ParamSpec::real("rope_theta", 10000.0, "rotary base (Llama 3: 500000)").at_least(1),
       ParamSpec::real("rope_scaling_factor", 0.0,
                       "Llama 3 rotary frequency scaling factor (Llama 3.1: 8); 0 = none")
           .at_least(0),
       ParamSpec::real("rope_low_freq_factor", 1.0, "Llama 3 scaling: low frequency factor")
           .at_least(0.001),
       ParamSpec::real("rope_high_freq_factor", 4.0, "Llama 3 scaling: high frequency factor")
           .at_least(0.001),
       ParamSpec::integer("rope_original_context", 8192,
                          "Llama 3 scaling: the context the rotary frequencies were trained for")
           .at_least(1),
       ParamSpec::flag("tie_embeddings", false, "the output head reuses the token embedding"),
       ParamSpec::flag("qk_norm", false,
                       "RMSNorm on each head's queries and keys before the rotation (Qwen 3)"),
       ParamSpec::real("dropout", 0.0,
                       "dropout on attention probabilities and each sublayer's output (Hugging "
                       "Face's Llama has attention_dropout only; an export leaves it at 0)")
           .at_least(0)
           .at_most(0.95)});
  return with_kernel_choice(with_activation_checkpointing(std::move(params)));
}

const bool registered = ModelRegistry::add(
    {"llama", "Llama: RMSNorm, rotary positions, grouped-query attention, SwiGLU MLP, no biases",
     llama_params()},
    [](const Params& p) {
      const LlamaOptions o = options_from(p);
      std::vector<bool> checkpointed_blocks;
      for (int64_t i = 0; i < o.n_layer; ++i)
        checkpointed_blocks.push_back(checkpoints_block(p, i));
      const int64_t moe_blocks = count_moe_blocks(o.moe, o.moe_every, checkpointed_blocks);
      const double c = static_cast<double>(o.n_embd), hd = static_cast<double>(o.head_dim());
      const double heads = static_cast<double>(o.n_head), kv = static_cast<double>(o.n_kv_head);
      // Per block: q, k, v and o projections, the three SwiGLU matrices, two RMSNorm gains and
      // the QK norms' gains; then the embedding, the final norm and an untied head.
      const double per_block = c * hd * (2 * heads + 2 * kv) + 2 * c + (o.qk_norm ? 2 * hd : 0);
      const double dense_blocks = static_cast<double>(o.n_layer - moe_blocks);
      const double vocab = static_cast<double>(o.vocab_size);
      auto plan = std::make_shared<ModelPlan>();
      plan->description = fmt::format(
          "a llama with n_layer {}, n_embd {}, ffn_dim {}, block_size {} and vocab_size {}",
          o.n_layer, o.n_embd, o.ffn_dim, o.block_size, o.vocab_size);
      plan->parameters = vocab * c * (o.tie_embeddings ? 1 : 2) + c +
                         static_cast<double>(o.n_layer) * per_block +
                         dense_blocks * 3 * c * static_cast<double>(o.ffn_dim) +
                         static_cast<double>(moe_blocks) * moe_parameters(o.moe);
      plan->inactive_parameters = static_cast<double>(moe_blocks) * moe_inactive_parameters(o.moe);
      if (moe_blocks > 0) {
        plan->description += fmt::format(", {} of its blocks mixtures of {} experts, top {}",
                                         moe_blocks, o.moe.experts, o.moe.top_k);
      }
      plan->auxiliary_losses = moe_blocks > 0;
      plan->buffers = static_cast<double>(o.n_layer) * hd / 2 +  // each block's inv_freq
                      static_cast<double>(moe_blocks) * moe_buffers(o.moe);
      plan->vocab_size = o.vocab_size;
      plan->context_length = o.block_size;
      plan->layers = o.n_layer + 2;
      plan->dropout = o.dropout;
      plan->build = [o, checkpointed_blocks] {
        return std::make_shared<Llama>(o, checkpointed_blocks);
      };
      plan->check_tensor_parallel = [o](int64_t tp) {
        refuse_tensor_parallel_experts(o.moe);
        for (const auto& [key, value] :
             {std::pair{"n_head", o.n_head}, std::pair{"n_kv_head", o.n_kv_head},
              std::pair{"ffn_dim", o.ffn_dim}}) {
          if (value % tp != 0) {
            throw UserError(
                fmt::format("model.{} = {} does not divide over parallel.tp = {}: "
                            "each rank computes an equal share of them",
                            key, value, tp));
          }
        }
      };
      return plan;
    });

}  // namespace
}  // namespace kiln
