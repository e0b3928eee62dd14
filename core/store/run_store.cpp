#include "core/store/run_store.h"

#include <fmt/format.h>

#include "core/store/config_json.h"
#include "core/store/run_paths.h"
#include "core/store/sweep_records.h"
#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

namespace {

// Each entry moves the schema one version up (PRAGMA user_version counts the applied ones), so
// an old db is upgraded in place and a newer one is never downgraded.
const char* const kMigrations[] = {
    R"sql(
    CREATE TABLE runs (
      id           INTEGER PRIMARY KEY,
      name         TEXT NOT NULL UNIQUE,
      status       TEXT NOT NULL
                   CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
      created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
      finished_at  TEXT,
      experiment   TEXT,
      config       TEXT NOT NULL,
      config_hash  TEXT NOT NULL,
      seed         INTEGER NOT NULL,
      git_commit   TEXT,
      host         TEXT,
      world_size   INTEGER NOT NULL,
      steps        INTEGER NOT NULL,
      error        TEXT
    );
    CREATE TABLE metrics (
      run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      step            INTEGER NOT NULL,
      loss            REAL,
      lr              REAL,
      grad_norm       REAL,
      tokens_per_sec  REAL,
      dt_ms           REAL,
      tokens_seen     INTEGER,
      PRIMARY KEY (run_id, step)
    ) WITHOUT ROWID;
    CREATE TABLE evals (
      run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      step        INTEGER NOT NULL,
      split       TEXT NOT NULL,
      checkpoint  TEXT NOT NULL DEFAULT '',
      loss        REAL NOT NULL,
      perplexity  REAL,
      PRIMARY KEY (run_id, step, split, checkpoint)
    ) WITHOUT ROWID;
    CREATE INDEX runs_by_config_hash ON runs(config_hash);
    CREATE TABLE snapshots (
      run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      label       TEXT NOT NULL,
      step        INTEGER NOT NULL,
      path        TEXT NOT NULL,
      created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
      PRIMARY KEY (run_id, label)
    ) WITHOUT ROWID;
    CREATE TABLE resumes (
      run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      from_step   INTEGER NOT NULL,
      changes     TEXT,
      created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    );
    )sql",
    R"sql(
    ALTER TABLE metrics ADD COLUMN loss_scale REAL;
    ALTER TABLE metrics ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN sweep TEXT;
    CREATE INDEX runs_by_sweep ON runs(sweep);
    )sql",
    R"sql(
    ALTER TABLE metrics ADD COLUMN rank_skew_ms REAL;
    ALTER TABLE metrics ADD COLUMN bubble REAL;
    )sql",
    // Run identities (core/store/run_paths.h): every run a uuid (older runs get a random one
    // here) and its absolute folder (NULL for older runs: they keep <out_dir>/<name>); every
    // config hash a run has had, which its snapshots may carry; and the highest run id ever
    // used, so that no id returns after `kiln runs rm` (INTEGER PRIMARY KEY alone hands out
    // max(id) + 1 again, and rebuilding runs with AUTOINCREMENT would cascade its deletes).
    R"sql(
    ALTER TABLE runs ADD COLUMN uuid TEXT;
    ALTER TABLE runs ADD COLUMN folder TEXT;
    UPDATE runs SET uuid = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' ||
                                 substr(hex(randomblob(2)), 2) || '-' ||
                                 substr('89ab', 1 + abs(random() % 4), 1) ||
                                 substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)));
    CREATE UNIQUE INDEX runs_by_uuid ON runs(uuid);
    CREATE TABLE run_config_hashes (
      run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      config_hash  TEXT NOT NULL,
      PRIMARY KEY (run_id, config_hash)
    ) WITHOUT ROWID;
    INSERT INTO run_config_hashes (run_id, config_hash) SELECT id, config_hash FROM runs;
    CREATE TABLE run_ids (highest_used INTEGER NOT NULL);
    INSERT INTO run_ids (highest_used) SELECT coalesce(max(id), 0) FROM runs;
    )sql",
    // Benchmark results, `kiln bench --record` (core/store/bench_records.h): not runs.
    R"sql(
    CREATE TABLE bench_results (
      label                 TEXT PRIMARY KEY,
      recorded_at           TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
      git_commit            TEXT,
      experiment            TEXT NOT NULL,
      config_hash           TEXT NOT NULL,
      cpu_model             TEXT NOT NULL,
      cpus                  INTEGER NOT NULL,
      cpu_features          TEXT NOT NULL,
      device                TEXT NOT NULL,
      threads               INTEGER NOT NULL,
      blas                  TEXT NOT NULL,
      steps                 INTEGER NOT NULL,
      warmup                INTEGER NOT NULL,
      tokens_per_sec        REAL NOT NULL,
      step_ms               REAL NOT NULL,
      data_ms               REAL NOT NULL,
      forward_ms            REAL NOT NULL,
      backward_ms           REAL NOT NULL,
      communication_ms      REAL NOT NULL,
      optimizer_ms          REAL NOT NULL,
      logging_ms            REAL NOT NULL,
      achieved_flops        REAL NOT NULL,
      hardware_peak_flops   REAL,
      measured_peak_flops   REAL NOT NULL,
      mfu                   REAL,
      mfu_of_measured_peak  REAL NOT NULL,
      peak_memory_mb        REAL NOT NULL
    );
    )sql",
    // Where each run's config came from (core/store/run_sources.h).
    R"sql(
    CREATE TABLE run_files (
      run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      position  INTEGER NOT NULL,
      path      TEXT NOT NULL,
      sha256    TEXT NOT NULL,
      PRIMARY KEY (run_id, position)
    ) WITHOUT ROWID;
    CREATE TABLE run_key_sources (
      run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      key     TEXT NOT NULL,
      source  TEXT NOT NULL,
      PRIMARY KEY (run_id, key)
    ) WITHOUT ROWID;
    )sql",
    // 7: sweeps submitted to a scheduler, and their members (core/store/sweep_records.h).
    kSweepTablesSql,
    // 8: how many tokens the loss counted, for data that counts only some (fine-tuning).
    "ALTER TABLE metrics ADD COLUMN counted_tokens INTEGER;"
    "ALTER TABLE evals ADD COLUMN counted_tokens INTEGER;",
    // 9: the config as JSON (core/store/config_json.h), jsonb on PostgreSQL with the functions
    // --where and --sort look config keys up with there (core/store/postgres_dialect.cpp).
    "ALTER TABLE runs ADD COLUMN config_json TEXT;",
    // 10: the files each run reads, where they were and what they held (core/store/run_inputs.h).
    R"sql(
    CREATE TABLE run_inputs (
      run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      key       TEXT NOT NULL,
      given     TEXT NOT NULL,
      resolved  TEXT NOT NULL,
      PRIMARY KEY (run_id, key)
    ) WITHOUT ROWID;
    CREATE TABLE run_input_files (
      run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      key       TEXT NOT NULL,
      position  INTEGER NOT NULL,
      path      TEXT NOT NULL,
      size      INTEGER NOT NULL,
      checksum  TEXT NOT NULL,
      PRIMARY KEY (run_id, key, position)
    ) WITHOUT ROWID;
    )sql",
    // 11: evaluation task scores (core/store/task_scores.h).
    R"sql(
    CREATE TABLE task_scores (
      run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      step        INTEGER NOT NULL,
      task        TEXT NOT NULL,
      metric      TEXT NOT NULL,
      checkpoint  TEXT NOT NULL DEFAULT '',
      value       REAL NOT NULL,
      stderr      REAL,
      items       INTEGER NOT NULL,
      truncated   INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (run_id, step, task, metric, checkpoint)
    ) WITHOUT ROWID;
    )sql",
};

