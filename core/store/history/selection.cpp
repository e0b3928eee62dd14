// Which runs a command means (core/store/history/selection.h): the key space --where and --sort
// name, the check that each config key they name is one some run has, and the lookups by name,
// id, sweep and glob.
#include "core/store/history/selection.h"

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/config/canonical.h"
#include "core/store/runs/layer_metrics.h"
#include "core/store/runs/task_scores.h"
#include "core/store/where/expr.h"
#include "core/store/where/sql.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// The keys --where and --sort can name besides config keys: the summary's columns, and the
// metrics a point or an aggregate can name. The SQL is our text: the summary's column, the
// metric's column, or the split of the eval.
KeySpace summary_keys(HistoryDb& db, const std::vector<std::string>& declared_task_metrics) {
  KeySpace keys{{{"id", "id"},
                 {"name", "name"},
                 {"status", "status"},
                 {"sweep", "sweep"},
                 {"created_at", "created_at"},
                 {"finished_at", "finished_at"},
                 {"experiment", "experiment"},
                 {"host", "host"},
                 {"config_hash", "config_hash"},
                 {"steps", "steps"},
                 {"planned_steps", "planned_steps"},
                 {"final_loss", "final_loss"},
                 {"best_loss", "best_loss"},
                 {"best_val", "best_val"},
                 {"tokens_per_sec", "tokens_per_sec"},
                 {"duration", "duration"}},
                "kiln_config(config, ?)",
                {{"loss", "loss"},
                 {"lr", "lr"},
                 {"grad_norm", "grad_norm"},
                 {"tokens_per_sec", "tokens_per_sec"},
                 {"dt_ms", "dt_ms"},
                 {"tokens_seen", "tokens_seen"},
                 {"loss_scale", "loss_scale"}},
                {{"val_loss", "'val'"}, {"test_loss", "'test'"}},
                "summary.id"};
  std::vector<std::string> task_metrics = task_metric_names(db.connection());
  task_metrics.insert(task_metrics.end(), declared_task_metrics.begin(),
                      declared_task_metrics.end());
  for (const std::string& name : task_metrics) {
    std::string task, metric;
    split_task_metric(name, task, metric);
    keys.task_metrics[name] =
        fmt::format("task = {} AND metric = {}", single_quoted(task), single_quoted(metric));
  }
  // A cooldown probe's val loss at a rung (rung_probes, migration 15), beside the trajectory's
  // own val_loss at that step.
  if (has_table(db.connection(), "rung_probes")) keys.probe_values["cooled_val_loss"] = "val_loss";
  for (const std::string& name : layer_metric_names(db.connection()))
    keys.layer_metrics[name] = "name = " + single_quoted(name);
  // metrics.loss_scale arrives with metrics.skipped (schema version 2); an older store has none.
  if (!db.has_skipped_column()) keys.metrics["loss_scale"] = "NULL";
  if (db.connection().dialect() == SqlDialect::kPostgres) {
    // One SQL type per expression there: the jsonb copy of the config, looked up as text or as
    // a number (core/store/db/postgres_dialect.cpp).
    const char* const json = "(SELECT config_json FROM runs WHERE runs.id = summary.id)";
    keys.config_sql = fmt::format("kiln_config_text({}, ?)", json);
    keys.config_number_sql = fmt::format("kiln_config_number({}, ?)", json);
  }
  return keys;
}

std::vector<RunRecord> read_records(HistoryDb& db, const std::string& clauses,
                                    const std::vector<SqlValue>& params) {
  return read_run_records(db.connection(), {run_summary_select(db.columns()) + clauses, params});
}

// A config key no stored run has is a typo, not a filter that happens to match nothing.
void check_config_keys(HistoryDb& db, const std::vector<KeyUse>& uses, const std::string& where) {
  if (uses.empty()) return;
  std::map<std::string, std::string> known;    // key -> a value some run has that is not a number
  std::map<std::string, std::string> example;  // key -> a value some run has
  Statement configs(db.connection(), "SELECT DISTINCT config FROM runs");
  while (configs.step()) {
    for (const auto& [key, value] : flatten_config(configs.text(0))) {
      example.emplace(key, value);
      char* end = nullptr;
      std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0') known[key] = value;
      known.emplace(key, "");
    }
  }
  if (known.empty()) return;  // no run yet: nothing to match, nothing to check against
  for (const auto& use : uses) {
    // A number key compared with a quoted text would match nothing, silently: refused.
    if (known.count(use.key) && known.at(use.key).empty() && !use.text.empty()) {
      throw UserError(fmt::format(
          "{}: config key '{}' holds numbers (such as {}) but is compared with the text '{}'{}: "
          "write the number without quotes",
          where, use.key, example.at(use.key), use.text,
          use.column ? fmt::format(" (column {})", use.column) : ""));
    }
    if (known.count(use.key)) continue;
    std::vector<std::string> keys;
    for (const auto& entry : known)
      keys.push_back(entry.first);
    const std::string guess = nearest(use.key, keys);
    throw UserError(fmt::format(
        "{}: no run has the config key '{}'{}: {}`kiln runs show RUN` lists a run's config", where,
        use.key, use.column ? fmt::format(" (column {})", use.column) : "",
        guess.empty() ? "" : fmt::format("did you mean '{}'? ", guess)));
  }
}

}  // namespace

