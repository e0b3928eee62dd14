#include "core/store/history/queries.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/store/runs/layer_metrics.h"
#include "core/store/runs/paths.h"
#include "core/store/runs/task_scores.h"
#include "core/store/runs/writer.h"
#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

namespace {

// Every row `sql` selects for `run_id`, each made by `read` from the statement standing on it.
template <class Read>
auto selected_rows(HistoryDb& db, const std::string& sql, int64_t run_id, Read read) {
  Statement q(db.connection(), sql, {run_id});
  std::vector<decltype(read(q))> rows;
  while (q.step())
    rows.push_back(read(q));
  return rows;
}

// A row of (step, loss).
StepLoss read_step_loss(const Statement& q) {
  return {q.integer(0), q.maybe_real(1)};
}

std::vector<StepLoss> loss_rows(HistoryDb& db, int64_t run_id) {
  return selected_rows(db, "SELECT step, loss FROM metrics WHERE run_id = ? ORDER BY step", run_id,
                       read_step_loss);
}

std::optional<StepLoss> lowest_loss(HistoryDb& db, const std::string& sql, int64_t run_id) {
  const std::vector<StepLoss> rows = selected_rows(db, sql, run_id, read_step_loss);
  if (rows.empty()) return std::nullopt;
  return rows.front();
}

const char* const kSelectMetrics =
    "SELECT step, loss, lr, grad_norm, tokens_per_sec, dt_ms, tokens_seen FROM metrics "
    "WHERE run_id = ?";

std::vector<MetricRecord> read_metrics(HistoryDb& db, const std::string& sql, int64_t run_id) {
  return selected_rows(db, sql, run_id, [](const Statement& q) {
    return MetricRecord{q.integer(0),    q.maybe_real(1), q.maybe_real(2),   q.maybe_real(3),
                        q.maybe_real(4), q.maybe_real(5), q.maybe_integer(6)};
  });
}

}  // namespace

std::vector<MetricRecord> run_metrics(HistoryDb& db, int64_t run_id) {
  return read_metrics(db, std::string(kSelectMetrics) + " ORDER BY step", run_id);
}

std::vector<MetricRow> run_metric_rows(HistoryDb& db, int64_t run_id) {
  std::set<std::string> columns;
  Statement info(db.connection(), "SELECT name FROM pragma_table_info('metrics')");
  while (info.step())
    columns.insert(info.text(0));
  auto column_or = [&](const std::string& name, const char* absent) {
    return columns.count(name) ? name : std::string(absent);
  };
  const std::string sql = fmt::format(
      "SELECT step, loss, lr, grad_norm, tokens_per_sec, dt_ms, tokens_seen, coalesce({}, 1), {}, "
      "{}, {}, {}, {} FROM metrics WHERE run_id = ? ORDER BY step",
      column_or("loss_scale", "1"), column_or("skipped", "0"), column_or("rank_skew_ms", "NULL"),
      column_or("bubble", "NULL"), column_or("counted_tokens", "NULL"),
      column_or("source_tokens", "NULL"));
  return selected_rows(db, sql, run_id, [](const Statement& q) {
    MetricRow row;
    row.step = q.integer(0);
    row.loss = q.real(1);
    row.lr = q.real(2);
    row.grad_norm = q.real(3);
    row.tokens_per_sec = q.real(4);
    row.dt_ms = q.real(5);
    row.tokens_seen = q.integer(6);
    row.loss_scale = q.real(7);
    row.skipped = q.integer(8) != 0;
    row.rank_skew_ms = q.maybe_real(9);
    row.bubble = q.maybe_real(10);
    row.counted_tokens = q.maybe_integer(11);
    row.source_tokens = q.text(12);
    return row;
  });
}

std::optional<MetricRecord> last_metrics(HistoryDb& db, int64_t run_id) {
  auto rows = read_metrics(db, std::string(kSelectMetrics) + " ORDER BY step DESC LIMIT 1", run_id);
  if (rows.empty()) return std::nullopt;
  return rows[0];
}

std::vector<EvalRecord> run_evals(HistoryDb& db, int64_t run_id) {
  // A store older than migration 8 (read-only, so not migrated) has no counted_tokens.
  bool has_counted = false;
  Statement info(db.connection(), "SELECT name FROM pragma_table_info('evals')");
  while (info.step())
    has_counted = has_counted || info.text(0) == "counted_tokens";
  const std::string sql = fmt::format(
      "SELECT step, split, checkpoint, loss, perplexity, {} FROM evals "
      "WHERE run_id = ? ORDER BY step, split, checkpoint",
      has_counted ? "counted_tokens" : "NULL");
  return selected_rows(db, sql, run_id, [](const Statement& q) {
    return EvalRecord{q.integer(0),    q.text(1),       q.text(2),
                      q.maybe_real(3), q.maybe_real(4), q.maybe_integer(5)};
  });
}

std::vector<SnapshotRecord> run_snapshots(HistoryDb& db, int64_t run_id) {
  return selected_rows(db,
                       "SELECT label, step, path, created_at FROM snapshots WHERE run_id = ? "
                       "ORDER BY step, label",
                       run_id, [](const Statement& q) {
                         return SnapshotRecord{q.text(0), q.integer(1), q.text(2), q.text(3)};
                       });
}