const int64_t kKnownSchema = static_cast<int64_t>(std::size(kMigrations));

Connection open_store(const std::string& path) {
  if (!is_database_url(path)) ensure_parent_dir(path);
  return Connection(path, OpenMode::kCreate, "set run.db to a writable path or a reachable server");
}

}  // namespace

int64_t known_schema_version() {
  return kKnownSchema;
}

std::string newer_schema_line(const std::string& path, int64_t version) {
  return fmt::format(
      "run store '{}' has a newer schema (version {}) than this kiln understands ({})", path,
      version, kKnownSchema);
}

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

void RunStore::migrate() {
  const int64_t want = kKnownSchema;
  // Each migration reads the version inside its own write transaction: several processes
  // opening a new db at once (a sweep's members) then apply each migration exactly once.
  for (;;) {
    Transaction migration(db_);
    const int64_t have = db_.schema_version();
    if (have >= want) {
      migration.commit();
      if (have > want) {
        // Not a SqliteError: this message needs no "cannot use" wrapping.
        throw UserError(newer_schema_line(db_.path(), have) +
                        ": this command writes to it, so it refuses: use a newer kiln, or "
                        "another run.db");
      }
      return;
    }
    db_.apply_migration(kMigrations[have]);
    db_.set_schema_version(have + 1);
    migration.commit();
  }
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
                          int64_t planned_steps, const RunProvenance& provenance) {
  flush();
  Transaction write(db_);
  // Steps after the snapshot are re-done: their old rows go, so none is ever duplicated or left
  // from the abandoned attempt.
  for (const char* sql :
       {"DELETE FROM metrics WHERE run_id = ? AND step > ?",
        "DELETE FROM evals WHERE run_id = ? AND step > ? AND checkpoint = ''",
        "DELETE FROM task_scores WHERE run_id = ? AND step > ? AND checkpoint = ''"}) {
    Statement drop(db_, sql);
    drop.bind(1, run_id).bind(2, from_step);
    drop.step();
  }
  Statement update(db_, R"sql(
      UPDATE runs SET status = 'running', finished_at = NULL, error = NULL, config = ?,
                      config_hash = ?, config_json = ?, steps = ?
      WHERE id = ?)sql");
  update.bind(1, config_toml).bind(2, config_hash).bind(3, config_json(config_toml));
  update.bind(4, planned_steps).bind(5, run_id);
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
