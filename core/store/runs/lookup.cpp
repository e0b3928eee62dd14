#include "core/store/runs/lookup.h"

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

RunColumns run_columns(Connection& db) {
  RunColumns columns{false, false};
  Statement names(db, "SELECT name FROM pragma_table_info('runs')");
  while (names.step()) {
    columns.sweep = columns.sweep || names.text(0) == "sweep";
    columns.identity = columns.identity || names.text(0) == "folder";
  }
  return columns;
}

std::string run_summary_select(const RunColumns& columns) {
  // Each optional column's expression is one of two fixed strings.
  return fmt::format(R"sql(
      WITH summary AS (
        SELECT r.id AS id, r.name AS name, r.status AS status, {} AS sweep, {} AS uuid,
               {} AS folder,
               r.created_at AS created_at, coalesce(r.finished_at, '') AS finished_at,
               coalesce(r.experiment, '') AS experiment, r.config AS config,
               r.config_hash AS config_hash, coalesce(r.git_commit, '') AS git_commit,
               coalesce(r.host, '') AS host, coalesce(r.error, '') AS error,
               r.steps AS planned_steps, r.world_size AS world_size,
               coalesce((SELECT max(step) FROM metrics WHERE run_id = r.id), 0) AS steps,
               (SELECT loss FROM metrics WHERE run_id = r.id ORDER BY step DESC LIMIT 1)
                 AS final_loss,
               (SELECT min(loss) FROM metrics WHERE run_id = r.id) AS best_loss,
               (SELECT min(loss) FROM evals WHERE run_id = r.id AND split = 'val') AS best_val,
               (SELECT avg(tokens_per_sec) FROM metrics WHERE run_id = r.id AND step > 1)
                 AS tokens_per_sec,
               (julianday(r.finished_at) - julianday(r.created_at)) * 86400.0 AS duration
        FROM runs r)
      SELECT id, name, status, sweep, created_at, finished_at, experiment, config, config_hash,
             git_commit, host, error, planned_steps, steps, final_loss, best_loss, best_val,
             tokens_per_sec, duration, uuid, folder, world_size
      FROM summary)sql",
                     columns.sweep ? "coalesce(r.sweep, '')" : "''",
                     columns.identity ? "coalesce(r.uuid, '')" : "''",
                     columns.identity ? "coalesce(r.folder, '')" : "''");
}

std::vector<RunRecord> read_run_records(Connection& db, const SqlFragment& query) {
  Statement q(db, query.sql, query.params);
  std::vector<RunRecord> out;
  while (q.step()) {
    RunRecord r;
    r.id = q.integer(0);
    r.name = q.text(1);
    r.status = q.text(2);
    r.sweep = q.text(3);
    r.created_at = q.text(4);
    r.finished_at = q.text(5);
    r.experiment = q.text(6);
    r.config = q.text(7);
    r.config_hash = q.text(8);
    r.git_commit = q.text(9);
    r.host = q.text(10);
    r.error = q.text(11);
    r.planned_steps = q.integer(12);
    r.steps = q.integer(13);
    r.final_loss = q.maybe_real(14);
    r.best_loss = q.maybe_real(15);
    r.best_val = q.maybe_real(16);
    r.tokens_per_sec = q.maybe_real(17);
    r.duration_s = q.maybe_real(18);
    r.uuid = q.text(19);
    r.folder = q.text(20);
    r.world_size = q.integer(21);
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<RunRecord> lookup_run(Connection& db, const std::string& name_or_id,
                                    const RunColumns& columns) {
  // An id only when the text is all digits ("12abc" is no id), and a run named "12" wins over
  // the run with id 12.
  SqlFragment query{run_summary_select(columns) + " WHERE name = ?", {name_or_id}};
  const bool digits = !name_or_id.empty() && name_or_id.size() <= 18 &&
                      name_or_id.find_first_not_of("0123456789") == std::string::npos;
  if (digits) {
    query.sql += " OR id = ?";
    query.params.emplace_back(static_cast<int64_t>(std::stoll(name_or_id)));
  }
  query.sql += " ORDER BY CASE WHEN name = ? THEN 0 ELSE 1 END LIMIT 1";
  query.params.emplace_back(name_or_id);
  auto found = read_run_records(db, query);
  if (found.empty()) return std::nullopt;
  return std::move(found[0]);
}

RunRecord require_run(Connection& db, const std::string& name_or_id, const RunColumns& columns) {
  auto found = lookup_run(db, name_or_id, columns);
  if (!found) {
    throw UserError(fmt::format("no run '{}' in '{}': `kiln runs list --db {}` lists them",
                                name_or_id, db.path(), db.path()));
  }
  return std::move(*found);
}

UpdateCount count_updates(Connection& db, int64_t run_id, bool has_skipped_column) {
  Statement q(db,
              has_skipped_column
                  ? "SELECT count(*), coalesce(sum(skipped), 0) FROM metrics WHERE run_id = ?"
                  : "SELECT count(*), 0 FROM metrics WHERE run_id = ?",
              {run_id});
  q.step();
  return {q.integer(0), q.integer(1)};
}

namespace {

std::vector<std::string> first_column(Connection& db, const std::string& sql, int64_t run_id) {
  Statement q(db, sql, {run_id});
  std::vector<std::string> out;
  while (q.step())
    out.push_back(q.text(0));
  return out;
}

}  // namespace

bool has_table(Connection& db, const std::string& name) {
  Statement table(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
                  {name});
  table.step();
  return table.integer(0) > 0;
}

bool has_column(Connection& db, const std::string& table, const std::string& column) {
  Statement info(db, "SELECT name FROM pragma_table_info('" + table + "')");
  while (info.step())
    if (info.text(0) == column) return true;
  return false;
}

std::vector<std::string> run_config_hashes(Connection& db, const RunRecord& run) {
  if (!has_table(db, "run_config_hashes")) return {run.config_hash};
  return first_column(
      db, "SELECT config_hash FROM run_config_hashes WHERE run_id = ? ORDER BY config_hash",
      run.id);
}

std::vector<std::string> listed_snapshot_labels(Connection& db, int64_t run_id) {
  return first_column(db, "SELECT label FROM snapshots WHERE run_id = ? ORDER BY step, label",
                      run_id);
}

}  // namespace kiln
