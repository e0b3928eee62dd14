// The rows a run store is given (core/store/runs/writer.h): a new run, a step's metrics, an
// evaluation; and the listener that hears of each as it comes and of each commit that writes
// them. The columns they fill are documented in docs/run-store.md ("The schema").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/store/runs/layer_metrics.h"
#include "core/store/runs/task_scores.h"

namespace kiln {

struct NewRun {
  std::string name;
  std::string experiment;
  std::string config_toml;
  std::string config_hash;
  int64_t seed = 0;
  int64_t world_size = 1;
  int64_t planned_steps = 0;
  std::string git_commit;  // empty = unknown
  std::string host;
  std::string sweep;   // empty = not part of a sweep
  std::string uuid;    // the run's identity (core/store/runs/paths.h); empty = a fresh one
  std::string folder;  // absolute (RunPaths::for_new_run); empty = none (NULL)
};

struct MetricRow {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_sec = 0;
  double dt_ms = 0;
  int64_t tokens_seen = 0;
  double loss_scale = 1;  // the precision policy's loss scale for this step (1 = unscaled)
  bool skipped = false;   // the update was skipped (non-finite gradients)
  std::optional<double> rank_skew_ms;  // slowest minus fastest rank's step time; null: one rank
  std::optional<double> bubble;        // pipelines: share of stage time spent waiting
  // Data whose loss counts only some tokens (fine-tuning): the targets the step's loss counted.
  std::optional<int64_t> counted_tokens;
  // A blend of sources (data "blend"): the tokens the step took from each, as a JSON object
  // {"code": 3072, "web": 9216}; empty (NULL) for data of one source.
  std::string source_tokens;
  // Measures of the model's layers (Model::take_layer_measures): table layer_metrics.
  LayerMeasures layer_measures{};
};

struct EvalRow {
  int64_t step = 0;
  std::string split;
  double loss = 0;
  std::string checkpoint;  // the snapshot `kiln eval` loaded; empty for evals during training
  std::optional<int64_t> counted_tokens;  // as MetricRow's: the targets the loss counted
};

// Hears of every row a RunStore is given and of every commit that writes them, in that order:
// what keeps a copy of the rows elsewhere (a TensorBoard event file) buffers them as they come
// and writes them when the store commits them, so it costs a step no more than the store does.
class RunStoreListener {
 public:
  virtual ~RunStoreListener() = default;
  virtual void metric_added(int64_t run_id, const MetricRow& row) = 0;
  virtual void eval_added(int64_t run_id, const EvalRow& row) = 0;
  virtual void task_score_added(int64_t run_id, const TaskScoreRow& row) = 0;
  virtual void committed() = 0;
};

}  // namespace kiln
