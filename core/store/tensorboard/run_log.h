// What Kiln shows TensorBoard of a run (docs/dashboard.md, "TensorBoard"), and the event file a
// training run keeps as it goes ([metrics] tensorboard). `kiln runs export --format tensorboard`
// writes the same records from the store (core/app/presentation/tensorboard_export.h). No LibTorch.
//
// A TensorBoard log directory DIR holds one folder per run, DIR/<run name>/, so TensorBoard lists
// runs by name (a sweep's members nest under DIR/<sweep>/). A file there holds:
//   - the file version, then the resolved config as the text summary "config" (markdown: the
//     TOML as a code block), at the step the file starts after;
//   - one event per metrics row, at its step: train/<column> for every column of the row
//     (train/loss, train/lr, train/grad_norm, train/tokens_per_sec, train/dt_ms,
//     train/tokens_seen, train/loss_scale, train/skipped as 0 or 1, and train/rank_skew_ms and
//     train/bubble when the row has them), and train/<name> for each of the step's layer
//     measures (train/moe_1.load_imbalance; core/store/runs/layer_metrics.h);
//   - one event per eval, at its step: <split>/loss (val/loss, test/loss) for the evals made
//     during training, snapshot/<split>/loss for those `kiln eval` made of a snapshot;
//   - one event per task score, at its step: task/<task>/<metric> (task/kjv_cloze/acc_norm),
//     snapshot/task/<task>/<metric> for those `kiln eval --task` made.
// Values are float32, as TensorBoard's simple_value holds them.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/store/runs/writer.h"
#include "core/store/tensorboard/event_file.h"

namespace kiln {

std::vector<ScalarValue> metric_scalars(const MetricRow& row);
ScalarValue eval_scalar(const EvalRow& row);
ScalarValue task_scalar(const TaskScoreRow& row);

// Framed records (TFRecord), ready to append to a file.
std::string opening_records(double wall_time, int64_t step, const std::string& config_toml);
std::string metric_record(double wall_time, const MetricRow& row);
std::string eval_record(double wall_time, const EvalRow& row);
std::string task_record(double wall_time, const TaskScoreRow& row);

// DIR/<run name>.
std::string tensorboard_run_folder(const std::string& dir, const std::string& run_name);
// A UserError, naming `option` and `dir`, when `dir` cannot take event files: it is one of Kiln's
// own files, the run store `db` or a run's folder among them (core/store/runs/output_guard.h),
// or it or a folder above it is a file. Nothing for an empty `dir`: no file is written there.
void check_tensorboard_dir(const std::string& dir, const std::string& option,
                           const std::string& db);

// The event file of a run being trained: a new file in DIR/<run name>/ (made when missing)
// opened with opening_records at `start_step`, then, while it lives, every row `store` is given
// for `run_id`, written and flushed when the store commits it. Each row keeps the time it was
// given. Writing never stops the run: a failed write is said once through `warn`, and the file
// ends there (`kiln runs export --format tensorboard` writes it again from the store).
class TensorBoardLog : public RunStoreListener {
 public:
  // A UserError when the folder or the file cannot be made.
  TensorBoardLog(RunStore& store, int64_t run_id, const std::string& dir,
                 const std::string& run_name, const std::string& config_toml, int64_t start_step,
                 std::function<void(const std::string&)> warn);
  ~TensorBoardLog() override;  // stops listening and closes the file
  TensorBoardLog(const TensorBoardLog&) = delete;
  TensorBoardLog& operator=(const TensorBoardLog&) = delete;

  const std::string& path() const { return path_; }

  void metric_added(int64_t run_id, const MetricRow& row) override;
  void eval_added(int64_t run_id, const EvalRow& row) override;
  void task_score_added(int64_t run_id, const TaskScoreRow& row) override;
  void committed() override;

 private:
  // Writes and flushes `records`: 0, or the errno of a failure, after which the file is closed
  // and nothing more is written.
  int append(const std::string& records);

  RunStore& store_;
  int64_t run_id_;
  std::string path_;
  std::FILE* file_ = nullptr;  // null once a write failed
  std::function<void(const std::string&)> warn_;
  std::vector<std::pair<double, MetricRow>> metrics_;  // given, not yet committed
  std::vector<std::pair<double, EvalRow>> evals_;
  std::vector<std::pair<double, TaskScoreRow>> tasks_;
};

// Seconds since the Unix epoch, as an Event's wall_time.
double wall_time_now();

}  // namespace kiln
