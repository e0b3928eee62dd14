// The training step and evaluation, for an assembled run. One step:
//   lr from the schedule -> grad_accum micro-steps of forward, loss / grad_accum, backward ->
//   gradient sync (parallel strategy) -> unscale / finiteness check (precision policy) ->
//   global-norm clip -> the step's figures to the host -> optimizer update.
// The loss and the pre-clip norm come back to the host in one transfer per step
// (core/train/step_telemetry.h).
// Data whose batches carry a loss mask (DataSource::masks_loss) read all of a step's
// micro-batches first: the step's loss is the sum of its counted targets' losses, over every
// micro-batch and rank, divided by how many they are (summed over the ranks: one more all-reduce
// per step), so each micro-step's loss is its masked sum over that global count and gradient
// accumulation stays exact whatever each micro-batch counts.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/layers/random_draws.h"
#include "core/train/assemble.h"
#include "core/train/cuda_graph.h"
#include "core/train/sample_trace.h"
#include "core/train/step_telemetry.h"

namespace kiln {

class PhaseClock;

// Where a step's wall time went, when the trainer is profiling (kiln bench).
struct PhaseTimes {
  double data_ms = 0;     // next batch from the loader, copy to the device
  double forward_ms = 0;  // forward pass and loss
  double backward_ms = 0;
  double communication_ms = 0;  // gradient sync across ranks, the loss to the host
  double optimizer_ms = 0;      // unscale, clip, update
};

// An evaluation: the mean loss over `tokens` targets (all ranks): every target, or with masked
// data the counted ones.
struct EvalResult {
  double loss = 0;
  int64_t tokens = 0;
};

class Trainer {
 public:
  explicit Trainer(AssembledRun& run);
  ~Trainer();

  StepStats train_step(int64_t step);
  // Mean loss over `batches` micro-batches of `data` from its start, without gradients.
  EvalResult evaluate(DataSource& data, int64_t batches);
  int64_t tokens_seen() const { return tokens_seen_; }
  // Profiling waits for the device between phases so that last_phases() is exact.
  void set_profiling(bool on) { profile_ = on; }
  const PhaseTimes& last_phases() const { return phases_; }
  void set_tokens_seen(int64_t tokens) { tokens_seen_ = tokens; }

 private:
  at::Tensor loss_of(const Batch& batch);
  at::Tensor forward_loss(const at::Tensor& inputs, const at::Tensor& targets);
  // Cross-entropy over the model's vocabulary (fp32); targets equal to -100 are left out.
  // `sum`: their summed loss instead of the mean.
  at::Tensor loss_from_logits(at::Tensor logits, const at::Tensor& targets, bool sum = false) const;
  PassContext pass_context(DataSource& data, int64_t micro_batches, bool train);
  // Micro-step micro's dropout key: rows (micro x data_world + data_rank) x micro_batch on.
  DrawKey draws_of(int64_t micro) const;

  // A training micro-batch's share of the step's loss (its mean loss / grad_accum).
  at::Tensor micro_loss(const at::Tensor& inputs, const at::Tensor& targets);
  // The sum of the losses of the targets `batch.loss_mask` counts (fp32).
  at::Tensor masked_loss_sum(const Batch& batch);
  EvalResult masked_evaluate(DataSource& data, int64_t batches);

  // train_step's phases, in the order it takes them. The micro-step paths add each micro-step's
  // loss to `loss_sum` and each phase's time to `clock`.
  StepStats begin_step(int64_t step);
  at::Tensor micro_steps(StepStats& stats, PhaseClock& clock);
  int64_t masked_micro_steps(at::Tensor& loss_sum, PhaseClock& clock);  // the targets counted
  void streamed_micro_steps(at::Tensor& loss_sum, PhaseClock& clock);
  void replayed_micro_step(const Batch& batch, at::Tensor& loss_sum, PhaseClock& clock);
  void eager_micro_step(const Batch& batch, at::Tensor& loss_sum, PhaseClock& clock);
  at::Tensor sync_gradients(StepStats& stats, PhaseClock& clock);
  void update(StepStats& stats, PhaseClock& clock);
  void count_step(StepStats& stats, std::chrono::steady_clock::time_point start);

  AssembledRun& run_;
  std::vector<at::Tensor> parameters_;
  std::unique_ptr<CapturedMicroStep> graph_;  // train.cuda_graphs
  int64_t tokens_seen_ = 0;
  int64_t step_ = 0;         // the step train_step is taking
  bool masked_ = false;      // the train data's batches carry a loss mask
  bool fused_loss_ = false;  // model.kernels = "fused": core/kernels/fused_cross_entropy.h
  std::unique_ptr<SampleTrace> trace_;  // KILN_TRACE_SAMPLES (a test mode); null otherwise
  bool threads_follow_share_ = false;   // run.share_cores without a fixed count (run_device.h)
  bool profile_ = false;
  PhaseTimes phases_;
};

}  // namespace kiln
