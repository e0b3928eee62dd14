// model "gpt": the GPT-2 architecture. Learned position embeddings, pre-LayerNorm blocks of
// causal self-attention and a 4x tanh-GELU MLP, a final LayerNorm, and an output head that
// shares the token embedding's weights. Initialised as GPT-2: N(0, 0.02), with the projections
// that write into the residual stream scaled by 1/sqrt(2 n_layer) so that its variance does not
// grow with depth.
#include <cmath>
#include <tuple>

#include <fmt/format.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <nlohmann/json.hpp>

#include "core/api/kernel_choice.h"
#include "core/api/model.h"
#include "core/kernels/fused_gelu.h"
#include "core/kernels/fused_layer_norm.h"
#include "core/layers/activation_checkpoint.h"
#include "core/layers/document_positions.h"
#include "core/layers/dropout.h"
#include "core/layers/fused_attention.h"
#include "core/layers/interchange_weights.h"
#include "core/layers/linear.h"
#include "core/util/error.h"

namespace kiln {
namespace {

struct GptOptions {
  int64_t n_layer, n_head, n_embd, block_size, vocab_size, padded_vocab;
  double dropout, norm_eps;  // norm_eps: the LayerNorms' epsilon
  bool bias;
  bool fused_kernels;  // model.kernels = "fused": core/kernels/fused_*.h where they apply
};

torch::nn::Linear linear_layer(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

class Embedding : public Layer {
 public:
  explicit Embedding(const GptOptions& o)
      : wte(register_module("wte", torch::nn::Embedding(o.padded_vocab, o.n_embd))),
        wpe(register_module("wpe", torch::nn::Embedding(o.block_size, o.n_embd))),
        drop_{o.dropout, 0} {}

  torch::Tensor forward(const torch::Tensor& tokens) override {
    auto positions = token_positions(tokens.size(1), tokens.options());
    return drop_(wte(tokens) + wpe(positions), DropoutPlace::kEmbedding, is_training());
  }

  torch::nn::Embedding wte, wpe;

 private:
  LayerDropout drop_;
};

class Block : public Layer {
 public:
  // `layer`: the block's index in the model's layers (1 = the first block), which numbers its
  // dropout sites.
  Block(const GptOptions& o, int64_t layer, bool checkpoint)
      : checkpoint_(checkpoint),
        fused_(o.fused_kernels),
        n_head_(o.n_head),
        drop_{o.dropout, layer},
        ln_1(register_module("ln_1", LayerNorm(o.n_embd, o.bias, o.norm_eps))),
        c_attn(register_module("c_attn", linear_layer(o.n_embd, 3 * o.n_embd, o.bias))),
        attn_proj(register_module("attn_proj", linear_layer(o.n_embd, o.n_embd, o.bias))),
        ln_2(register_module("ln_2", LayerNorm(o.n_embd, o.bias, o.norm_eps))),
        c_fc(register_module("c_fc", linear_layer(o.n_embd, 4 * o.n_embd, o.bias))),
        mlp_proj(register_module("mlp_proj", linear_layer(4 * o.n_embd, o.n_embd, o.bias))) {}

  torch::Tensor forward(const torch::Tensor& x) override {
    if (!checkpoint_) return compute(x);
    return checkpointed([this](const torch::Tensor& in) { return compute(in); }, x);
  }

  // Keeps this rank's heads and MLP units: c_attn and c_fc are column-parallel (rows: q, k and v
  // each cut by heads), attn_proj and mlp_proj row-parallel (columns); `name` is the block's
  // prefix in the model's parameter names.
  std::vector<ParameterSplit> split(const TensorParallelGroup& group, const std::string& name) {
    tp_ = group;
    n_head_ /= group.size;
    std::vector<ParameterSplit> splits = {{name + "c_attn.weight", 0, 3},
                                          {name + "attn_proj.weight", 1, 1},
                                          {name + "c_fc.weight", 0, 1},
                                          {name + "mlp_proj.weight", 1, 1}};
    if (c_attn->bias.defined()) {
      splits.push_back({name + "c_attn.bias", 0, 3});
      splits.push_back({name + "c_fc.bias", 0, 1});
    }
    return splits;
  }

  bool checkpoint_;
  bool fused_;      // model.kernels = "fused"
  int64_t n_head_;  // on this rank
  LayerDropout drop_;
  LayerNorm ln_1;
  torch::nn::Linear c_attn, attn_proj;
  LayerNorm ln_2;
  torch::nn::Linear c_fc, mlp_proj;

 private:
  torch::Tensor compute(const torch::Tensor& x) {
    auto attended = drop_(attention(ln_1(x)), DropoutPlace::kAttentionOutput, is_training());
    auto [h, normed] = add_layer_norm(x, attended, ln_2->weight, ln_2->bias, ln_2->eps(), fused_);
    auto mlp = row_parallel(mlp_proj, gelu_tanh(dense(c_fc, tp_.enter(normed)), fused_));
    return h + drop_(mlp, DropoutPlace::kMlpOutput, is_training());
  }

  // This rank's heads are heads [rank * n_head_, (rank + 1) * n_head_) of the model's.
  torch::Tensor attention(const torch::Tensor& x) {
    const SliceOf heads{1, tp_.rank * n_head_, tp_.size * n_head_};
    return row_parallel(attn_proj, causal_self_attention(
                                       dense(c_attn, tp_.enter(x)), n_head_, drop_.p, is_training(),
                                       fused_, drop_.site(DropoutPlace::kAttentionWeights), heads));
  }

  // `layer` on this rank's slice of its input, the partial outputs summed over the group before
  // the (whole) bias is added once.
  torch::Tensor row_parallel(torch::nn::Linear& layer, const torch::Tensor& x) {
    if (tp_.size == 1) return dense(layer, x);
    auto y = tp_.leave(linear(x, layer->weight, at::Tensor()));
    return layer->bias.defined() ? y + layer->bias : y;
  }

  // The layer through Kiln's linear (core/layers/linear.h), which adds an adapter's low-rank
  // update.
  torch::Tensor dense(torch::nn::Linear& layer, const torch::Tensor& x) {
    return linear(x, layer->weight, layer->bias);
  }

  TensorParallelGroup tp_;
};

class Head : public Layer {
 public:
  Head(const GptOptions& o, std::shared_ptr<Embedding> embedding)
      : ln_f(register_module("ln_f", LayerNorm(o.n_embd, o.bias, o.norm_eps))),
        embedding_(std::move(embedding)) {}

  // Tied weights: the token embedding matrix doubles as the output projection. It is registered
  // under the embedding only, so it is counted, saved and updated once.
  torch::Tensor forward(const torch::Tensor& x) override {
    return linear(ln_f(x), embedding_->wte->weight, at::Tensor());
  }
  std::vector<torch::Tensor> borrowed_parameters() const override {
    return {embedding_->wte->weight};
  }

  LayerNorm ln_f;

 private:
  std::shared_ptr<Embedding> embedding_;
};

class Gpt : public Model {
 public:
  Gpt(const GptOptions& o, const std::vector<bool>& checkpointed_blocks) : options_(o) {
    embedding_ = register_module("embedding", std::make_shared<Embedding>(o));
    blocks_ = register_module("h", torch::nn::ModuleList());
    for (int64_t i = 0; i < o.n_layer; ++i)
      blocks_->push_back(std::make_shared<Block>(o, i + 1, checkpointed_blocks[i]));
    head_ = register_module("head", std::make_shared<Head>(o, embedding_));
    append_layer(embedding_);
    for (const auto& block : *blocks_)
      append_layer(std::dynamic_pointer_cast<Layer>(block));
    append_layer(head_);
    initialise();
  }

  int64_t vocab_size() const override { return options_.vocab_size; }

  // Hugging Face GPT-2 names. HF's Conv1D stores weights as [in, out], the transpose of a
  // Linear's [out, in]; the embedding goes out without its padding rows; the head is tied, so it
  // has no tensor of its own.
  std::vector<std::pair<std::string, torch::Tensor>> export_weights() const override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& [name, tensor, conv1d] : interchange()) {
      auto t = tensor.detach();
      if (conv1d) t = t.t();
      if (name == "transformer.wte.weight") t = t.narrow(0, 0, options_.vocab_size);
      out.emplace_back(name, t.contiguous());
    }
    return out;
  }

