// model "llama": the Llama architecture (Llama 2/3, and the SmolLM / Mistral-style models that
// share its block). Token embedding without positions; pre-RMSNorm blocks of grouped-query causal
// attention with rotary position embeddings and a SwiGLU MLP; a final RMSNorm and an output head,
// optionally tied to the embedding. No biases anywhere.
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
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <nlohmann/json.hpp>

#include "core/api/activation_checkpoint.h"
#include "core/api/dropout.h"
#include "core/api/fused_attention.h"
#include "core/api/fused_rms_norm.h"
#include "core/api/kernel_choice.h"
#include "core/api/model.h"
#include "core/api/onednn_linear.h"
#include "core/api/rotary.h"
#include "core/util/error.h"

namespace kiln {
namespace {

struct LlamaOptions {
  int64_t n_layer, n_head, n_kv_head, n_embd, ffn_dim, block_size, vocab_size;
  double norm_eps, rope_theta;
  // Llama 3's rotary frequency scaling; factor 0 = none.
  double rope_factor, low_freq_factor, high_freq_factor;
  int64_t rope_original_context;
  bool tie_embeddings, qk_norm;
  // model.kernels = "fused": Kiln's RMSNorm and attention, oneDNN's linears
  bool fused_kernels = false;
  double dropout = 0;  // on the attention probabilities and each sublayer's output
  int64_t head_dim() const { return n_embd / n_head; }
};

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, const LlamaOptions& o) : eps_(o.norm_eps), fused_(o.fused_kernels) {
    weight = register_parameter("weight", torch::ones({dim}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return normalise(x, weight); }
  // In float32 whatever the input, as HF's LlamaRMSNorm, then back to the input's type, times
  // `gain` (the weight, or what the caller made of it): core/api/fused_rms_norm.h.
  torch::Tensor normalise(const torch::Tensor& x, const torch::Tensor& gain) {
    return rms_norm(x, gain, eps_, fused_);
  }
  torch::Tensor weight;

 private:
  double eps_;
  bool fused_;
};
TORCH_MODULE(RmsNorm);

torch::nn::Linear linear_layer(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

// `layer` on x, on oneDNN's GEMMs with model.kernels = "fused" (core/api/onednn_linear.h).
torch::Tensor project(const torch::nn::Linear& layer, const torch::Tensor& x, bool fused) {
  return linear(x, layer->weight, layer->bias, fused);
}

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(const LlamaOptions& o, int64_t layer)
      : drop_{o.dropout, layer},
        fused_(o.fused_kernels),
        n_head_(o.n_head),
        n_kv_head_(o.n_kv_head),
        head_dim_(o.head_dim()),
        q_proj(register_module("q_proj", linear_layer(o.n_embd, o.n_head * o.head_dim()))),
        k_proj(register_module("k_proj", linear_layer(o.n_embd, o.n_kv_head * o.head_dim()))),
        v_proj(register_module("v_proj", linear_layer(o.n_embd, o.n_kv_head * o.head_dim()))),
        o_proj(register_module("o_proj", linear_layer(o.n_head * o.head_dim(), o.n_embd))) {
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

  torch::Tensor forward(const torch::Tensor& input) {
    const auto x = tp.enter(input);
    const int64_t b = x.size(0), t = x.size(1);
    auto heads = [&](const torch::Tensor& m, int64_t n) { return m.view({b, t, n, head_dim_}); };
    auto q = project(q_proj, x, fused_);
    auto k = project(k_proj, x, fused_);
    if (q_norm) {
      // Replicated gains applied to this rank's heads only: their gradients are partial sums,
      // which enter adds up over the group in backward.
      q = q_norm->normalise(heads(q, n_head_), tp.enter(q_norm->weight)).reshape({b, t, -1});
      k = k_norm->normalise(heads(k, n_kv_head_), tp.enter(k_norm->weight)).reshape({b, t, -1});
    }
    // This rank's heads are heads [rank * n_head_, (rank + 1) * n_head_) of the model's.
    const SliceOf mine{1, tp.rank * n_head_, tp.size * n_head_};
    auto y = rotary_self_attention(q, k, project(v_proj, x, fused_), n_head_, inv_freq, drop_.p,
                                   is_training(), fused_,
                                   drop_.site(DropoutPlace::kAttentionWeights), mine);
    return tp.leave(project(o_proj, y, fused_));
  }

  // This rank's query heads and the key/value heads they read (the rank's query heads are whole
  // groups): q, k and v column-parallel by heads, o_proj row-parallel.
  std::vector<ParameterSplit> split(const TensorParallelGroup& group, const std::string& name) {
    tp = group;
    n_head_ /= group.size;
    n_kv_head_ /= group.size;
    return {{name + "q_proj.weight", 0, 1},
            {name + "k_proj.weight", 0, 1},
            {name + "v_proj.weight", 0, 1},
            {name + "o_proj.weight", 1, 1}};
  }

  LayerDropout drop_;  // the block's, numbered by its index in the model's layers
  bool fused_;         // model.kernels = "fused"
  int64_t n_head_, n_kv_head_, head_dim_;  // heads on this rank
  torch::nn::Linear q_proj, k_proj, v_proj, o_proj;
  RmsNorm q_norm{nullptr}, k_norm{nullptr};
  torch::Tensor inv_freq;
  TensorParallelGroup tp;
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const LlamaOptions& o)
      : fused_(o.fused_kernels),
        gate_proj(register_module("gate_proj", linear_layer(o.n_embd, o.ffn_dim))),
        up_proj(register_module("up_proj", linear_layer(o.n_embd, o.ffn_dim))),
        down_proj(register_module("down_proj", linear_layer(o.ffn_dim, o.n_embd))) {}
  torch::Tensor forward(const torch::Tensor& input) {
    const auto x = tp.enter(input);
    const auto hidden = torch::silu(project(gate_proj, x, fused_)) * project(up_proj, x, fused_);
    return tp.leave(project(down_proj, hidden, fused_));
  }
  // This rank's hidden units: gate and up column-parallel, down row-parallel.
  std::vector<ParameterSplit> split(const TensorParallelGroup& group, const std::string& name) {
    tp = group;
    return {{name + "gate_proj.weight", 0, 1},
            {name + "up_proj.weight", 0, 1},
            {name + "down_proj.weight", 1, 1}};
  }
  bool fused_;  // model.kernels = "fused"
  torch::nn::Linear gate_proj, up_proj, down_proj;
  TensorParallelGroup tp;
};
TORCH_MODULE(Mlp);

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

class DecoderLayer : public Layer {
 public:
  // `layer`: the block's index in the model's layers (1 = the first).
  DecoderLayer(const LlamaOptions& o, int64_t layer, bool checkpoint)
      : checkpoint_(checkpoint),
        drop_{o.dropout, layer},
        self_attn(register_module("self_attn", Attention(o, layer))),
        mlp(register_module("mlp", Mlp(o))),
        input_layernorm(register_module("input_layernorm", RmsNorm(o.n_embd, o))),
        post_attention_layernorm(
            register_module("post_attention_layernorm", RmsNorm(o.n_embd, o))) {}

  torch::Tensor forward(const torch::Tensor& x) override {
    if (!checkpoint_) return compute(x);
    return checkpointed([this](const torch::Tensor& in) { return compute(in); }, x);
  }

  bool checkpoint_;
  LayerDropout drop_;
  Attention self_attn;
  Mlp mlp;
  RmsNorm input_layernorm, post_attention_layernorm;

 private:
  torch::Tensor compute(const torch::Tensor& x) {
    auto h =
        x + drop_(self_attn(input_layernorm(x)), DropoutPlace::kAttentionOutput, is_training());
    return h + drop_(mlp(post_attention_layernorm(h)), DropoutPlace::kMlpOutput, is_training());
  }
};

// The final norm and the output head. Registered in the model under its top-level names (norm,
// lm_head) rather than as one submodule, so that the names stay HF's; registered here too, so
// that this layer's parameters() are its own for the pipeline strategy.
class Head : public Layer {
 public:
  Head(RmsNorm norm_module, torch::nn::Linear lm_head_module,
       std::shared_ptr<TokenEmbedding> embedding, bool fused)
      : norm(register_module("norm", std::move(norm_module))),
        embedding_(std::move(embedding)),
        fused_(fused) {
    if (lm_head_module) lm_head = register_module("lm_head", std::move(lm_head_module));
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    if (lm_head) return project(lm_head, norm(x), fused_);
    return linear(norm(x), embedding_->weight, {}, fused_);  // tied
  }
  std::vector<torch::Tensor> borrowed_parameters() const override {
    if (lm_head) return {};
    return {embedding_->weight};
  }

  RmsNorm norm;
  torch::nn::Linear lm_head{nullptr};

 private:
  std::shared_ptr<TokenEmbedding> embedding_;
  bool fused_;  // model.kernels = "fused"
};

class Llama : public Model {
 public:
  Llama(const LlamaOptions& o, const std::vector<bool>& checkpointed_blocks) : options_(o) {
    embed_tokens_ = register_module("embed_tokens", std::make_shared<TokenEmbedding>(o));
    blocks_ = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < o.n_layer; ++i)
      blocks_->push_back(std::make_shared<DecoderLayer>(o, i + 1, checkpointed_blocks[i]));
    auto norm = register_module("norm", RmsNorm(o.n_embd, o));
    torch::nn::Linear lm_head{nullptr};
    if (!o.tie_embeddings)
      lm_head = register_module("lm_head", linear_layer(o.n_embd, o.vocab_size));
    head_ = std::make_shared<Head>(norm, lm_head, embed_tokens_, o.fused_kernels);
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
    std::vector<ParameterSplit> splits;
    for (size_t i = 0; i < blocks_->size(); ++i) {
      auto& block = *blocks_->ptr<DecoderLayer>(i);
      const std::string name = fmt::format("layers.{}.", i);
      for (auto& split : block.self_attn->split(group, name + "self_attn."))
        splits.push_back(std::move(split));
      for (auto& split : block.mlp->split(group, name + "mlp."))
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
    double n = static_cast<double>(parameter_count());
    if (!options_.tie_embeddings) n -= static_cast<double>(embed_tokens_->weight.numel());
    return 6.0 * n + 12.0 * static_cast<double>(options_.n_layer * options_.n_head) *
                         static_cast<double>(options_.head_dim()) * static_cast<double>(seq_len);
  }

  // LlamaForCausalLM's names: ours with "model." in front, but for the head.
  std::vector<std::pair<std::string, torch::Tensor>> export_weights() const override {
    if (options_.qk_norm) {
      throw UserError(
          "a llama with model.qk_norm = true has no LlamaForCausalLM form (Hugging Face's "
          "Llama has no q_norm/k_norm): export a llama without it");
    }
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& item : named_parameters())
      out.emplace_back(interchange_name(item.key()), item.value().detach().contiguous());
    return out;
  }

  void import_weights(const std::map<std::string, torch::Tensor>& weights) override {
    std::vector<std::string> problems;
    std::set<std::string> known;
    for (const auto& item : named_parameters()) {
      const std::string name = interchange_name(item.key());
      known.insert(name);
      auto it = weights.find(name);
      if (it == weights.end()) {
        problems.push_back("missing " + name);
      } else if (it->second.sizes() != item.value().sizes()) {
        problems.push_back(fmt::format("{} is [{}] but the model needs [{}]", name,
                                       fmt::join(it->second.sizes().vec(), ", "),
                                       fmt::join(item.value().sizes().vec(), ", ")));
      }
    }
    for (const auto& [name, _] : weights) {
      // Tied checkpoints may still carry the head (a copy of the embedding); older ones carry
      // the rotary frequencies, which follow from the config.
      const bool ignorable = (options_.tie_embeddings && name == "lm_head.weight") ||
                             name.find(".rotary_emb.inv_freq") != std::string::npos;
      if (!known.count(name) && !ignorable) problems.push_back("unexpected " + name);
    }
    if (!problems.empty()) {
      throw UserError(fmt::format("the weights do not fit this llama ({} problem(s)): {}",
                                  problems.size(), fmt::join(problems, "; ")));
    }
    torch::NoGradGuard no_grad;
    for (auto& item : named_parameters())
      item.value().copy_(weights.at(interchange_name(item.key())).to(item.value().dtype()));
  }

  std::string interchange_config() const override {
    const LlamaOptions& o = options_;
    nlohmann::json rope_scaling = nullptr;
    if (o.rope_factor > 0) {
      rope_scaling = {{"rope_type", "llama3"},
                      {"factor", o.rope_factor},
                      {"low_freq_factor", o.low_freq_factor},
                      {"high_freq_factor", o.high_freq_factor},
                      {"original_max_position_embeddings", o.rope_original_context}};
    }
    return nlohmann::json{{"architectures", nlohmann::json::array({"LlamaForCausalLM"})},
                          {"model_type", "llama"},
                          {"hidden_size", o.n_embd},
                          {"intermediate_size", o.ffn_dim},
                          {"num_attention_heads", o.n_head},
                          {"num_key_value_heads", o.n_kv_head},
                          {"num_hidden_layers", o.n_layer},
                          {"rms_norm_eps", o.norm_eps},
                          {"rope_theta", o.rope_theta},
                          {"rope_scaling", rope_scaling},
                          {"max_position_embeddings", o.block_size},
                          {"vocab_size", o.vocab_size},
                          {"tie_word_embeddings", o.tie_embeddings},
                          {"attention_bias", false},
                          {"mlp_bias", false},
                          {"hidden_act", "silu"},
                          {"torch_dtype", "float32"}}
        .dump();
  }

 private:
  static std::string interchange_name(const std::string& name) {
    return name == "lm_head.weight" ? name : "model." + name;
  }

  void initialise() {
    torch::NoGradGuard no_grad;
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(options_.n_layer));
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      if (item.value().dim() < 2) continue;  // RMSNorm gains keep their ones
      const bool residual = name.find("o_proj.weight") != std::string::npos ||
                            name.find("down_proj.weight") != std::string::npos;
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
  LlamaOptions o{p.integer("n_layer"),
                 p.integer("n_head"),
                 p.integer("n_kv_head"),
                 p.integer("n_embd"),
                 p.integer("ffn_dim"),
                 p.integer("block_size"),
                 p.integer("vocab_size"),
                 p.real("norm_eps"),
                 p.real("rope_theta"),
                 p.real("rope_scaling_factor"),
                 p.real("rope_low_freq_factor"),
                 p.real("rope_high_freq_factor"),
                 p.integer("rope_original_context"),
                 p.flag("tie_embeddings"),
                 p.flag("qk_norm")};
  o.dropout = p.real("dropout");
  o.fused_kernels = uses_fused_kernels(p);
  if (o.n_kv_head == 0) o.n_kv_head = o.n_head;
  if (o.ffn_dim == 0) {
    o.ffn_dim = swiglu_width(o.n_embd, p.real("ffn_dim_multiplier"), p.integer("multiple_of"));
  }
  if (o.n_embd % o.n_head != 0 || o.head_dim() % 2 != 0) {
    throw UserError(fmt::format(
        "model.n_embd = {} must be divisible by model.n_head = {} into an even head size: the "
        "rotary embedding turns pairs of each head's dimensions",
        o.n_embd, o.n_head));
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
  return with_kernel_choice(with_activation_checkpointing(
      {ParamSpec::integer("n_layer", 12, "decoder blocks").at_least(1).at_most(10000),
       ParamSpec::integer("n_head", 12, "query heads per block").at_least(1).at_most(1 << 20),
       ParamSpec::integer("n_kv_head", 0, "key/value heads (grouped-query attention); 0 = n_head")
           .at_least(0)
           .at_most(1 << 20),
       ParamSpec::integer("n_embd", 768, "width of the residual stream").at_least(2),
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
           .at_most(0.95)}));
}

const bool registered = ModelRegistry::add(
    {"llama", "Llama: RMSNorm, rotary positions, grouped-query attention, SwiGLU MLP, no biases",
     llama_params()},
    [](const Params& p) {
      const LlamaOptions o = options_from(p);
      std::vector<bool> checkpointed_blocks;
      for (int64_t i = 0; i < o.n_layer; ++i)
        checkpointed_blocks.push_back(checkpoints_block(p, i));
      const double c = static_cast<double>(o.n_embd), hd = static_cast<double>(o.head_dim());
      const double heads = static_cast<double>(o.n_head), kv = static_cast<double>(o.n_kv_head);
      // Per block: q, k, v and o projections, the three SwiGLU matrices, two RMSNorm gains and
      // the QK norms' gains; then the embedding, the final norm and an untied head.
      const double per_block = c * hd * (2 * heads + 2 * kv) +
                               3 * c * static_cast<double>(o.ffn_dim) + 2 * c +
                               (o.qk_norm ? 2 * hd : 0);
      const double vocab = static_cast<double>(o.vocab_size);
      auto plan = std::make_shared<ModelPlan>();
      plan->description = fmt::format(
          "a llama with n_layer {}, n_embd {}, ffn_dim {}, block_size {} and vocab_size {}",
          o.n_layer, o.n_embd, o.ffn_dim, o.block_size, o.vocab_size);
      plan->parameters =
          vocab * c * (o.tie_embeddings ? 1 : 2) + c + static_cast<double>(o.n_layer) * per_block;
      plan->buffers = static_cast<double>(o.n_layer) * hd / 2;  // each block's inv_freq
      plan->vocab_size = o.vocab_size;
      plan->context_length = o.block_size;
      plan->layers = o.n_layer + 2;
      plan->dropout = o.dropout;
      plan->build = [o, checkpointed_blocks] {
        return std::make_shared<Llama>(o, checkpointed_blocks);
      };
      plan->check_tensor_parallel = [o](int64_t tp) {
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
