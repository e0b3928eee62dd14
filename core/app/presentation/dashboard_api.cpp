#include "core/app/presentation/dashboard_api.h"

#include <sys/stat.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/app/presentation/dashboard_params.h"
#include "core/app/presentation/run_tables.h"
#include "core/app/presentation/seed_curves.h"
#include "core/app/presentation/seed_groups.h"
#include "core/store/history/queries.h"
#include "core/store/history/reader.h"
#include "core/store/history/rung_ladder.h"
#include "core/store/runs/layer_metrics.h"
#include "core/store/runs/task_scores.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

using Json = nlohmann::ordered_json;
using View = Json (*)(HistoryDb&, const DashboardParams&);

// At most this many metrics rows per answer, so that one request for a very long run stays a
// few megabytes; the page asks again from the last step it got ("more": true).
constexpr int64_t kRowsPerReply = 50000;
// A moving average wider than this is not a curve any more.
constexpr int64_t kMaxSmoothing = 10000;
// Runs one compare may name: 100 runs' curves already fill a chart; beyond that a request would
// only make the server read every run's metrics.
constexpr size_t kMaxCompareRuns = 200;

// A run the page asked for by id that the store no longer has: the page says so (404).
class RunGone : public UserError {
  using UserError::UserError;
};

// By id only: a run named "7" must not stand in for run 7.
RunRecord run_by_id(HistoryDb& db, int64_t id) {
  auto runs =
      read_run_records(db.connection(), {run_summary_select(db.columns()) + " WHERE id = ?", {id}});
  if (runs.empty()) {
    throw RunGone(fmt::format(
        "run {} is not in the run store '{}': it was deleted (`kiln runs rm`) or the store was "
        "replaced",
        id, db.path()));
  }
  return std::move(runs.front());
}

// A device:inode pair changes when another file is moved over the store's path; a URL is its
// own identity. "" when there is no file.
std::string store_identity(const std::string& db_path) {
  if (is_database_url(db_path)) return db_path;
  struct stat info {};
  if (::stat(db_path.c_str(), &info) != 0) return "";
  return fmt::format("{}:{}", static_cast<unsigned long long>(info.st_dev),
                     static_cast<unsigned long long>(info.st_ino));
}

// A chart's y value: six significant digits are more than a pixel can show and a third of the
// bytes of a double's shortest form, which matters at 100 runs of 10,000 steps. null when not
// finite (a gap in the line).
Json chart_value(double value) {
  if (!std::isfinite(value)) return nullptr;
  return std::stod(fmt::format("{:.6g}", value));
}

Json chart_value(const std::optional<double>& value) {
  return value ? chart_value(*value) : Json(nullptr);
}

Json exact_or_null(const std::optional<double>& value) {
  return value && std::isfinite(*value) ? Json(*value) : Json(nullptr);
}

// The row `kiln runs list --format json` prints for each run: the page's table shows the same
// numbers as the command line.
Json run_rows(const std::vector<RunRecord>& runs) {
  return Json::parse(format_run_list(runs, "json"));
}

Json runs_view(HistoryDb& db, const DashboardParams& params) {
  ListQuery query;
  query.where = param(params, "where");
  query.sort = param(params, "sort", "id");
  query.limit = kRowsPerReply + 1;  // one more, to know there are more than an answer holds
  std::vector<RunRecord> runs = list_runs(db, query);
  const bool more = static_cast<int64_t>(runs.size()) > kRowsPerReply;
  if (more) runs.pop_back();
  Json out = {{"runs", run_rows(runs)}, {"more", more}};
  if (!db.warning().empty()) out["warning"] = db.warning();
  return out;
}

Json metric_columns(HistoryDb& db, int64_t run_id, int64_t after, bool& more) {
  Json step = Json::array(), tokens = Json::array(), dt_ms = Json::array(), loss = Json::array(),
       lr = Json::array(), grad_norm = Json::array(), tokens_per_sec = Json::array();
  Statement rows(
      db.connection(),
      "SELECT step, tokens_seen, dt_ms, loss, lr, grad_norm, tokens_per_sec FROM metrics "
      "WHERE run_id = ? AND step > ? ORDER BY step LIMIT ?",
      {run_id, after, kRowsPerReply + 1});
  int64_t count = 0;
  while (rows.step()) {
    if (++count > kRowsPerReply) break;
    step.push_back(rows.integer(0));
    tokens.push_back(rows.is_null(1) ? Json(nullptr) : Json(rows.integer(1)));
    dt_ms.push_back(chart_value(rows.maybe_real(2)));
    loss.push_back(chart_value(rows.maybe_real(3)));
    lr.push_back(chart_value(rows.maybe_real(4)));
    grad_norm.push_back(chart_value(rows.maybe_real(5)));
    tokens_per_sec.push_back(chart_value(rows.maybe_real(6)));
  }
  more = count > kRowsPerReply;
  return {{"step", step},
          {"tokens", tokens},
          {"dt_ms", dt_ms},
          {"loss", loss},
          {"lr", lr},
          {"grad_norm", grad_norm},
          {"tokens_per_sec", tokens_per_sec}};
}

