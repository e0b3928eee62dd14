#include "core/store/runs/writer.h"

#include <fmt/format.h>

#include "core/store/runs/run_row.h"
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
  const int64_t id = insert_run(db_, run);
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
  resume_run_row(db_, run_id,
                 {from_step, changes, config_toml, config_hash, planned_steps, world_size});
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
  finish_run_row(db_, run_id, status, error);
}

}  // namespace kiln
