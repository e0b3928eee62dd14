#include "core/layers/dropout.h"

#include <cmath>

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

#include "core/layers/document_positions.h"
#include "core/layers/kv_cache.h"

namespace kiln {

int64_t dropout_site(int64_t layer, DropoutPlace place) {
  constexpr int64_t kPlaces = 8;  // room for more places without renumbering the sites
  return layer * kPlaces + static_cast<int64_t>(place);
}

at::Tensor dropout(const at::Tensor& x, double p, bool training, int64_t site,
                   const SliceOf& slice) {
  if (!training || p == 0) return x;
  // In fp32 for a bf16 x, rounded once: x * 1.1111 then bf16, not x * bf16(1.1111) = 1.109375.
  return (x * dropout_mask(x, p, site, slice)).to(x.scalar_type());
}

at::Tensor LayerDropout::operator()(const at::Tensor& x, DropoutPlace place, bool training,
                                    const SliceOf& slice) const {
  return dropout(x, p, training, site(place), slice);
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double p,
                            bool training, int64_t site, const SliceOf& heads) {
  if (KvCache* cache = active_kv_cache()) return cache->attend(q, k, v);
  const at::Tensor positions = current_positions();
  const at::Tensor visible = positions.defined() ? document_causal_mask(positions) : at::Tensor();
  // Without dropout, LibTorch's fused kernel (flash / memory-efficient on CUDA); with it,
  // Kiln's dropout needs the probabilities, formed below.
  if (!training || p == 0) {
    if (visible.defined()) return at::scaled_dot_product_attention(q, k, v, visible, 0.0, false);
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, 0.0, /*is_causal=*/true);
  }
  const int64_t t = q.size(-2);
  auto scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  auto hidden = visible.defined() ? visible.logical_not()
                                  : at::ones({t, t}, q.options().dtype(at::kBool)).triu(1);
  auto weights = at::softmax(scores.masked_fill(hidden, -INFINITY), -1);
  return at::matmul(dropout(weights, p, training, site, heads), v);
}

}  // namespace kiln
