// Parallelism strategies: how many processes share a step and how their gradients meet.
// The trainer calls these hooks at fixed points of every step; `single` leaves them empty.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "core/registry.h"

namespace torch::optim {
class Optimizer;
}

namespace kiln {

class Model;
class DataSource;

// What a strategy that runs the model's passes itself (a pipeline) needs from the trainer.
struct PassContext {
  Model& model;
  DataSource& data;
  int64_t micro_batches;
  c10::Device device;
  bool train;  // forward and backward, each loss / micro_batches; else forward only
  // The trainer's loss (mean cross-entropy, fp32) of logits against targets.
  std::function<at::Tensor(const at::Tensor& logits, const at::Tensor& targets)> loss;
  std::function<std::shared_ptr<void>()> forward_scope;  // held around forward (autocast)
  std::function<at::Tensor(const at::Tensor& loss)> scale_loss;
};

class ParallelStrategy {
 public:
  virtual ~ParallelStrategy() = default;
  virtual int rank() const { return 0; }
  virtual int world_size() const { return 1; }
  // The ranks that read different data (all of them, but for pipeline stages of one replica).
  virtual int data_rank() const { return rank(); }
  virtual int data_world() const { return world_size(); }
  // Micro-batches per step the strategy needs (a pipeline's); 0 = whatever train.batch_tokens
  // makes.
  virtual int64_t micro_batches() const { return 0; }
  // This rank's share of the run's loss in sum() over all ranks: the mean over ranks, unless
  // only some ranks compute the loss.
  virtual double loss_share() const { return 1.0 / world_size(); }
  // Strategies that cut the model across ranks run a step's passes themselves and return this
  // rank's summed loss; nullopt = the trainer's own loop over micro-batches.
  virtual std::optional<at::Tensor> run_passes(PassContext& context) {
    (void)context;
    return std::nullopt;
  }
  // A pipeline's last pass: ms spent computing, and ms the passes took in all (with waits).
  struct PassTimes {
    double compute_ms = 0, total_ms = 0;
    int64_t peak_live = 0;  // most micro-batches whose activations were held at once
  };
  virtual PassTimes pass_times() const { return {}; }
  // Pipeline stages (1 otherwise); stage s of the first replica is rank s.
  virtual int stages() const { return 1; }
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
  // For strategies where ranks hold parts of the training state (zero: optimizer state;
  // pipeline: the weights of their stage too): before a snapshot, ranks send their parts and rank
  // 0 holds the whole; after the snapshot or a load, each rank keeps only its part. Collective:
  // every rank calls them at the same point.
  virtual void gather_state(Model& model, torch::optim::Optimizer& optimizer) {
    (void)model;
    (void)optimizer;
  }
  virtual void shard_state(Model& model, torch::optim::Optimizer& optimizer) {
    (void)model;
    (void)optimizer;
  }
};

struct ParallelKind {
  static constexpr const char* name = "parallel";
  using Product = ParallelStrategy;
  using Factory = std::function<std::shared_ptr<ParallelStrategy>(const Params&)>;
};
using ParallelRegistry = Registry<ParallelKind>;

}  // namespace kiln
