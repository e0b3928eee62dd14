// A key/value cache: generation and scoring read a prompt once (prefill), then feed one new
// token at a time, each step attending over the keys and values kept from the steps before
// instead of running the whole sequence again. As transformers' generate(), llama.cpp and vLLM
// do.
//
// The models need no code of their own for it: a forward pass run inside a KvCacheScope gets
// its tokens' positions from the cache (through core/layers/document_positions.h's scope, which
// every model reads), and the attention functions (core/layers/dropout.h's causal_attention, and
// core/layers/fused_attention.h's, which then take their unfused path) hand their queries, keys and
// values to the cache, attention layer after attention layer in the order they run.
//
// Rows are left-padded: row b's first pad[b] tokens hold no text. Its real tokens sit at
// positions 0, 1, ... and attend only to real tokens before them, so each row's logits are those
// of its tokens alone. Keys are kept with as many heads as the model has key/value heads
// (grouped-query attention shares them; they are not repeated in the cache).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "core/layers/document_positions.h"

namespace kiln {

class KvCache {
 public:
  // Room for `capacity` tokens per row (padding included); `pad`: each row's left padding;
  // `context_length`: the model's, past which no position is given (a padding token at the end
  // of a row shorter than its batch's longest reads the last one; its output is never used).
  KvCache(std::vector<int64_t> pad, int64_t capacity, int64_t context_length);

  int64_t rows() const { return static_cast<int64_t>(pad_.size()); }
  // Whether the forward pass in progress wants the last position's logits only.
  bool last_logits_only() const { return last_only_; }
  // Tokens per row kept so far, padding included.
  int64_t length() const { return length_; }
  // Bytes the cache's tensors hold (allocated in full at the first forward pass).
  int64_t bytes() const;

  // A cache of `rows` of this one (a row may repeat): multiple-choice scoring reads a context
  // once and continues it with each choice.
  KvCache select(const std::vector<int64_t>& rows) const;

  // Attention of the new tokens' queries q [batch, heads, new, head_dim] over the kept keys and
  // values and the new ones k, v [batch, kv_heads, new, head_dim], which are kept: ->
  // [batch, heads, new, head_dim]. Called by the attention functions inside a scope.
  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

 private:
  friend class KvCacheScope;
  at::Tensor positions(int64_t time, c10::Device device) const;
  void begin(int64_t time, bool last_only, c10::Device device);
  void end(bool completed);

  std::vector<int64_t> pad_;
  int64_t capacity_ = 0;
  int64_t context_length_ = 0;
  int64_t length_ = 0;
  int64_t adding_ = 0;      // the new tokens of the forward pass in progress
  size_t layer_ = 0;        // the next attention layer of that pass
  bool last_only_ = false;  // that pass wants the last position's logits only
  at::Tensor hidden_;  // that pass's keys each query may not see: bool [batch, new, kept + new]
  std::vector<at::Tensor> keys_, values_;  // per attention layer: [batch, kv_heads, capacity, d]
};

// What a forward pass in a KvCacheScope returns.
enum class CachedLogits {
  kEvery,  // the logits of every new token
  kLast,   // of the last one only: Model::forward runs its last layer (the output head, which
           // works on each position alone) on the last position, [batch, 1, vocab]
};

// One forward pass over `time` new tokens per row reads and extends `cache` (on this thread).
class KvCacheScope {
 public:
  KvCacheScope(KvCache& cache, int64_t time, c10::Device device,
               CachedLogits logits = CachedLogits::kEvery);
  ~KvCacheScope();
  KvCacheScope(const KvCacheScope&) = delete;
  KvCacheScope& operator=(const KvCacheScope&) = delete;

 private:
  KvCache& cache_;
  KvCache* previous_;
  int exceptions_;  // in flight at the start: a pass that throws adds nothing to the cache
  PositionScope positions_;
};

// The cache of the forward pass in progress on this thread; nullptr outside any scope.
KvCache* active_kv_cache();

}  // namespace kiln
