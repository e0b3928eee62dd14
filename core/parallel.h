// Parallelism strategies: how many processes share a step and how their gradients meet.
// The trainer calls these hooks at fixed points of every step; `single` leaves them empty.
#pragma once

#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>

#include "core/registry.h"

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
  // After the last backward of a step, before clipping.
  virtual void finish_gradients(Model& model) { (void)model; }
  // Mean over ranks of a scalar tensor (the logged loss); no host sync.
  virtual at::Tensor mean(const at::Tensor& value) { return value; }
};

struct ParallelKind {
  static constexpr const char* name = "parallel";
  using Product = ParallelStrategy;
  using Factory = std::function<std::shared_ptr<ParallelStrategy>(const Params&)>;
};
using ParallelRegistry = Registry<ParallelKind>;

}  // namespace kiln