  std::map<std::string, InterchangeName> interchange_names() const override {
    std::map<const void*, std::string> registered;
    for (const auto& item : named_parameters())
      registered[item.value().unsafeGetTensorImpl()] = item.key();
    std::map<std::string, InterchangeName> out;
    for (const auto& [name, tensor, conv1d] : interchange())
      out[registered.at(tensor.unsafeGetTensorImpl())] = {name, conv1d};
    return out;
  }

  // Either spelling of the names: GPT2LMHeadModel's ("transformer.h.0.attn.c_attn.weight") or
  // GPT2Model's, as the gpt2 checkpoints on the Hub store them ("h.0.attn.c_attn.weight").
  void import_weights(const std::map<std::string, torch::Tensor>& given) override {
    std::map<std::string, torch::Tensor> weights;
    for (const auto& [name, tensor] : given)
      weights[with_prefix(name)] = tensor;
    std::vector<InterchangeTensor> needed;
    for (const auto& [name, tensor, conv1d] : interchange()) {
      std::vector<int64_t> shape = tensor.sizes().vec();
      if (conv1d) std::swap(shape[0], shape[1]);
      if (name == "transformer.wte.weight") shape[0] = options_.vocab_size;
      needed.push_back({name, shape});
    }
    // HF checkpoints also carry the causal-mask buffers and, untied, the head.
    check_interchange_weights(weights, needed, "gpt", [](const std::string& name) {
      auto ends_with = [&](const std::string& tail) {
        return name.size() >= tail.size() &&
               name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
      };
      return ends_with(".attn.bias") || ends_with(".attn.masked_bias") || name == "lm_head.weight";
    });
    torch::NoGradGuard no_grad;
    for (const auto& [name, tensor, conv1d] : interchange()) {
      auto source = weights.at(name).to(tensor.dtype());
      if (conv1d) source = source.t();
      auto target = tensor;
      if (name == "transformer.wte.weight") target = target.narrow(0, 0, options_.vocab_size);
      target.copy_(source);
    }
  }
  int64_t context_length() const override { return options_.block_size; }