std::vector<RunRecord> list_runs(HistoryDb& db, const ListQuery& query) {
  const KeySpace keys = summary_keys(db, query.declared_task_metrics);
  SqlFragment sql;
  if (query.where.find_first_not_of(" \t\n") != std::string::npos) {
    auto ast = parse_where(query.where, keys);
    check_config_keys(db, config_keys_of(*ast), fmt::format("--where \"{}\"", query.where));
    sql = where_sql(*ast, keys);
    sql.sql = " WHERE " + sql.sql;
  }
  const SortKey sort = parse_sort(query.sort, keys, query.sort_option);
  if (sort.key.kind == WhereKey::Kind::kConfig) {
    check_config_keys(db, {{sort.key.name, 0, ""}},
                      fmt::format("{} '{}'", query.sort_option, query.sort));
  }
  SqlFragment order = sort_sql(sort, keys);
  sql.sql += " ORDER BY " + order.sql + ", id";
  sql.params.insert(sql.params.end(), order.params.begin(), order.params.end());
  if (query.limit > 0) {
    sql.sql += " LIMIT ?";
    sql.params.emplace_back(query.limit);
  }
  return read_records(db, sql.sql, sql.params);
}

RunRecord find_run_record(HistoryDb& db, const std::string& name_or_id) {
  return require_run(db.connection(), name_or_id, db.columns());
}

std::vector<RunRecord> match_runs(HistoryDb& db, const std::vector<std::string>& patterns) {
  std::vector<RunRecord> out;
  std::set<int64_t> seen;
  for (const auto& pattern : patterns) {
    std::vector<RunRecord> found;
    if (auto run = lookup_run(db.connection(), pattern, db.columns())) {
      found.push_back(std::move(*run));
    } else {
      found = read_records(db, " WHERE sweep = ? OR name GLOB ? ORDER BY id", {pattern, pattern});
    }
    if (found.empty()) {
      throw UserError(
          fmt::format("'{}' is no run name, id, sweep or glob of names in '{}': `kiln runs list "
                      "--db {}` lists the runs",
                      pattern, db.path(), db.path()));
    }
    for (auto& r : found) {
      if (seen.insert(r.id).second) out.push_back(std::move(r));
    }
  }
  return out;
}

MetricPoint parse_metric_point(HistoryDb& db, const std::string& text, const std::string& option) {
  const KeySpace keys = summary_keys(db, {});
  const SortKey parsed = parse_sort(text, keys, option);
  if (parsed.descending || parsed.key.kind != WhereKey::Kind::kPoint) {
    throw UserError(
        fmt::format("{} '{}': expected METRIC@step=S or METRIC@tokens=T, e.g. val_loss@step=200",
                    option, text));
  }
  return {text, parsed.key, !keys.metrics.count(parsed.key.name)};
}

PointReading read_metric_point(HistoryDb& db, int64_t run_id, const MetricPoint& point) {
  const KeySpace keys = summary_keys(db, {});
  SqlFragment value = value_sql(point.key, keys);
  value.params.emplace_back(run_id);
  Statement read(db.connection(),
                 "SELECT " + value.sql + " FROM runs AS summary WHERE summary.id = ?",
                 value.params);
  PointReading out;
  if (read.step()) out.value = read.maybe_real(0);
  if (out.value) return out;
  Statement reached(db.connection(),
                    point.key.at_tokens ? "SELECT max(tokens_seen) FROM metrics WHERE run_id = ?"
                                        : "SELECT max(step) FROM metrics WHERE run_id = ?",
                    {run_id});
  if (reached.step()) out.reached = reached.maybe_real(0).value_or(0);
  KeySpace of_run = keys;
  of_run.run_id = std::to_string(run_id);  // a number of ours, not input
  Statement steps(db.connection(), metric_steps_sql(point.key.name, of_run).sql);
  while (steps.step())
    out.steps.push_back(steps.integer(0));
  return out;
}

}  // namespace kiln
