#include "core/store/runs/run_row.h"

#include "core/store/runs/config_json.h"
#include "core/store/runs/paths.h"

namespace kiln {

int64_t insert_run(Connection& db, const NewRun& run) {
  // The id after the highest ever used: one `kiln runs rm` freed is never handed out again.
  Statement next(db,
                 "SELECT coalesce(max(used), 0) + 1 FROM (SELECT max(id) AS used FROM runs "
                 "UNION ALL SELECT max(highest_used) FROM run_ids) AS ids");
  next.step();
  const int64_t id = next.integer(0);
  Statement insert(db, R"sql(
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
  Statement(db, "UPDATE run_ids SET highest_used = ?", {id}).step();
  Statement(db, "INSERT INTO run_config_hashes (run_id, config_hash) VALUES (?, ?)",
            {id, run.config_hash})
      .step();
  return id;
}

void resume_run_row(Connection& db, int64_t run_id, const RunResume& resume) {
  // Steps after the snapshot are re-done: their old rows go, so none is ever duplicated or left
  // from the abandoned attempt.
  for (const char* sql :
       {"DELETE FROM metrics WHERE run_id = ? AND step > ?",
        "DELETE FROM evals WHERE run_id = ? AND step > ? AND checkpoint = ''",
        "DELETE FROM task_scores WHERE run_id = ? AND step > ? AND checkpoint = ''",
        "DELETE FROM layer_metrics WHERE run_id = ? AND step > ?"}) {
    Statement drop(db, sql);
    drop.bind(1, run_id).bind(2, resume.from_step);
    drop.step();
  }
  Statement update(db, R"sql(
      UPDATE runs SET status = 'running', finished_at = NULL, error = NULL, config = ?,
                      config_hash = ?, config_json = ?, steps = ?, world_size = ?
      WHERE id = ?)sql");
  update.bind(1, resume.config_toml).bind(2, resume.config_hash);
  update.bind(3, config_json(resume.config_toml)).bind(4, resume.planned_steps);
  update.bind(5, resume.world_size).bind(6, run_id);
  update.step();
  Statement record(db, "INSERT INTO resumes (run_id, from_step, changes) VALUES (?, ?, ?)");
  record.bind(1, run_id).bind(2, resume.from_step).bind_text_or_null(3, resume.changes);
  record.step();
  Statement(db, "INSERT OR IGNORE INTO run_config_hashes (run_id, config_hash) VALUES (?, ?)",
            {run_id, resume.config_hash})
      .step();
}

void finish_run_row(Connection& db, int64_t run_id, const std::string& status,
                    const std::string& error) {
  Statement update(db, R"sql(
      UPDATE runs SET status = ?, error = ?,
                      finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
      WHERE id = ?)sql");
  update.bind(1, status).bind_text_or_null(2, error).bind(3, run_id);
  update.step();
}

}  // namespace kiln