  // Heads and MLP units split; embeddings, LayerNorms, the tied head and row-parallel biases
  // replicated (a vocabulary-parallel embedding and head would save their memory too; not done).
  std::vector<ParameterSplit> split_for_tensor_parallel(const TensorParallelGroup& group) override {
    std::vector<ParameterSplit> splits;
    for (size_t i = 0; i < blocks_->size(); ++i) {
      for (auto& split : blocks_->ptr<Block>(i)->split(group, fmt::format("h.{}.", i)))
        splits.push_back(std::move(split));
    }
    keep_slices(*this, splits, group);
    return splits;
  }

  // GPT2LMHeadModel's config.json.
  std::string interchange_config() const override {
    return nlohmann::json{{"architectures", nlohmann::json::array({"GPT2LMHeadModel"})},
                          {"model_type", "gpt2"},
                          {"n_embd", options_.n_embd},
                          {"n_layer", options_.n_layer},
                          {"n_head", options_.n_head},
                          {"n_positions", options_.block_size},
                          {"vocab_size", options_.vocab_size},
                          {"layer_norm_epsilon", options_.norm_eps}}
        .dump();
  }

  // 6N for the matmuls' weights plus 12 L H Q T for attention scores and their use (PaLM
  // appendix B); the position embedding does no matmul work and is left out of N.
  double flops_per_token(int64_t seq_len) const override {
    const double n = static_cast<double>(parameter_count() - embedding_->wpe->weight.numel());
    const double head_dim = static_cast<double>(options_.n_embd / options_.n_head);
    return 6.0 * n + 12.0 * static_cast<double>(options_.n_layer * options_.n_head) * head_dim *
                         static_cast<double>(seq_len);
  }

 private:
  static std::string with_prefix(const std::string& name) {
    for (const char* bare : {"h.", "wte.", "wpe.", "ln_f."}) {
      if (name.rfind(bare, 0) == 0) return "transformer." + name;
    }
    return name;
  }

  // (HF name, our tensor, stored transposed as Conv1D)
  std::vector<std::tuple<std::string, torch::Tensor, bool>> interchange() const {
    std::vector<std::tuple<std::string, torch::Tensor, bool>> out;
    auto add = [&](const std::string& name, const torch::Tensor& t, bool conv1d) {
      if (t.defined()) out.emplace_back(name, t, conv1d);
    };
    add("transformer.wte.weight", embedding_->wte->weight, false);
    add("transformer.wpe.weight", embedding_->wpe->weight, false);
    for (size_t i = 0; i < blocks_->size(); ++i) {
      const auto& b = *blocks_->ptr<Block>(i);
      const std::string h = fmt::format("transformer.h.{}.", i);
      add(h + "ln_1.weight", b.ln_1->weight, false);
      add(h + "ln_1.bias", b.ln_1->bias, false);
      add(h + "attn.c_attn.weight", b.c_attn->weight, true);
      add(h + "attn.c_attn.bias", b.c_attn->bias, false);
      add(h + "attn.c_proj.weight", b.attn_proj->weight, true);
      add(h + "attn.c_proj.bias", b.attn_proj->bias, false);
      add(h + "ln_2.weight", b.ln_2->weight, false);
      add(h + "ln_2.bias", b.ln_2->bias, false);
      add(h + "mlp.c_fc.weight", b.c_fc->weight, true);
      add(h + "mlp.c_fc.bias", b.c_fc->bias, false);
      add(h + "mlp.c_proj.weight", b.mlp_proj->weight, true);
      add(h + "mlp.c_proj.bias", b.mlp_proj->bias, false);
    }
    add("transformer.ln_f.weight", head_->ln_f->weight, false);
    add("transformer.ln_f.bias", head_->ln_f->bias, false);
    return out;
  }

