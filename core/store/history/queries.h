// What `kiln runs ...`, `kiln report` and the sweep summary ask of a run store, and the one thing
// they change (`kiln runs rm`): all the SQL of the read side, returning plain records that
// core/app/presentation/run_tables.h turns into text. No LibTorch. Which runs a command means
// (list, find, match) is in core/store/history/selection.h, included here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/store/history/reader.h"
#include "core/store/history/selection.h"
#include "core/store/runs/lookup.h"
#include "core/store/runs/writer.h"

namespace kiln {

// A run's rows, read back; a value the row lacks is empty.
struct MetricRecord {
  int64_t step = 0;
  std::optional<double> loss, lr, grad_norm, tokens_per_sec, dt_ms;
  std::optional<int64_t> tokens_seen;
};
struct EvalRecord {
  int64_t step = 0;
  std::string split, checkpoint;
  std::optional<double> loss, perplexity;
  std::optional<int64_t> counted_tokens;  // fine-tuning data: the targets the loss counted
};
struct SnapshotRecord {
  std::string label;
  int64_t step = 0;
  std::string path, created_at;
};
struct ResumeRecord {
  int64_t from_step = 0;
  std::string changes, created_at;
};
struct StepLoss {
  int64_t step = 0;
  std::optional<double> loss;
};

std::vector<MetricRecord> run_metrics(HistoryDb& db, int64_t run_id);  // by step
// Every column of a run's metrics rows as RunStore::add_metric was given them, by step: what
// `kiln runs export --format tensorboard` writes. A column an older store lacks reads as
// MetricRow's default (loss_scale 1, not skipped, no rank skew or bubble); NULL (NaN) numbers
// as NaN.
std::vector<MetricRow> run_metric_rows(HistoryDb& db, int64_t run_id);
std::optional<MetricRecord> last_metrics(HistoryDb& db, int64_t run_id);
std::vector<EvalRecord> run_evals(HistoryDb& db, int64_t run_id);  // by step, split, checkpoint
std::vector<SnapshotRecord> run_snapshots(HistoryDb& db, int64_t run_id);  // by step, label
std::vector<ResumeRecord> run_resumes(HistoryDb& db, int64_t run_id);      // oldest first
// The lowest training loss and the lowest validation loss, each with its step (the first step
// on a tie); none without such a row.
std::optional<StepLoss> best_train_loss(HistoryDb& db, int64_t run_id);
std::optional<StepLoss> best_val_loss(HistoryDb& db, int64_t run_id);

// Loss curves compared bit for bit, step by step.
struct CurveComparison {
  bool identical = false;                // over every step either run has
  int64_t common_steps = 0;              // steps both runs have, up to the first difference
  int64_t first_difference = 0;          // the step, when not identical
  std::optional<double> loss_a, loss_b;  // at that step; none when the run has no such row
};
CurveComparison compare_loss_curves(HistoryDb& db, int64_t run_a, int64_t run_b);

// One metric of one run as points: metric loss | val_loss | lr | grad_norm | tokens_per_sec,
// x step | tokens | time (seconds of step time so far). A missing value is NaN.
struct Curve {
  std::vector<double> x, y;
};
Curve load_curve(HistoryDb& db, const RunRecord& run, const std::string& metric,
                 const std::string& x_axis);

// The run's folder (paths_of, core/store/runs/paths.h): where it keeps its snapshots and lock;
// "" for a legacy name that could reach outside run.out_dir.
std::string run_folder(const RunRecord& run);

}  // namespace kiln
