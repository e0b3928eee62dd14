// What a training step reports (StepStats), and the one collective that gathers
// the figures needing every rank. Each step packs its loss share, its gradient
// norm and, per rank, the time up to that point and a pipeline's pass times
// into one tensor, sums it over the ranks and brings it to the host: one
// all-reduce and one device-to-host transfer per step, whatever the world.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kiln {

class ParallelStrategy;

struct StepStats {
  int64_t step = 0;  // 1-based: the number of updates done once this one is applied
  double loss = 0;   // mean cross-entropy over the step's (counted) tokens, all ranks
  double lr = 0;
  double grad_norm = 0;  // global L2 norm before clipping
  double dt_ms = 0;
  double tokens_per_sec = 0;
  int64_t tokens_seen = 0;
  int64_t counted_tokens = 0;  // masked data: the targets the loss counted (all ranks); else 0
  // A blend: the tokens the step took from each source (all ranks), in the
  // order of the data's source_names(); empty for data of one source.
  std::vector<int64_t> source_tokens;
  double loss_scale = 1;   // the precision policy's scale for this step's loss
  bool skipped = false;    // the update was not applied (non-finite gradients)
  bool nonfinite = false;  // ... because they were inf/NaN beyond what the
                           // precision policy expects
  // With several ranks: the slowest rank's step time minus the fastest one's,
  // the time up to the step's closing all-reduce (how long the fastest rank
  // waited for the others).
  double rank_skew_ms = 0;
  // Pipelines: each stage's compute time in its passes, and the share of the
  // stages' pass time spent waiting (the pipeline bubble).
  std::vector<double> stage_compute_ms;
  std::vector<int64_t> stage_peak_live;  // most micro-batches' activations each stage held
  std::optional<double> bubble;
};

// Collective, after the gradients are clipped and before the update, which
// needs the norm on the host. `loss_sum`: this rank's summed micro-step losses;
// `norm`: the global pre-clip norm (the same on every rank); `local_ms`: this
// rank's time into the step. Sets stats.loss, stats.grad_norm,
// stats.rank_skew_ms and, for a pipeline, the stages' figures and the bubble.
void gather_step_figures(ParallelStrategy& parallel, const at::Tensor& loss_sum,
                         const at::Tensor& norm, double local_ms, StepStats& stats);

}  // namespace kiln