  void initialise() {
    torch::NoGradGuard no_grad;
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(options_.n_layer));
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      torch::Tensor& p = item.value();
      if (name.find("ln_") != std::string::npos) continue;  // LayerNorm keeps ones and zeros
      if (p.dim() == 1) {
        p.zero_();
      } else {
        const bool residual = name.find("attn_proj.weight") != std::string::npos ||
                              name.find("mlp_proj.weight") != std::string::npos;
        p.normal_(0.0, residual ? residual_std : 0.02);
      }
    }
  }

  GptOptions options_;
  std::shared_ptr<Embedding> embedding_;
  torch::nn::ModuleList blocks_;
  std::shared_ptr<Head> head_;
};

GptOptions options_from(const Params& p) {
  GptOptions o{p.integer("n_layer"),    p.integer("n_head"),     p.integer("n_embd"),
               p.integer("block_size"), p.integer("vocab_size"), 0,
               p.real("dropout"),       p.real("norm_eps"),      p.flag("bias"),
               uses_fused_kernels(p)};
  const int64_t multiple = p.integer("vocab_multiple");
  o.padded_vocab = (o.vocab_size + multiple - 1) / multiple * multiple;
  if (o.n_embd % o.n_head != 0) {
    throw UserError(
        fmt::format("model.n_embd = {} is not divisible by model.n_head = {}: each "
                    "head gets n_embd / n_head dimensions",
                    o.n_embd, o.n_head));
  }
  return o;
}

const bool registered = ModelRegistry::add(
    {"gpt",
     "GPT-2: learned positions, pre-LayerNorm blocks, causal attention, tanh-GELU MLP, tied head",
     with_kernel_choice(with_activation_checkpointing(
         {ParamSpec::integer("n_layer", 12, "Transformer blocks").at_least(1).at_most(10000),
          ParamSpec::integer("n_head", 12, "attention heads per block")
              .at_least(1)
              .at_most(1 << 20),
          ParamSpec::integer("n_embd", 768, "width of the residual stream").at_least(1),
          ParamSpec::integer("block_size", 1024, "longest sequence (position embeddings)")
              .at_least(1),
          ParamSpec::integer("vocab_size", 50257, "token ids the data may contain")
              .at_least(1)
              .at_most(INT32_MAX),
          ParamSpec::integer("vocab_multiple", 1,
                             "pad the embedding rows to a multiple of this (64: 50257 -> 50304) "
                             "for faster matmuls; padded ids are never targets")
              .at_least(1)
              .at_most(1 << 20),
          ParamSpec::real("dropout", 0.0, "dropout on embeddings, attention and residuals")
              .at_least(0)
              .at_most(0.95),
          ParamSpec::flag("bias", true, "biases in Linear and LayerNorm layers"),
          ParamSpec::real("norm_eps", 1e-5, "LayerNorm epsilon (GPT-2's layer_norm_epsilon)")
              .at_least(0)
              .added_later()}))},
    [](const Params& p) {
      const GptOptions o = options_from(p);
      std::vector<bool> checkpointed_blocks;
      for (int64_t i = 0; i < o.n_layer; ++i)
        checkpointed_blocks.push_back(checkpoints_block(p, i));
      const double c = static_cast<double>(o.n_embd);
      // Per block: qkv, attention projection and MLP weights (12 c^2), their biases (9 c) and two
      // LayerNorms (2 c each, c without biases); the head's LayerNorm; the head reuses wte.
      const double per_block = 12 * c * c + (o.bias ? 13 * c : 2 * c);
      auto plan = std::make_shared<ModelPlan>();
      plan->description =
          fmt::format("a gpt with n_layer {}, n_embd {}, block_size {} and {} vocabulary rows",
                      o.n_layer, o.n_embd, o.block_size, o.padded_vocab);
      plan->parameters =
          (static_cast<double>(o.padded_vocab) + static_cast<double>(o.block_size)) * c +
          static_cast<double>(o.n_layer) * per_block + (o.bias ? 2 * c : c);
      plan->vocab_size = o.vocab_size;
      plan->context_length = o.block_size;
      plan->layers = o.n_layer + 2;
      plan->dropout = o.dropout;
      plan->build = [o, checkpointed_blocks] {
        return std::make_shared<Gpt>(o, checkpointed_blocks);
      };
      plan->check_tensor_parallel = [n_head = o.n_head](int64_t tp) {
        if (n_head % tp != 0) {
          throw UserError(fmt::format(
              "model.n_head = {} does not divide over parallel.tp = {}: each rank computes "
              "n_head / tp whole heads",
              n_head, tp));
        }
      };
      return plan;
    });

}  // namespace
}  // namespace kiln