std::vector<ResumeRecord> run_resumes(HistoryDb& db, int64_t run_id) {
  return selected_rows(db,
                       "SELECT from_step, coalesce(changes, ''), created_at FROM resumes "
                       "WHERE run_id = ? ORDER BY created_at, from_step",
                       run_id, [](const Statement& q) {
                         return ResumeRecord{q.integer(0), q.text(1), q.text(2)};
                       });
}

std::optional<StepLoss> best_train_loss(HistoryDb& db, int64_t run_id) {
  return lowest_loss(db,
                     "SELECT step, loss FROM metrics WHERE run_id = ? AND loss IS NOT NULL "
                     "ORDER BY loss, step LIMIT 1",
                     run_id);
}

std::optional<StepLoss> best_val_loss(HistoryDb& db, int64_t run_id) {
  return lowest_loss(db,
                     "SELECT step, loss FROM evals WHERE run_id = ? AND split = 'val' "
                     "ORDER BY loss, step LIMIT 1",
                     run_id);
}

CurveComparison compare_loss_curves(HistoryDb& db, int64_t run_a, int64_t run_b) {
  const std::vector<StepLoss> a = loss_rows(db, run_a), b = loss_rows(db, run_b);
  CurveComparison c;
  size_t i = 0, j = 0;
  for (; i < a.size() && j < b.size(); ++i, ++j) {
    if (a[i].step != b[j].step || a[i].loss != b[j].loss) break;
    ++c.common_steps;
  }
  if (i == a.size() && j == b.size()) {
    c.identical = true;
    return c;
  }
  // The first step where they part: a differing loss, or a step only one of them has.
  constexpr int64_t kNoStep = std::numeric_limits<int64_t>::max();
  const int64_t step_a = i < a.size() ? a[i].step : kNoStep;
  const int64_t step_b = j < b.size() ? b[j].step : kNoStep;
  c.first_difference = std::min(step_a, step_b);
  if (step_a == c.first_difference) c.loss_a = a[i].loss.value_or(NAN);
  if (step_b == c.first_difference) c.loss_b = b[j].loss.value_or(NAN);
  return c;
}

Curve load_curve(HistoryDb& db, const RunRecord& run, const std::string& metric,
                 const std::string& x_axis) {
  static const std::map<std::string, std::string> columns = {{"loss", "loss"},
                                                             {"val_loss", "NULL"},
                                                             {"lr", "lr"},
                                                             {"grad_norm", "grad_norm"},
                                                             {"tokens_per_sec", "tokens_per_sec"}};
  std::string task, task_metric;
  const std::vector<std::string> layer_names = layer_metric_names(db.connection());
  const bool layered =  // a layer's measure (moe_1.aux_loss), named as a task's metric is
      std::find(layer_names.begin(), layer_names.end(), metric) != layer_names.end();
  const bool scored = !layered && split_task_metric(metric, task, task_metric);  // TASK.METRIC
  if (!columns.count(metric) && !scored && !layered) {
    throw UserError(fmt::format(
        "--metric {} is not a metric: use loss, val_loss, lr, grad_norm, tokens_per_sec or a "
        "task's TASK.METRIC (such as kjv_cloze.acc) or a layer's measure (such as moe_1.aux_loss)",
        metric));
  }
  if (x_axis != "step" && x_axis != "tokens" && x_axis != "time") {
    throw UserError(fmt::format("--x {} is not an axis: use step, tokens or time", x_axis));
  }
  // From evals, task_scores or layer_metrics.
  const bool evaluated = metric == "val_loss" || scored || layered;
  Statement q(db.connection(),
              "SELECT step, tokens_seen, dt_ms, " + (evaluated ? "NULL" : columns.at(metric)) +
                  " FROM metrics WHERE run_id = ? ORDER BY step",
              {run.id});
  Curve curve;
  std::map<int64_t, double> x_at;  // step -> x, for the evals
  double seconds = 0;
  while (q.step()) {
    seconds += q.is_null(2) ? 0.0 : q.real(2) / 1000.0;
    const double x = x_axis == "step"     ? static_cast<double>(q.integer(0))
                     : x_axis == "tokens" ? q.real(1)
                                          : seconds;
    x_at[q.integer(0)] = x;
    if (evaluated) continue;
    curve.x.push_back(x);
    curve.y.push_back(q.real(3));
  }
  if (!evaluated) return curve;
  if (scored && !has_table(db.connection(), "task_scores")) return curve;
  Statement evals(
      db.connection(),
      layered  ? "SELECT step, value FROM layer_metrics WHERE run_id = ? AND name = ? ORDER BY step"
      : scored ? "SELECT step, value FROM task_scores WHERE run_id = ? AND task = ? AND "
                 "metric = ? AND checkpoint = '' ORDER BY step"
               : "SELECT step, loss FROM evals WHERE run_id = ? AND split = 'val' AND "
                 "checkpoint = '' ORDER BY step",
      layered  ? std::vector<SqlValue>{run.id, metric}
      : scored ? std::vector<SqlValue>{run.id, task, task_metric}
               : std::vector<SqlValue>{run.id});
  while (evals.step()) {
    const int64_t step = evals.integer(0);
    if (!x_at.count(step) && x_axis != "step") continue;
    curve.x.push_back(x_at.count(step) ? x_at[step] : static_cast<double>(step));
    curve.y.push_back(evals.real(1));
  }
  return curve;
}

std::string run_folder(const RunRecord& run) {
  const auto paths = paths_of(run);
  return paths ? paths->folder() : "";
}

}  // namespace kiln
