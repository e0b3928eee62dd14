#include "core/app/presentation/tensorboard_export.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "core/store/runs/layer_metrics.h"
#include "core/store/runs/paths.h"
#include "core/store/tensorboard/run_log.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/process.h"

namespace kiln {

namespace {

// runs.created_at ("2026-11-23T17:00:01.250Z", UTC) as seconds since the epoch; none for text
// of another form.
std::optional<double> epoch_seconds(const std::string& created_at) {
  std::tm utc{};
  double seconds = 0;
  if (std::sscanf(created_at.c_str(), "%d-%d-%dT%d:%d:%lf", &utc.tm_year, &utc.tm_mon, &utc.tm_mday,
                  &utc.tm_hour, &utc.tm_min, &seconds) != 6) {
    return std::nullopt;
  }
  utc.tm_year -= 1900;
  utc.tm_mon -= 1;
  return static_cast<double>(::timegm(&utc)) + seconds;
}

EvalRow eval_row(const EvalRecord& e) {
  return EvalRow{e.step, e.split, e.loss.value_or(std::numeric_limits<double>::quiet_NaN()),
                 e.checkpoint, e.counted_tokens};
}

// The run's records in step order, each eval after its step's metrics row, each at the time its
// step ended: the run's start plus the step times so far.
std::string run_records(HistoryDb& db, const RunRecord& run) {
  const double start = epoch_seconds(run.created_at).value_or(wall_time_now());
  std::string out = opening_records(start, 0, run.config);
  const std::vector<EvalRecord> evals = run_evals(db, run.id);
  const std::vector<TaskScoreRow> tasks = read_task_scores(db.connection(), run.id);
  size_t next_eval = 0, next_task = 0;
  double elapsed = 0;
  // The evals and task scores up to `step` (all that are left for the largest).
  auto evals_up_to = [&](int64_t step) {
    for (; next_eval < evals.size() && evals[next_eval].step <= step; ++next_eval)
      out += eval_record(start + elapsed, eval_row(evals[next_eval]));
    for (; next_task < tasks.size() && tasks[next_task].step <= step; ++next_task)
      out += task_record(start + elapsed, tasks[next_task]);
  };
  const std::vector<LayerMetricRow> layers = read_layer_metrics(db.connection(), run.id);
  size_t next_layer = 0;
  for (MetricRow row : run_metric_rows(db, run.id)) {
    for (; next_layer < layers.size() && layers[next_layer].step <= row.step; ++next_layer) {
      const LayerMetricRow& measure = layers[next_layer];
      if (measure.step == row.step) row.layer_measures.emplace_back(measure.name, measure.value);
    }
    if (std::isfinite(row.dt_ms)) elapsed += row.dt_ms / 1000.0;
    out += metric_record(start + elapsed, row);
    evals_up_to(row.step);
  }
  evals_up_to(std::numeric_limits<int64_t>::max());
  return out;
}

void check_run_folders(const std::vector<RunRecord>& runs, const std::string& dir) {
  for (const auto& run : runs) {
    // A run made before Kiln's run-name rule, in a store edited by hand, may have any name.
    if (!is_contained_name(run.name)) {
      throw UserError(fmt::format(
          "run '{}' has a name that cannot be a folder under -o {}: export the other runs",
          run.name, dir));
    }
    const std::string folder = tensorboard_run_folder(dir, run.name);
    check_tensorboard_dir(folder, "-o", "");  // a file where the folder of a nested name goes
    if (holds_event_files(folder)) {
      throw UserError(fmt::format(
          "-o {}: '{}' holds event files already, and TensorBoard would show their points and run "
          "'{}''s as one run: remove them, or export to another folder",
          dir, folder, run.name));
    }
  }
}

}  // namespace

std::vector<std::string> export_tensorboard(HistoryDb& db, const std::vector<RunRecord>& runs,
                                            const std::string& dir) {
  check_tensorboard_dir(dir, "-o", db.path());
  check_run_folders(runs, dir);
  std::vector<std::string> written;
  for (const auto& run : runs) {
    const std::string path =
        new_event_file_path(tensorboard_run_folder(dir, run.name), host_name());
    write_file_atomic(path, run_records(db, run));
    written.push_back(path);
  }
  return written;
}

}  // namespace kiln
