#include "core/store/runs/writer.h"

#include <fmt/format.h>

#include "core/store/runs/config_json.h"
#include "core/store/runs/paths.h"
#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

namespace {

Connection open_store(const std::string& path) {
  if (!is_database_url(path)) ensure_parent_dir(path);
  return Connection(path, OpenMode::kCreate, "set run.db to a writable path or a reachable server");
}

}  // namespace

RunStore::RunStore(const std::string& path) : db_(open_store(path)) {
  try {
    db_.prepare_writer();
    migrate();
  } catch (const SqliteError& e) {
    throw UserError(
        fmt::format("cannot use run store '{}': {}: point run.db at a Kiln run store or a new one",
                    path, e.reason()));
  }
  last_flush_ = std::chrono::steady_clock::now();
  server_wait_ = configured_server_wait();
}

RunStore::~RunStore() {
  try {
    flush();
  } catch (...) {
    // A destructor must not throw; the caller already marked the run when something failed.
  }
}

int64_t RunStore::create_run(const NewRun& run, const RunProvenance& provenance) {
  Transaction write(db_);
  if (find_run(run.name)) {
    throw UserError(fmt::format("a run named '{}' already exists in '{}': pick another --name",
                                run.name, db_.path()));
  }
  // The id after the highest ever used: one `kiln runs rm` freed is never handed out again.
  Statement next(db_,
                 "SELECT coalesce(max(used), 0) + 1 FROM (SELECT max(id) AS used FROM runs "
                 "UNION ALL SELECT max(highest_used) FROM run_ids) AS ids");
  next.step();
  const int64_t id = next.integer(0);
  Statement insert(db_, R"sql(
      INSERT INTO runs (id, name, status, experiment, config, config_hash, seed, git_commit, host,
                        world_size, steps, sweep, uuid, folder, config_json)
      VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql");
  insert.bind(1, id)
      .bind(2, run.name)
      .bind(3, run.experiment)
      .bind(4, run.config_toml)
      .bind(5, run.config_hash)
      .bind(6, run.seed)
      .bind_text_or_null(7, run.git_commit)
      .bind_text_or_null(8, run.host)
      .bind(9, run.world_size)
      .bind(10, run.planned_steps)
      .bind_text_or_null(11, run.sweep)
      .bind(12, run.uuid.empty() ? new_run_uuid() : run.uuid)
      .bind_text_or_null(13, run.folder)
      .bind(14, config_json(run.config_toml));
  insert.step();
  Statement(db_, "UPDATE run_ids SET highest_used = ?", {id}).step();
  Statement(db_, "INSERT INTO run_config_hashes (run_id, config_hash) VALUES (?, ?)",
            {id, run.config_hash})
      .step();
  write_provenance(db_, id, provenance);
  write.commit();
  return id;
}

// The migrations give every store this kiln opens every column of runs.
std::optional<RunRecord> RunStore::find_run(const std::string& name_or_id) {
  return lookup_run(db_, name_or_id, RunColumns{});
}

RunRecord RunStore::require_run(const std::string& name_or_id) {
  return kiln::require_run(db_, name_or_id, RunColumns{});
}

UpdateCount RunStore::count_updates(int64_t run_id) {
  flush();
  return kiln::count_updates(db_, run_id, /*has_skipped_column=*/true);
}

void RunStore::reopen_run(int64_t run_id, int64_t from_step, const std::string& changes,
                          const std::string& config_toml, const std::string& config_hash,
                          int64_t planned_steps, int64_t world_size,
                          const RunProvenance& provenance) {
  flush();
  Transaction write(db_);
  // Steps after the snapshot are re-done: their old rows go, so none is ever duplicated or left
  // from the abandoned attempt.
  for (const char* sql :
       {"DELETE FROM metrics WHERE run_id = ? AND step > ?",
        "DELETE FROM evals WHERE run_id = ? AND step > ? AND checkpoint = ''",
        "DELETE FROM task_scores WHERE run_id = ? AND step > ? AND checkpoint = ''",
        "DELETE FROM layer_metrics WHERE run_id = ? AND step > ?"}) {
    Statement drop(db_, sql);
    drop.bind(1, run_id).bind(2, from_step);
    drop.step();
  }
  Statement update(db_, R"sql(
      UPDATE runs SET status = 'running', finished_at = NULL, error = NULL, config = ?,
                      config_hash = ?, config_json = ?, steps = ?, world_size = ?
      WHERE id = ?)sql");
  update.bind(1, config_toml).bind(2, config_hash).bind(3, config_json(config_toml));
  update.bind(4, planned_steps).bind(5, world_size).bind(6, run_id);
  update.step();
  Statement record(db_, "INSERT INTO resumes (run_id, from_step, changes) VALUES (?, ?, ?)");
  record.bind(1, run_id).bind(2, from_step).bind_text_or_null(3, changes);
  record.step();
  Statement(db_, "INSERT OR IGNORE INTO run_config_hashes (run_id, config_hash) VALUES (?, ?)",
            {run_id, config_hash})
      .step();
  write_provenance(db_, run_id, provenance);
  write.commit();
}

void RunStore::add_task_scores(int64_t run_id, const std::vector<TaskScoreRow>& rows) {
  flush();  // the step's metrics first: a score never lands before the step it was taken at
  Transaction write(db_);
  write_task_scores(db_, run_id, rows);
  write.commit();
  if (listener_) {
    for (const TaskScoreRow& row : rows)
      listener_->task_score_added(run_id, row);
    listener_->committed();
  }
}

void RunStore::finish_run(int64_t run_id, const std::string& status, const std::string& error) {
  // A run that gave up on its server has its end in the unstored-rows file already.
  if (unstored_ && unstored_->written && unstored_->run_id == run_id) return;
  flush();
  Statement update(db_, R"sql(
      UPDATE runs SET status = ?, error = ?,
                      finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
      WHERE id = ?)sql");
  update.bind(1, status).bind_text_or_null(2, error).bind(3, run_id);
  update.step();
}

}  // namespace kiln
