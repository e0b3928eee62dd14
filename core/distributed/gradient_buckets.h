// The one bucketed gradient reduction of Kiln's data-parallel strategies: ddp's all-reduce (also
// ZeRO stage 1's, a pipeline's and tensor parallelism's replicas'), ZeRO stage 2's sums into
// owners and fsdp's sums of whole gradients into blocks all run on it. A strategy says only which
// gradients go in which bucket (Rules::buckets, or fill order), what each one contributes, which
// collective a bucket takes and where its result lands; this class does the rest the same way for
// all of them, as torch DDP's Reducer does for its one strategy:
//
//   a hook on each parameter's gradient accumulator fires when backward has completed that
//   gradient; the gradient joins its bucket (Rules::contribute); a bucket whose gradients are all
//   in closes: they are packed into one flat buffer (so a collective moves megabytes, not one
//   tensor), the strategy may release them (Rules::packed), and the bucket's collective starts
//   (Rules::send) while backward goes on with earlier layers; a bucket lands when its collective
//   is waited for (Rules::land), at the latest in flush().
//
// Locking rule: one mutex per GradientBuckets. Autograd may run the accumulator hooks on its
// device threads while the training thread is in backward(), so every entry point (the hooks and
// every public call) holds the mutex, and the Rules callbacks run with it held: they must not call
// back in. Nothing else in a strategy touches a gradient while backward runs.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/distributed/distributed.h"

namespace kiln {

// A parameter's gradient accumulator, held so that the hooks on it live. Opaque: LibTorch hands
// accumulators out as a std::shared_ptr<Node> up to 2.x and as a c10::intrusive_ptr<Node> in
// 2.14, and the holder only needs to keep one alive.
using HeldAccumulator = std::shared_ptr<void>;

// Hooks `ready(i)` to run each time backward has accumulated parameters[i]'s gradient: a post
// hook on its gradient accumulator, as torch DDP's Reducer does (LibTorch 1.13 and 2.x alike).
// The hooks live as long as the returned accumulators; `ready` must not own them (capture a
// weak pointer), or neither is ever freed.
std::vector<HeldAccumulator> on_gradient_accumulated(const std::vector<at::Tensor>& parameters,
                                                     const std::function<void(size_t)>& ready);

// Packs `tensors`, in order, into groups of about `bytes` (a tensor larger than that is a group
// of its own).
std::vector<std::vector<at::Tensor>> make_buckets(const std::vector<at::Tensor>& tensors,
                                                  int64_t bytes);
// One contiguous 1-D copy of `tensors`, and the way back.
at::Tensor flatten(const std::vector<at::Tensor>& tensors);
void copy_from_flat(const at::Tensor& flat, const std::vector<at::Tensor>& into);

class GradientBuckets {
 public:
  // A bucket's members: indices into the parameters, in the order of their parts in the flat
  // buffer.
  using Members = std::vector<size_t>;

  struct Rules {
    // Fixed buckets, listed in the order backward completes them: a bucket closes when every
    // member's gradient is in. Empty: buckets fill in the order gradients complete and close at
    // `fill_bytes` or when close_filling() is called.
    std::vector<Members> buckets;
    int64_t fill_bytes = 0;
    // Buckets on the wire at once; 1: each lands before the next is sent (what a strategy that
    // frees gradients as it goes needs). Landing always follows sending order.
    size_t max_in_flight = std::numeric_limits<size_t>::max();
    // What parameter i's complete gradient puts in its bucket (any shape; it is flattened), asked
    // in the hook. Null: the gradient itself. A member whose gradient never came puts zeros shaped
    // like the parameter, so every rank sends the same sizes.
    std::function<at::Tensor(size_t i)> contribute;
    // After a bucket is packed, before its collective starts. Null: nothing.
    std::function<void(const Members&, size_t bucket)> packed;
    // Starts the bucket's collective over `flat`, in place.
    std::function<Communicator::Pending(at::Tensor& flat, size_t bucket)> send;
    // The collective is done: `flat` holds its result, members' parts in order.
    std::function<void(const Members&, size_t bucket, const at::Tensor& flat)> land;
  };

  GradientBuckets(const std::vector<at::Tensor>& parameters, Rules rules);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Before a micro-step's backward: gradients completed in it join buckets only if `collect`
  // (ddp communicates on a step's last micro-step alone).
  void arm(bool collect);
  // Closes the filling bucket (fill order only): backward reached a boundary (an fsdp unit).
  void close_filling();
  // Closes every bucket not closed yet (a bucket with no gradient at all sends nothing: every
  // rank runs the same graph) and lands everything on the wire. The buckets start afresh.
  void flush();
  // The most bytes of contributions held at once, filling or on the wire, since the last call.
  int64_t take_peak_bytes();

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the autograd hooks
};

}  // namespace kiln
