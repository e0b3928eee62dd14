// model "transformer_lm": the Transformer language model of PyTorch's word-language-model
// tutorial (the seed recipe trained with pipeline parallelism): a token embedding scaled by
// sqrt(d_model), sinusoidal positional encoding, a stack of post-LayerNorm Transformer encoder
// layers (ReLU feed-forward) under a causal mask, and a linear decoder to the vocabulary.
// Initialised as the tutorial: embedding and decoder weights U(-0.1, 0.1), decoder bias 0.
#include <cmath>

#include <fmt/format.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "core/api/kernel_choice.h"
#include "core/api/model.h"
#include "core/layers/activation_checkpoint.h"
#include "core/layers/document_positions.h"
#include "core/layers/dropout.h"
#include "core/layers/linear.h"
#include "core/util/error.h"

namespace kiln {
namespace {

struct TransformerLmOptions {
  int64_t vocab_size, d_model, nhead, num_layers, dim_feedforward, max_len;
  double dropout;
};

// The layer through Kiln's linear (core/layers/linear.h), which adds an adapter's low-rank update.
torch::Tensor dense(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return linear(x, layer->weight, layer->bias);
}

class EmbeddingLayer : public Layer {
 public:
  explicit EmbeddingLayer(const TransformerLmOptions& o)
      : scale_(std::sqrt(static_cast<double>(o.d_model))),
        encoder(register_module("encoder", torch::nn::Embedding(o.vocab_size, o.d_model))),
        drop_{o.dropout, 0} {
    // pe[pos, 2i] = sin(pos / 10000^(2i/d)), pe[pos, 2i+1] = cos(...): fixed, not learned.
    auto position = torch::arange(o.max_len, torch::kFloat).unsqueeze(1);
    auto div = torch::exp(torch::arange(0, o.d_model, 2, torch::kFloat) *
                          (-std::log(10000.0) / static_cast<double>(o.d_model)));
    auto pe = torch::zeros({o.max_len, o.d_model});
    pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)},
                  torch::sin(position * div));
    pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)},
                  torch::cos(position * div).narrow(1, 0, o.d_model / 2));
    positional = register_buffer("positional", pe);
  }

  torch::Tensor forward(const torch::Tensor& tokens) override {
    const at::Tensor packed = current_positions();  // packed rows: each record from 0
    auto table = packed.defined() ? torch::embedding(positional, packed)
                                  : positional.narrow(0, 0, tokens.size(1));
    return drop_(encoder(tokens) * scale_ + table, DropoutPlace::kEmbedding, is_training());
  }

  double scale_;
  torch::nn::Embedding encoder;
  LayerDropout drop_;
  torch::Tensor positional;
};

// torch.nn.TransformerEncoderLayer with norm_first = False, batch first, causal.
class EncoderLayer : public Layer {
 public:
  // `layer`: the encoder layer's index in the model's layers (1 = the first), which numbers its
  // dropout sites.
  EncoderLayer(const TransformerLmOptions& o, int64_t layer, bool checkpoint)
      : checkpoint_(checkpoint),
        nhead_(o.nhead),
        drop_{o.dropout, layer},
        in_proj(register_module("in_proj", torch::nn::Linear(o.d_model, 3 * o.d_model))),
        out_proj(register_module("out_proj", torch::nn::Linear(o.d_model, o.d_model))),
        linear1(register_module("linear1", torch::nn::Linear(o.d_model, o.dim_feedforward))),
        linear2(register_module("linear2", torch::nn::Linear(o.dim_feedforward, o.d_model))),
        norm1(register_module("norm1",
                              torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model})))),
        norm2(register_module("norm2",
                              torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model})))) {}

  torch::Tensor forward(const torch::Tensor& x) override {
    if (!checkpoint_) return compute(x);
    return checkpointed([this](const torch::Tensor& in) { return compute(in); }, x);
  }

 private:
  torch::Tensor compute(const torch::Tensor& x) {
    auto h = norm1(x + drop_(attention(x), DropoutPlace::kAttentionOutput, is_training()));
    auto hidden = drop_(torch::relu(dense(linear1, h)), DropoutPlace::kMlpHidden, is_training());
    return norm2(h + drop_(dense(linear2, hidden), DropoutPlace::kMlpOutput, is_training()));
  }

  torch::Tensor attention(const torch::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
    auto heads = [&](const torch::Tensor& m) {
      return m.view({b, t, nhead_, c / nhead_}).transpose(1, 2);
    };
    auto qkv = dense(in_proj, x).split(c, 2);
    auto y = causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), drop_.p, is_training(),
                              drop_.site(DropoutPlace::kAttentionWeights));
    return dense(out_proj, y.transpose(1, 2).contiguous().view({b, t, c}));
  }

  bool checkpoint_;
  int64_t nhead_;
  LayerDropout drop_;

 public:
  torch::nn::Linear in_proj, out_proj, linear1, linear2;
  torch::nn::LayerNorm norm1, norm2;
};

