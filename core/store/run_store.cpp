#include "core/store/run_store.h"

#include <cmath>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/fault.h"
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
};

Connection open_store(const std::string& path) {
  ensure_parent_dir(path);
  return Connection(path, OpenMode::kCreate, "set run.db to a writable path");
}

}  // namespace

RunStore::RunStore(const std::string& path) : db_(open_store(path)) {
  // Writers from other processes (sweeps) wait their turn instead of failing.
  db_.set_busy_timeout(std::chrono::seconds(30));
  try {
    db_.exec("PRAGMA journal_mode = WAL");
    // NORMAL in WAL mode: a power loss may drop the last commits, never corrupt the file.
    db_.exec("PRAGMA synchronous = NORMAL");
    db_.exec("PRAGMA foreign_keys = ON");
    migrate();
  } catch (const SqliteError& e) {
    throw UserError(
        fmt::format("cannot use run store '{}': {}: point run.db at a Kiln SQLite "
                    "file or a new path",
                    path, e.reason()));
  }
  last_flush_ = std::chrono::steady_clock::now();
}

void RunStore::migrate() {
  const int64_t want = static_cast<int64_t>(std::size(kMigrations));
  // Each migration reads the version inside its own write transaction: several processes
  // opening a new db at once (a sweep's members) then apply each migration exactly once.
  for (;;) {
    Transaction migration(db_);
    const int64_t have = schema_version();
    if (have >= want) {
      migration.commit();
      if (have > want) {
        // Not a SqliteError: this message needs no "cannot use" wrapping.
        throw UserError(
            fmt::format("run store '{}' has schema version {}, newer than this kiln "
                        "understands ({}): use a newer kiln or another run.db",
                        db_.path(), have, want));
      }
      return;
    }
    db_.exec(kMigrations[have]);
    db_.exec(fmt::format("PRAGMA user_version = {}", have + 1));
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

int64_t RunStore::create_run(const NewRun& run) {
  if (find_run(run.name)) {
    throw UserError(fmt::format("a run named '{}' already exists in '{}': pick another --name",
                                run.name, db_.path()));
  }
  Statement insert(db_, R"sql(
      INSERT INTO runs (name, status, experiment, config, config_hash, seed, git_commit, host,
                        world_size, steps, sweep)
      VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?))sql");
  insert.bind(1, run.name)
      .bind(2, run.experiment)
      .bind(3, run.config_toml)
      .bind(4, run.config_hash)
      .bind(5, run.seed)
      .bind_text_or_null(6, run.git_commit)
      .bind_text_or_null(7, run.host)
      .bind(8, run.world_size)
      .bind(9, run.planned_steps)
      .bind_text_or_null(10, run.sweep);
  insert.step();
  return db_.last_insert_rowid();
}

// The migrations give every store this kiln opens the runs.sweep column.
std::optional<RunRecord> RunStore::find_run(const std::string& name_or_id) {
  return lookup_run(db_, name_or_id, /*has_sweep_column=*/true);
}

RunRecord RunStore::require_run(const std::string& name_or_id) {
  return kiln::require_run(db_, name_or_id, /*has_sweep_column=*/true);
}

int64_t RunStore::schema_version() {
  Statement version(db_, "PRAGMA user_version");
  version.step();
  return version.integer(0);
}

void RunStore::add_metric(int64_t run_id, const MetricRow& row) {
  pending_metrics_.emplace_back(run_id, row);
  maybe_flush();
}

void RunStore::add_eval(int64_t run_id, const EvalRow& row) {
  pending_evals_.emplace_back(run_id, row);
  maybe_flush();
}

void RunStore::maybe_flush() {
  // About once a second, and at least every 64 rows when steps are fast: a crash loses a
  // bounded number of steps either way.
  if (pending_metrics_.size() >= 64 ||
      std::chrono::steady_clock::now() - last_flush_ >= std::chrono::seconds(1)) {
    flush();
  }
}

void RunStore::flush() {
  if (pending_metrics_.empty() && pending_evals_.empty()) return;
  auto start = std::chrono::steady_clock::now();
  Transaction write(db_);
  // REPLACE: a resumed run re-does the steps after its snapshot, and their rows replace the old
  // ones rather than duplicating them.
  Statement metric(db_, R"sql(
      INSERT OR REPLACE INTO metrics (run_id, step, loss, lr, grad_norm, tokens_per_sec, dt_ms,
                                      tokens_seen, loss_scale, skipped, rank_skew_ms, bubble)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql");
  for (const auto& [run_id, m] : pending_metrics_) {
    metric.bind(1, run_id).bind(2, m.step).bind(3, m.loss).bind(4, m.lr).bind(5, m.grad_norm);
    metric.bind(6, m.tokens_per_sec).bind(7, m.dt_ms).bind(8, m.tokens_seen);
    metric.bind(9, m.loss_scale).bind(10, static_cast<int64_t>(m.skipped));
    metric.bind(11, m.rank_skew_ms).bind(12, m.bubble);
    metric.step();
    metric.reset();
  }
  Statement eval(db_, R"sql(
      INSERT OR REPLACE INTO evals (run_id, step, split, loss, perplexity, checkpoint)
      VALUES (?, ?, ?, ?, ?, ?))sql");
  for (const auto& [run_id, e] : pending_evals_) {
    eval.bind(1, run_id).bind(2, e.step).bind(3, e.split).bind(4, e.loss);
    eval.bind(5, std::exp(e.loss)).bind(6, e.checkpoint);
    eval.step();
    eval.reset();
  }
  fault_point("store.uncommitted");
  write.commit();
  pending_metrics_.clear();
  pending_evals_.clear();
  last_flush_ = std::chrono::steady_clock::now();
  seconds_spent_ += std::chrono::duration<double>(last_flush_ - start).count();
}

void RunStore::reopen_run(int64_t run_id, int64_t from_step, const std::string& changes,
                          const std::string& config_toml, const std::string& config_hash) {
  flush();
  Transaction write(db_);
  // Steps after the snapshot are re-done: their old rows go, so none is ever duplicated or left
  // from the abandoned attempt.
  for (const char* sql : {"DELETE FROM metrics WHERE run_id = ? AND step > ?",
                          "DELETE FROM evals WHERE run_id = ? AND step > ? AND checkpoint = ''"}) {
    Statement drop(db_, sql);
    drop.bind(1, run_id).bind(2, from_step);
    drop.step();
  }
  Statement update(db_, R"sql(
      UPDATE runs SET status = 'running', finished_at = NULL, error = NULL, config = ?,
                      config_hash = ?
      WHERE id = ?)sql");
  update.bind(1, config_toml).bind(2, config_hash).bind(3, run_id);
  update.step();
  Statement record(db_, "INSERT INTO resumes (run_id, from_step, changes) VALUES (?, ?, ?)");
  record.bind(1, run_id).bind(2, from_step).bind_text_or_null(3, changes);
  record.step();
  write.commit();
}

void RunStore::delete_run(int64_t run_id) {
  Statement drop(db_, "DELETE FROM runs WHERE id = ?");
  drop.bind(1, run_id);
  drop.step();
}

void RunStore::add_snapshot(int64_t run_id, int64_t step, const std::string& label,
                            const std::string& path) {
  Statement insert(db_, R"sql(
      INSERT OR REPLACE INTO snapshots (run_id, label, step, path) VALUES (?, ?, ?, ?))sql");
  insert.bind(1, run_id).bind(2, label).bind(3, step).bind(4, path);
  insert.step();
}

void RunStore::remove_snapshot(int64_t run_id, const std::string& label) {
  Statement drop(db_, "DELETE FROM snapshots WHERE run_id = ? AND label = ?");
  drop.bind(1, run_id).bind(2, label);
  drop.step();
}

void RunStore::finish_run(int64_t run_id, const std::string& status, const std::string& error) {
  flush();
  Statement update(db_, R"sql(
      UPDATE runs SET status = ?, error = ?,
                      finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
      WHERE id = ?)sql");
  update.bind(1, status).bind_text_or_null(2, error).bind(3, run_id);
  update.step();
}

}  // namespace kiln
