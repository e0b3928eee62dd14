// Parallelism strategies: how many processes share a step and how their gradients meet.
// The trainer calls these hooks at fixed points of every step; `single` leaves them empty.
#pragma once

#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>

#include "core/registry.h"

namespace torch::optim {
class Optimizer;
}

namespace kiln {

class Model;

class ParallelStrategy {
 public:
  virtual ~ParallelStrategy() = default;
  virtual int rank() const { return 0; }
  virtual int world_size() const { return 1; }
  // Once, after the model is built and moved to its device (e.g. broadcast rank 0's weights).
  virtual void attach(Model& model) { (void)model; }
  // Before each micro-step's backward: gradients need syncing only on the final one.
  virtual void begin_micro_step(bool final_micro_step) { (void)final_micro_step; }
  // After the last backward of a step, before unscaling and clipping.
  virtual void finish_gradients(Model& model) { (void)model; }
  // False when, after finish_gradients, each rank holds only its own shard of the gradients:
  // then no rank alone can tell whether all of them are finite.
  virtual bool replicates_gradients() const { return true; }
  // The global gradient norm from this rank's norm of the gradients it holds.
  virtual at::Tensor global_norm(const at::Tensor& local_norm) { return local_norm; }
  // After the optimizer step (ranks that updated only their shard share it here).
  virtual void finish_update(Model& model) { (void)model; }
  // Element-wise sum over ranks; no host sync.
  virtual at::Tensor sum(const at::Tensor& value) { return value; }
  // For strategies that shard the optimizer state: before a snapshot, every rank sends its part
  // and rank 0 holds the whole; after the snapshot or a load, each rank keeps only its part.
  // Collective: every rank calls them at the same point.
  virtual void gather_optimizer_state(torch::optim::Optimizer& optimizer) { (void)optimizer; }
  virtual void shard_optimizer_state(torch::optim::Optimizer& optimizer) { (void)optimizer; }
};

struct ParallelKind {
  static constexpr const char* name = "parallel";
  using Product = ParallelStrategy;
  using Factory = std::function<std::shared_ptr<ParallelStrategy>(const Params&)>;
};
using ParallelRegistry = Registry<ParallelKind>;

}  // namespace kiln