class Decoder : public Layer {
 public:
  explicit Decoder(const TransformerLmOptions& o)
      : decoder(register_module("decoder", torch::nn::Linear(o.d_model, o.vocab_size))) {}
  torch::Tensor forward(const torch::Tensor& x) override { return dense(decoder, x); }

  torch::nn::Linear decoder;
};

class TransformerLm : public Model {
 public:
  TransformerLm(const TransformerLmOptions& o, const std::vector<bool>& checkpointed_blocks)
      : options_(o) {
    auto embedding = register_module("embedding", std::make_shared<EmbeddingLayer>(o));
    auto layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < o.num_layers; ++i)
      layers->push_back(std::make_shared<EncoderLayer>(o, i + 1, checkpointed_blocks[i]));
    auto decoder = register_module("head", std::make_shared<Decoder>(o));
    append_layer(embedding);
    for (const auto& layer : *layers)
      append_layer(std::dynamic_pointer_cast<Layer>(layer));
    append_layer(decoder);

    torch::NoGradGuard no_grad;
    embedding->encoder->weight.uniform_(-0.1, 0.1);
    decoder->decoder->weight.uniform_(-0.1, 0.1);
    decoder->decoder->bias.zero_();
  }

  int64_t vocab_size() const override { return options_.vocab_size; }
  int64_t context_length() const override { return options_.max_len; }

 private:
  TransformerLmOptions options_;
};

const bool registered = ModelRegistry::add(
    {"transformer_lm",
     "the PyTorch tutorial Transformer LM: scaled embedding, sinusoidal positions, post-LN "
     "encoder layers with a causal mask, linear decoder",
     with_kernel_choice(with_activation_checkpointing(
         {ParamSpec::integer("vocab_size", 50257, "token ids the data may contain")
              .at_least(1)
              .at_most(INT32_MAX),
          ParamSpec::integer("d_model", 200, "embedding and model width").at_least(2),
          ParamSpec::integer("nhead", 2, "attention heads per layer").at_least(1).at_most(1 << 20),
          ParamSpec::integer("num_layers", 2, "encoder layers").at_least(1).at_most(10000),
          ParamSpec::integer("dim_feedforward", 200, "width of the feed-forward layer").at_least(1),
          ParamSpec::integer("max_len", 512, "longest sequence (positional table)").at_least(1),
          ParamSpec::real("dropout", 0.2, "dropout on embeddings, attention and sublayers")
              .at_least(0)
              .at_most(0.95)}))},
    [](const Params& p) {
      TransformerLmOptions o{
          p.integer("vocab_size"), p.integer("d_model"),         p.integer("nhead"),
          p.integer("num_layers"), p.integer("dim_feedforward"), p.integer("max_len"),
          p.real("dropout")};
      if (o.d_model % o.nhead != 0 || o.d_model % 2 != 0) {
        throw UserError(
            fmt::format("model.d_model = {} must be even and divisible by "
                        "model.nhead = {}",
                        o.d_model, o.nhead));
      }
      const double d = static_cast<double>(o.d_model), ff = static_cast<double>(o.dim_feedforward);
      const double vocab = static_cast<double>(o.vocab_size);
      auto plan = std::make_shared<ModelPlan>();
      plan->description = fmt::format(
          "a transformer_lm with num_layers {}, d_model {}, dim_feedforward {}, "
          "max_len {} and vocab_size {}",
          o.num_layers, o.d_model, o.dim_feedforward, o.max_len, o.vocab_size);
      // Embedding and decoder (with its bias); per layer the attention's projections (4 d^2 + 4 d),
      // the feed-forward (2 d ff + ff + d) and two LayerNorms (4 d).
      plan->parameters = 2 * vocab * d + vocab +
                         static_cast<double>(o.num_layers) * (4 * d * d + 2 * d * ff + ff + 9 * d);
      plan->buffers = static_cast<double>(o.max_len) * d;  // the positional table
      plan->vocab_size = o.vocab_size;
      plan->context_length = o.max_len;
      plan->layers = o.num_layers + 2;
      plan->dropout = o.dropout;
      std::vector<bool> checkpointed_blocks;
      for (int64_t i = 0; i < o.num_layers; ++i)
        checkpointed_blocks.push_back(checkpoints_block(p, i));
      plan->build = [o, checkpointed_blocks] {
        return std::make_shared<TransformerLm>(o, checkpointed_blocks);
      };
      return plan;
    });

}  // namespace
}  // namespace kiln