// Only the rows after the steps the page already has: a running run's poll reads what it
// committed since. A resume deletes the rows after its snapshot and writes them again, so the
// page starts over when the count of resumes changes.
Json metrics_view(HistoryDb& db, const DashboardParams& params) {
  const RunRecord run = run_by_id(db, required_id(params, "run"));
  bool more = false;
  const int64_t after = whole_param(params, "after", 0);
  Json rows = metric_columns(db, run.id, after, more);
  // The layer measures of the same steps as the rows (moe_1.aux_loss), one series per name.
  Json layers = Json::object();
  const int64_t last = rows["step"].empty() ? after : rows["step"].back().get<int64_t>();
  for (const LayerMetricRow& row : read_layer_metrics(db.connection(), run.id, after, last)) {
    Json& series = layers[row.name];
    series["step"].push_back(row.step);
    series["value"].push_back(chart_value(row.value));
  }
  Json eval_steps = Json::array(), eval_losses = Json::array();
  Statement evals(db.connection(),
                  "SELECT step, loss FROM evals WHERE run_id = ? AND split = 'val' AND "
                  "checkpoint = '' AND step > ? ORDER BY step",
                  {run.id, whole_param(params, "evals_after", 0)});
  while (evals.step()) {
    eval_steps.push_back(evals.integer(0));
    eval_losses.push_back(chart_value(evals.maybe_real(1)));
  }
  // Task scores during training (the page draws one chart per TASK.METRIC): all of them each
  // poll, as they are few.
  Json tasks = Json::object();
  for (const TaskScoreRow& row : read_task_scores(db.connection(), run.id)) {
    if (!row.checkpoint.empty()) continue;
    Json& series = tasks[row.task + "." + row.metric];
    series["step"].push_back(row.step);
    series["value"].push_back(chart_value(row.value));
    series["stderr"].push_back(chart_value(row.stderr_));
  }
  Statement resumes(db.connection(), "SELECT count(*) FROM resumes WHERE run_id = ?", {run.id});
  resumes.step();
  return {{"run", run_rows({run}).at(0)},
          {"resumes", resumes.integer(0)},
          {"more", more},
          {"rows", std::move(rows)},
          {"evals", {{"step", eval_steps}, {"loss", eval_losses}}},
          {"tasks", std::move(tasks)},
          {"layers", std::move(layers)}};
}

Json step_loss(const std::optional<StepLoss>& best) {
  if (!best) return nullptr;
  return {{"step", best->step}, {"loss", exact_or_null(best->loss)}};
}

Json run_view(HistoryDb& db, const DashboardParams& params) {
  const RunRecord run = run_by_id(db, required_id(params, "run"));
  Json evals = Json::array(), snapshots = Json::array(), resumes = Json::array();
  for (const auto& e : run_evals(db, run.id)) {
    evals.push_back({{"step", e.step},
                     {"split", e.split},
                     {"checkpoint", e.checkpoint},
                     {"loss", exact_or_null(e.loss)},
                     {"perplexity", exact_or_null(e.perplexity)}});
  }
  for (const auto& s : run_snapshots(db, run.id)) {
    snapshots.push_back(
        {{"label", s.label}, {"step", s.step}, {"path", s.path}, {"created_at", s.created_at}});
  }
  for (const auto& r : run_resumes(db, run.id)) {
    resumes.push_back(
        {{"from_step", r.from_step}, {"changes", r.changes}, {"created_at", r.created_at}});
  }
  Json mixture = Json::array();
  for (const auto& row : data_mixture_table(db, run).rows) {
    mixture.push_back({{"source", row[0]},
                       {"weight", row[1]},
                       {"asked", row[2]},
                       {"tokens", row[3]},
                       {"realised", row[4]}});
  }
  return {{"run", run_rows({run}).at(0)},
          {"experiment", run.experiment},
          {"git_commit", run.git_commit},
          {"host", run.host},
          {"folder", run.folder},
          {"error", run.error},
          {"best_loss", step_loss(best_train_loss(db, run.id))},
          {"best_val", step_loss(best_val_loss(db, run.id))},
          {"config", run.config},
          {"evals", evals},
          {"mixture", mixture},
          {"snapshots", snapshots},
          {"resumes", resumes}};
}

