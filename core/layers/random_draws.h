// The random numbers a model draws in its forward pass (dropout), as a pure function of where
// they are used rather than of a generator's state: the same numbers at any world size and under
// any parallel strategy, and again when activation checkpointing recomputes a block.
//
// A draw is keyed by the run's seed, the optimizer step, the draw site (which dropout of which
// layer), the sample (the row's index in the step's global batch) and the element's index within
// the sample's whole, unsliced tensor. Each key goes through SplitMix64 (Steele, Lea and Flood,
// "Fast splittable pseudorandom number generators", OOPSLA 2014; Java's SplittableRandom;
// splitmix64_output in core/util/counter_hash.h):
//
//   step key   = splitmix(seed, step)
//   site key   = splitmix(step key, site)
//   sample key = splitmix(site key, sample)
//   element    = splitmix(sample key, index)
//
// where splitmix(s, i) = mix(s + (i + 1) * 0x9E3779B97F4A7C15) and mix is SplitMix64's finaliser
// (Stafford's variant 13),
//
// so a sample's numbers do not depend on which rank holds it or how many micro-steps a step
// has, and a tensor-parallel rank computes exactly its slice's numbers. The micro-step is not in
// the key: a sample's index in the step's global batch already tells micro-batches apart.
//
// Within a step the trainer (or a pipeline stage, per micro-batch) opens a DrawScope naming the
// step and the first sample of the micro-batch; its row i is sample first_sample + i. Sources
// hand out rows in that order: rank r of W reads rows [(m W + r) B, (m W + r + 1) B) of the
// step's global batch in micro-step m (core/api/data_source.h). Outside any scope (a model run
// by hand in training mode) each draw takes a fresh seed from LibTorch's CPU generator, so masks
// differ from call to call as torch.nn.Dropout's do.
#pragma once

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

namespace kiln {

// What the numbers of one micro-batch's forward pass are drawn from.
struct DrawKey {
  uint64_t seed = 0;         // run.seed
  int64_t step = 0;          // the optimizer step (1-based) the pass belongs to
  int64_t first_sample = 0;  // the micro-batch's first row in the step's global batch
};

// Sets the key for the forward passes run while it lives (on this thread), restoring the
// previous one after. Not copyable: it lives on the stack around a pass.
class DrawScope {
 public:
  explicit DrawScope(std::optional<DrawKey> key);
  ~DrawScope();
  DrawScope(const DrawScope&) = delete;
  DrawScope& operator=(const DrawScope&) = delete;

 private:
  std::optional<DrawKey> previous_;
};

// The key in force on this thread; nullopt outside any DrawScope. Activation checkpointing reads
// it in the forward pass and opens a scope with it around the recomputation.
std::optional<DrawKey> current_draws();

// Where a tensor's elements sit in the whole tensor they are numbered in. Under tensor
// parallelism a rank holds `dim`'s entries [start, start + size) of `whole` entries (its
// attention heads); dim = -1: the tensor is whole.
struct SliceOf {
  int64_t dim = -1;
  int64_t start = 0;
  int64_t whole = 0;
};

// A mask shaped like `x` (dim 0 = the micro-batch's rows), on its device, in x's dtype or in fp32
// for a bf16 or fp16 x (1 / (1 - p) rounded to bf16 is 1.109375 at p = 0.1, a mask whose mean is
// 0.998, not 1): 0 where the element is dropped (probability p), 1 / (1 - p) where it is kept.
// Element (i, ...) is kept when the top 24 bits of its draw are at least round(p * 2^24). `site`
// numbers the draw site in the model. Throws std::invalid_argument for p outside [0, 1) or an x of
// no rows.
at::Tensor dropout_mask(const at::Tensor& x, double p, int64_t site, const SliceOf& slice = {});

// dropout_mask computed with tensor operations (what runs on a GPU), on any device; on the CPU it
// gives the same mask as the loop dropout_mask runs there. For the tests.
at::Tensor dropout_mask_by_tensor_ops(const at::Tensor& x, double p, int64_t site,
                                      const SliceOf& slice = {});

}  // namespace kiln
