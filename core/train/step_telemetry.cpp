#include "core/train/step_telemetry.h"

#include <ATen/ATen.h>

#include "core/api/parallel.h"

namespace kiln {

namespace {

// The packed tensor: [loss, norm] then four rows of one column per rank.
enum PerRankRow : int { kStepMs, kComputeMs, kPassMs, kPeakLive, kPerRankRows };

// Each rank fills only its own column, so that the sum over the ranks lays out
// every rank's.
std::vector<float> own_column(const ParallelStrategy& parallel, double local_ms) {
  const int world = parallel.world_size(), rank = parallel.rank();
  const ParallelStrategy::PassTimes pass = parallel.pass_times();
  std::vector<float> per_rank(kPerRankRows * static_cast<size_t>(world),
                              0.0f);  // on the host
  per_rank[kStepMs * world + rank] = static_cast<float>(local_ms);
  per_rank[kComputeMs * world + rank] = static_cast<float>(pass.compute_ms);
  per_rank[kPassMs * world + rank] = static_cast<float>(pass.total_ms);
  per_rank[kPeakLive * world + rank] = static_cast<float>(pass.peak_live);
  return per_rank;
}

// Stage s of the first replica is rank s.
void read_stages(const at::Tensor& times, int stages, StepStats& stats) {
  auto compute = times[kComputeMs].narrow(0, 0, stages);
  auto total = times[kPassMs].narrow(0, 0, stages);
  for (int s = 0; s < stages; ++s) {
    stats.stage_compute_ms.push_back(compute[s].item<double>());
    stats.stage_peak_live.push_back(times[kPeakLive][s].item<int64_t>());
  }
  stats.bubble = 1.0 - (compute.sum() / total.sum()).item<double>();
}

}  // namespace

void gather_step_figures(ParallelStrategy& parallel, const at::Tensor& loss_sum,
                         const at::Tensor& norm, double local_ms, StepStats& stats) {
  const int world = parallel.world_size();
  const std::vector<float> per_rank = own_column(parallel, local_ms);
  at::Tensor host = parallel
                        .sum(at::cat({at::stack({loss_sum * parallel.loss_share(),
                                                 norm.to(loss_sum.dtype()) / double(world)}),
                                      at::tensor(per_rank).to(loss_sum.device())}))
                        .to(at::kDouble)
                        .cpu();  // the step's one host sync
  stats.loss = host[0].item<double>();
  stats.grad_norm = host[1].item<double>();
  auto times = host.narrow(0, 2, kPerRankRows * world).reshape({kPerRankRows, world});
  if (world > 1) stats.rank_skew_ms = (times[kStepMs].max() - times[kStepMs].min()).item<double>();
  if (const int stages = parallel.stages(); stages > 1) read_stages(times, stages, stats);
}

}  // namespace kiln