// The mean curve of each group of seeds in its band, and the grouped report of
// `kiln runs compare --group-by`.
void add_groups(HistoryDb& db, const std::vector<RunRecord>& runs, const DashboardParams& params,
                Json& out) {
  CurveRequest request;
  request.group_by = list_param(params, "group_by");
  request.metric = param(params, "metric", "loss");
  request.x = param(params, "x", "step");
  request.band = param(params, "band", "ci");
  request.smooth = static_cast<int>(
      std::min<int64_t>(std::max<int64_t>(whole_param(params, "smooth", 1), 1), kMaxSmoothing));
  Json groups = Json::array();
  for (const auto& series : group_series(db, runs, request)) {
    Json x = Json::array(), mean = Json::array(), low = Json::array(), high = Json::array();
    for (size_t i = 0; i < series.x.size(); ++i) {
      x.push_back(series.x[i]);
      mean.push_back(chart_value(series.y[i]));
      low.push_back(i < series.band_low.size() ? chart_value(series.band_low[i]) : Json(nullptr));
      high.push_back(i < series.band_high.size() ? chart_value(series.band_high[i])
                                                 : Json(nullptr));
    }
    groups.push_back(
        {{"label", series.name}, {"x", x}, {"mean", mean}, {"low", low}, {"high", high}});
  }
  out["groups"] = std::move(groups);
  out["report"] = grouped_report(db, group_runs(runs, request.group_by), {});
}

Json compare_view(HistoryDb& db, const DashboardParams& params) {
  const std::vector<std::string> ids = list_param(params, "runs");
  if (ids.size() > kMaxCompareRuns) {
    throw UserError(fmt::format("runs= names {} runs; a compare takes at most {}: select fewer",
                                ids.size(), kMaxCompareRuns));
  }
  std::vector<RunRecord> runs;
  for (const auto& id : ids)
    runs.push_back(run_by_id(db, parse_whole("runs", id)));
  if (runs.empty()) throw UserError("runs= names no run: pass run ids, as in runs=1,2");
  Json names = Json::array(), differing = Json::array();
  for (const auto& run : runs)
    names.push_back({{"id", run.id}, {"name", run.name}});
  for (const auto& [key, values] : differing_config(runs))
    differing.push_back({{"key", key}, {"values", values}});
  // Metrics to group by beside the fixed ones: the store's layer measures (moe_1.aux_loss).
  Json out = {{"runs", names},
              {"differing", differing},
              {"layer_measures", layer_metric_names(db.connection())}};
  if (!list_param(params, "group_by").empty()) add_groups(db, runs, params, out);
  return out;
}

// An asha sweep's rung ladder (core/store/history/rung_ladder.h), from the shape its workers
// recorded; a sweep without one (a grid, or a store from before ladders) is a 400.
Json ladder_view(HistoryDb& db, const DashboardParams& params) {
  const std::string sweep = param(params, "sweep");
  if (sweep.empty()) throw UserError("/api/ladder needs ?sweep=NAME, an asha sweep's name");
  const std::optional<LadderShape> shape = find_ladder_shape(db.connection(), sweep);
  if (!shape) {
    throw UserError(fmt::format(
        "sweep '{}' has no rung ladder in this store: only an asha search has one", sweep));
  }
  Json rungs = Json::array();
  for (const LadderRung& rung : read_sweep_ladder(db, sweep, *shape, /*ended=*/false)) {
    Json members = Json::array();
    for (const LadderEntry& e : rung.entries) {
      members.push_back({{"run", e.run_id},
                         {"name", e.name},
                         {"value", chart_value(e.value)},
                         {"uncooled", e.uncooled ? chart_value(*e.uncooled) : Json()},
                         {"place", e.place},
                         {"state", e.state}});
    }
    rungs.push_back({{"step", rung.step}, {"keep", rung.keep}, {"members", members}});
  }
  return {{"sweep", sweep},
          {"metric", shape->metric},
          {"mode", shape->maximize ? "max" : "min"},
          {"reduction_factor", shape->reduction_factor},
          {"rungs", rungs}};
}

std::string dump(const Json& body) {
  // A name or config holding bytes that are not UTF-8 is shown with U+FFFD, not refused.
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

DashboardReply dashboard_api(const std::string& db_path, const std::string& endpoint,
                             const DashboardParams& params) {
  static const std::map<std::string, View> views = {{"runs", runs_view},
                                                    {"metrics", metrics_view},
                                                    {"run", run_view},
                                                    {"compare", compare_view},
                                                    {"ladder", ladder_view}};
  Json body = {{"store", store_identity(db_path)}};
  auto fail = [&](int status, const std::string& line) {
    body["error"] = line;
    return DashboardReply{status, dump(body)};
  };
  auto view = views.find(endpoint);
  if (view == views.end()) {
    return fail(404, fmt::format("kiln: error: /api/{} is no endpoint: the dashboard has "
                                 "/api/runs, /api/metrics, /api/run, /api/compare and "
                                 "/api/ladder",
                                 endpoint));
  }
  try {
    // Opened anew for each request: read-only, and never a store replaced since the last one.
    HistoryDb db(db_path);
    Json answer = view->second(db, params);
    for (auto& [key, value] : answer.items())
      body[key] = std::move(value);
    return {200, dump(body)};
  } catch (const RunGone& e) {
    body["gone"] = true;
    return fail(404, std::string("kiln: error: ") + e.what());
  } catch (const UserError& e) {
    return fail(store_may_exist(db_path) ? 400 : 503, std::string("kiln: error: ") + e.what());
  } catch (const std::exception& e) {
    return fail(500, std::string("kiln: internal error: ") + e.what());
  }
}

}  // namespace kiln
