// ZeRO stage 2's gradient path: every parameter has one owning rank, and each rank keeps only
// the gradients of the parameters it owns (its shard), summed over the ranks.
//
// Gradients are packed into buckets of about bucket_mb, one owner per bucket, in the order
// backward completes them (core/distributed/gradient_buckets.h does the packing, the hooks and
// the locking). As soon as backward has produced every gradient of a bucket, the bucket is
// summed into its owner (c10d reduce) while backward goes on; the other ranks release the
// bucket's gradients at once (.grad set to undefined, so their storage goes back to the
// allocator), and before the next bucket is packed, the previous one lands: its owner copies the
// sum back into its own gradients, which are the shard. Not views into a flat shard buffer:
// LibTorch 1.13's zero_grad detaches gradients in place, which views refuse, and ownership is by
// whole parameters anyway, so the shard is simply the owned parameters' .grad tensors. finish()
// scales them to the mean.
//
// Every micro-step is reduced, not only the last: the owner's gradients hold the sum over the
// ranks so far, the next backward accumulates into them, and the other ranks contribute that
// micro-step alone, so the sum stays exact and no rank ever holds more than its shard plus about
// one bucket of others' gradients, at the price of grad_accum reductions per step instead of one.
// (ddp and stage 1 do the opposite: accumulate full gradients and communicate once.)
//
// Cost per step on Gloo, per rank, for G bytes of gradients and world W: its reduce is a ring
// reduce-scatter and a gather to the owner, so a rank sends about G (W - 1) / W in the rings and
// G / W x (W - 1) / W more to owners: 0.75 G at W = 2, against G for ddp's all-reduce
// (2 G (W - 1) / W) and 0.5 G for an ideal reduce-scatter. On NCCL the reduce is a ring too.
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/distributed/distributed.h"
#include "core/distributed/gradient_buckets.h"

namespace kiln {

class ReduceToOwners {
 public:
  // owned_by[r]: the parameters rank r owns, in model order.
  ReduceToOwners(Communicator& comm, const std::vector<std::vector<at::Tensor>>& owned_by,
                 int64_t bucket_bytes);
  ~ReduceToOwners();
  ReduceToOwners(const ReduceToOwners&) = delete;
  ReduceToOwners& operator=(const ReduceToOwners&) = delete;

  // Before each micro-step's forward. The first of a step releases the last step's gradients;
  // a later one first reduces what the micro-step before it left (buckets whose parameters got
  // no gradient), so that every micro-step's gradients reach the shards.
  void begin_micro_step();
  // After the last backward: reduces what is left, waits, and leaves each owned parameter's
  // gradient averaged over the ranks and every other gradient undefined.
  void finish();
  // The most bytes of .grad tensors this rank held at once in the last step: its shard so far
  // plus others' gradients not yet packed (the flat buffer in flight is not counted).
  int64_t peak_bytes() const;

 private:
  struct Tally;
  int world_;
  bool step_open_ = false;
  std::shared_ptr<Tally> tally_;  // shared with the bucket rules
  std::unique_ptr<GradientBuckets> buckets_;
};

}  // namespace kiln
