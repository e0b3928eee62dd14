// Fully sharded data parallel (ZeRO stage 3) in units of one layer of Model::layers(). Every
// parameter is cut along dim 0 into world equal row blocks (dim 0 padded with zero rows to a
// multiple of world); between uses the parameter's data is this rank's block only, so its
// gradient and optimizer state are blocks too, and the optimizer's decay groups (which look at
// a parameter's dim) see the same parameters as on one process.
//
// Per step and unit (a layer with its borrowed, tied weights):
//   forward   the layer runner all-gathers the unit's parameters into their whole buffers, runs
//             the layer, and frees the buffers' memory in place (the storage is resized to 0, as
//             torch FSDP1 does), although autograd still holds views of them;
//   backward  an identity autograd node on the unit's output runs first: it reallocates the
//             buffers and all-gathers them again; when a parameter's gradient accumulator has
//             run, its whole gradient (padded) is copied into the bucket and the parameter's
//             whole buffers are freed; when backward reaches the next unit (or the bucket holds
//             parallel.bucket_mb), the bucket's sum over the ranks starts in one collective
//             (Gloo has no reduce-scatter, so an all-reduce of the whole gradients, of which each
//             rank keeps its blocks: twice the traffic of a reduce-scatter) while backward goes
//             on, and the bucket before it lands, divided by world, into the rank's block sums.
//             Every micro-step communicates, so a rank never holds more than its blocks plus
//             two buckets of whole gradients, one filling and one on the wire (about two
//             layers' worth), plus what autograd buffers. Frozen parameters (an adapter's base,
//             core/api/adapter.h) are gathered alike but take no gradient: they are freed when
//             backward reaches the unit before theirs. An adapter's tensors belong to the unit
//             of the layer they adapt.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/api/parallel.h"

namespace torch::optim {
class Optimizer;
}

namespace kiln {

class Communicator;
class Layer;
class Model;

class FsdpUnits {
 public:
  // Hooks the gradient accumulators (while the parameters are whole, so that autograd expects
  // whole gradients), cuts every parameter to its block and installs the model's layer runner.
  // `model` holds rank 0's weights on every rank already. Gradients are summed in buckets of
  // about `bucket_bytes` (parallel.bucket_mb), cut at unit boundaries. Parameters in
  // `left_alone` (TensorImpl addresses: expert shares) it neither cuts nor sums.
  FsdpUnits(Communicator& comm, Model& model, int64_t bucket_bytes,
            const std::unordered_set<const void*>& left_alone = {});
  ~FsdpUnits();
  FsdpUnits(const FsdpUnits&) = delete;
  FsdpUnits& operator=(const FsdpUnits&) = delete;

  // Before each micro-step's forward: sends what the last backward left in the bucket.
  void begin_micro_step();
  // After the last backward of a step: each parameter's gradient becomes its block of the sum
  // over ranks and micro-steps.
  void finish_gradients();
  // Blocks of gradients plus the most whole-gradient bytes held at once (a bucket filling and
  // one on the wire).
  int64_t peak_gradient_bytes() const;

  // Snapshots: in `slices` (whole_state_slices of the model and optimizer), each parameter and
  // each tensor of its optimizer state becomes this rank's block of it, clipped to the real rows
  // (a block wholly of padding: no rows), each rank writing its own.
  void declare_blocks(std::vector<StateSlice>& slices) const;
  // A snapshot of whole files (from an older Kiln) is loaded into whole-shaped parameters
  // (make_whole_shaped: the values are about to be overwritten), then each parameter and every
  // tensor of its optimizer state is cut to this rank's block again (shard).
  void make_whole_shaped();
  void shard(torch::optim::Optimizer& optimizer);

  struct State;

 private:
  std::shared_ptr<State> state_;  // shared with the layer runner and the autograd nodes
};

}  // namespace kiln
