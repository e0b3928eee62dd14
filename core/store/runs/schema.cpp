// The run store's migrations (core/store/runs/schema.h), and RunStore::migrate, which applies
// them when a writer opens a store (core/store/runs/writer.h).
#include "core/store/runs/schema.h"

#include <iterator>

#include <fmt/format.h>

#include "core/store/runs/sweep_claims.h"
#include "core/store/runs/sweep_records.h"
#include "core/store/runs/writer.h"
#include "core/util/error.h"

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
    // Run identities (core/store/runs/paths.h): every run a uuid (older runs get a random one
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
    // Benchmark results, `kiln bench --record` (core/store/runs/speed_records.h): not runs.
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
    // Where each run's config came from (core/store/runs/sources.h).
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
    // 7: sweeps submitted to a scheduler, and their members (core/store/runs/sweep_records.h).
    kSweepTablesSql,
    // 8: how many tokens the loss counted, for data that counts only some (fine-tuning).
    "ALTER TABLE metrics ADD COLUMN counted_tokens INTEGER;"
    "ALTER TABLE evals ADD COLUMN counted_tokens INTEGER;",
    // 9: the config as JSON (core/store/runs/config_json.h), jsonb on PostgreSQL with the functions
    // --where and --sort look config keys up with there (core/store/db/postgres_dialect.cpp).
    "ALTER TABLE runs ADD COLUMN config_json TEXT;",
    // 10: the files each run reads, where they were and what they held (core/store/runs/inputs.h).
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
    // 11: evaluation task scores (core/store/runs/task_scores.h).
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
    // 12: a blend's tokens per source in each step, a JSON object (core/store/runs/writer.h).
    "ALTER TABLE metrics ADD COLUMN source_tokens TEXT;",
    // 13: the claims, decisions and proposals that workers share a search by
    // (core/store/runs/sweep_claims.h), and a submitted search's sweep file.
    kSweepClaimTablesSql,
    // 14: what a run ran with beyond its config (core/store/runs/run_environment.h).
    R"sql(
    CREATE TABLE run_environment (
      run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      key     TEXT NOT NULL,
      value   TEXT NOT NULL,
      PRIMARY KEY (run_id, key)
    ) WITHOUT ROWID;
    )sql",
    // 15: the cooldown probes of an asha sweep's rungs (core/store/runs/rung_probes.h).
    R"sql(
    CREATE TABLE rung_probes (
      run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      step            INTEGER NOT NULL,
      cooldown_steps  INTEGER NOT NULL,
      val_loss        REAL NOT NULL,
      PRIMARY KEY (run_id, step)
    ) WITHOUT ROWID;
    )sql",
    // 16: the scoring rules' version of each task score (core/store/runs/task_scores.h); the
    // scores before it were computed by version 1.
    "ALTER TABLE task_scores ADD COLUMN rules INTEGER NOT NULL DEFAULT 1;",
    // 17: whether an asha sweep's rungs are scored by cooldown probes (LadderShape::cooled in
    // core/store/runs/sweep_claims.h); the ladders recorded before it are read without.
    "ALTER TABLE sweep_ladders ADD COLUMN cooled INTEGER NOT NULL DEFAULT 0;",
    // 18: measures of a model's layers at each step (core/store/runs/layer_metrics.h).
    R"sql(
    CREATE TABLE layer_metrics (
      run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      step    INTEGER NOT NULL,
      name    TEXT NOT NULL,
      value   REAL NOT NULL,
      PRIMARY KEY (run_id, step, name)
    ) WITHOUT ROWID;
    )sql",
    // 19: a bench result's total and active parameters (core/store/runs/speed_records.h); the
    // results recorded before it have neither.
    "ALTER TABLE bench_results ADD COLUMN parameters REAL; "
    "ALTER TABLE bench_results ADD COLUMN active_parameters REAL;",
};

const int64_t kKnownSchema = static_cast<int64_t>(std::size(kMigrations));

}  // namespace

int64_t known_schema_version() {
  return kKnownSchema;
}

std::string newer_schema_line(const std::string& path, int64_t version) {
  return fmt::format(
      "run store '{}' has a newer schema (version {}) than this kiln understands ({})", path,
      version, kKnownSchema);
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

}  // namespace kiln
