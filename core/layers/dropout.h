// Dropout for models, drawn from core/layers/random_draws.h: the masks are a function of the run's
// seed, the step, the draw site and each element's place in the step's global batch, so every
// parallel strategy and world size draws the ones a single process draws. Used by gpt, llama and
// transformer_lm in place of torch::nn::Dropout and of the attention kernels' own dropout.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "core/layers/random_draws.h"

namespace kiln {

// Where in a layer a dropout sits; with the layer's index in Model::layers() it names the draw
// site, so no two dropouts of a model share masks.
enum class DropoutPlace : int64_t {
  kEmbedding = 0,
  kAttentionWeights = 1,  // the attention probabilities, [batch, heads, time, time]
  kAttentionOutput = 2,   // the attention sublayer's output, before the residual sum
  kMlpHidden = 3,         // the feed-forward's hidden units (transformer_lm)
  kMlpOutput = 4,         // the feed-forward sublayer's output, before the residual sum
  kAdapterInput = 5,      // an adapter's input (core/api/adapter.h); its layer: the adapter's site
};

// The draw site of `place` in layer `layer` (0 = the embedding layer).
int64_t dropout_site(int64_t layer, DropoutPlace place);

// One layer's dropouts: probability p (model.dropout) at the draw sites of layer `layer`.
struct LayerDropout {
  double p = 0;
  int64_t layer = 0;

  int64_t site(DropoutPlace place) const { return dropout_site(layer, place); }
  // dropout(x, p, training, site(place), slice), below.
  at::Tensor operator()(const at::Tensor& x, DropoutPlace place, bool training,
                        const SliceOf& slice = {}) const;
};

// x with the elements of dropout_mask(x, p, site, slice) dropped and the others scaled by
// 1 / (1 - p); x itself when not training or p = 0. Rows (dim 0) are samples.
at::Tensor dropout(const at::Tensor& x, double p, bool training, int64_t site,
                   const SliceOf& slice = {});

// Causal self-attention over [batch, heads, time, head_dim] tensors, dropout p on the attention
// probabilities at `site` when training. `heads` places this rank's heads among the model's
// under tensor parallelism: {1, first head, heads in all}. In packed rows each query sees only
// its own document (core/layers/document_positions.h). Without dropout it is LibTorch's fused
// kernel (scaled_dot_product_attention); otherwise the probabilities are formed explicitly, with
// the causal mask, so that the dropout mask can be Kiln's.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double p,
                            bool training, int64_t site, const SliceOf& heads = {});

}  // namespace kiln
