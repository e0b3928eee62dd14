#include "core/layers/kv_cache.h"

#include <cmath>
#include <exception>
#include <stdexcept>
#include <utility>

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

namespace kiln {

namespace {

thread_local KvCache* active_cache = nullptr;

}  // namespace

KvCache::KvCache(std::vector<int64_t> pad, int64_t capacity, int64_t context_length)
    : pad_(std::move(pad)), capacity_(capacity), context_length_(context_length) {}

int64_t KvCache::bytes() const {
  int64_t total = 0;
  for (const auto* kept : {&keys_, &values_})
    for (const at::Tensor& t : *kept)
      total += static_cast<int64_t>(t.nbytes());
  return total;
}

KvCache KvCache::select(const std::vector<int64_t>& rows) const {
  std::vector<int64_t> pad;
  for (int64_t r : rows)
    pad.push_back(pad_.at(static_cast<size_t>(r)));
  KvCache out(std::move(pad), capacity_, context_length_);
  out.length_ = length_;
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    const at::Tensor index = at::tensor(rows, at::kLong).to(keys_[layer].device());
    out.keys_.push_back(keys_[layer].index_select(0, index));
    out.values_.push_back(values_[layer].index_select(0, index));
  }
  return out;
}

at::Tensor KvCache::positions(int64_t time, c10::Device device) const {
  // Row b's real tokens count from 0 at index pad[b]; its padding reads position 0.
  const at::Tensor index = at::arange(length_, length_ + time, at::kLong).view({1, time});
  const at::Tensor pad = at::tensor(pad_, at::kLong).view({rows(), 1});
  return (index - pad).clamp(0, context_length_ - 1).to(device);
}

void KvCache::begin(int64_t time, bool last_only, c10::Device device) {
  if (length_ + time > capacity_) {
    throw std::logic_error("KvCache: " + std::to_string(length_ + time) +
                           " tokens per row, past its capacity of " + std::to_string(capacity_));
  }
  adding_ = time;
  layer_ = 0;
  last_only_ = last_only;
  // Query i (index length_ + i) sees keys up to itself that hold text; a padding query sees
  // itself alone, so that its (unused) row stays finite. The same for every attention layer.
  const int64_t total = length_ + time;
  const at::Tensor query = at::arange(length_, total, at::kLong).to(device).view({1, time, 1});
  const at::Tensor key = at::arange(total, at::kLong).to(device).view({1, 1, total});
  const at::Tensor first = at::tensor(pad_, at::kLong).to(device).view({rows(), 1, 1});
  hidden_ = key.le(query).logical_and(key.ge(first).logical_or(key.eq(query))).logical_not();
}

void KvCache::end(bool completed) {
  if (completed) length_ += adding_;
  adding_ = 0;
  last_only_ = false;
  hidden_ = at::Tensor();
}

at::Tensor KvCache::attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t batch = q.size(0), heads = q.size(1), time = q.size(2), dim = q.size(3);
  const int64_t kv_heads = k.size(1), group = heads / kv_heads;
  if (layer_ == keys_.size()) {
    keys_.push_back(at::zeros({batch, kv_heads, capacity_, dim}, k.options()));
    values_.push_back(at::zeros({batch, kv_heads, capacity_, dim}, v.options()));
  }
  const int64_t total = length_ + time;
  keys_[layer_].narrow(2, length_, time).copy_(k);
  values_[layer_].narrow(2, length_, time).copy_(v);
  const at::Tensor keys = keys_[layer_].narrow(2, 0, total);
  const at::Tensor values = values_[layer_].narrow(2, 0, total);
  ++layer_;

  // Query j + i of a key/value head's group reads that head: [batch, kv_heads, group, time, d].
  const at::Tensor grouped = q.reshape({batch, kv_heads, group, time, dim});
  at::Tensor scores = at::matmul(grouped, keys.unsqueeze(2).transpose(-2, -1)) *
                      (1.0 / std::sqrt(static_cast<double>(dim)));
  scores = scores.masked_fill(hidden_.view({batch, 1, 1, time, total}), -INFINITY);
  const at::Tensor weights = at::softmax(scores, -1);
  return at::matmul(weights, values.unsqueeze(2)).view({batch, heads, time, dim});
}

KvCacheScope::KvCacheScope(KvCache& cache, int64_t time, c10::Device device, CachedLogits logits)
    : cache_(cache),
      previous_(active_cache),
      exceptions_(std::uncaught_exceptions()),
      positions_(cache.positions(time, device)) {
  cache_.begin(time, logits == CachedLogits::kLast, device);
  active_cache = &cache_;
}

KvCacheScope::~KvCacheScope() {
  cache_.end(std::uncaught_exceptions() == exceptions_);
  active_cache = previous_;
}

KvCache* active_kv_cache() {
  return active_cache;
}

}  // namespace kiln
