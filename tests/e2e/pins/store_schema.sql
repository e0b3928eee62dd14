-- Written by sqlite3 .schema on a run store Kiln made: c883e1fc784a wrote schema 16, and 487a1bb added migration 17 (sweep_ladders.cooled), migration 18 added layer_metrics, and migration 19 bench_results' parameter counts (user_version 19).
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
    , sweep TEXT, uuid TEXT, folder TEXT, config_json TEXT);
CREATE TABLE metrics (
      run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      step            INTEGER NOT NULL,
      loss            REAL,
      lr              REAL,
      grad_norm       REAL,
      tokens_per_sec  REAL,
      dt_ms           REAL,
      tokens_seen     INTEGER, loss_scale REAL, skipped INTEGER NOT NULL DEFAULT 0, rank_skew_ms REAL, bubble REAL, counted_tokens INTEGER, source_tokens TEXT,
      PRIMARY KEY (run_id, step)
    ) WITHOUT ROWID;
CREATE TABLE evals (
      run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      step        INTEGER NOT NULL,
      split       TEXT NOT NULL,
      checkpoint  TEXT NOT NULL DEFAULT '',
      loss        REAL NOT NULL,
      perplexity  REAL, counted_tokens INTEGER,
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
CREATE INDEX runs_by_sweep ON runs(sweep);
CREATE UNIQUE INDEX runs_by_uuid ON runs(uuid);
CREATE TABLE run_config_hashes (
      run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      config_hash  TEXT NOT NULL,
      PRIMARY KEY (run_id, config_hash)
    ) WITHOUT ROWID;
CREATE TABLE run_ids (highest_used INTEGER NOT NULL);
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
    , parameters REAL, active_parameters REAL);
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
CREATE TABLE sweeps (
      name            TEXT PRIMARY KEY,
      launcher        TEXT NOT NULL,
      base            TEXT NOT NULL,
      settings        TEXT NOT NULL,
      scheduler_args  TEXT NOT NULL,
      max_parallel    INTEGER NOT NULL,
      folder          TEXT NOT NULL,
      job_ids         TEXT NOT NULL DEFAULT '',
      submitted_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    , spec_file TEXT);
CREATE TABLE sweep_members (
      sweep      TEXT NOT NULL REFERENCES sweeps(name) ON DELETE CASCADE,
      task       INTEGER NOT NULL,
      name       TEXT NOT NULL UNIQUE,
      overrides  TEXT NOT NULL,
      PRIMARY KEY (sweep, task)
    );
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
CREATE TABLE task_scores (
      run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      step        INTEGER NOT NULL,
      task        TEXT NOT NULL,
      metric      TEXT NOT NULL,
      checkpoint  TEXT NOT NULL DEFAULT '',
      value       REAL NOT NULL,
      stderr      REAL,
      items       INTEGER NOT NULL,
      truncated   INTEGER NOT NULL DEFAULT 0, rules INTEGER NOT NULL DEFAULT 1,
      PRIMARY KEY (run_id, step, task, metric, checkpoint)
    ) WITHOUT ROWID;
CREATE TABLE sweep_claims (
      sweep         TEXT NOT NULL,
      member        TEXT NOT NULL,
      worker        TEXT NOT NULL,
      until_step    INTEGER NOT NULL,
      heartbeat_at  INTEGER NOT NULL,
      PRIMARY KEY (sweep, member)
    );
CREATE TABLE sweep_decisions (
      sweep       TEXT NOT NULL,
      position    INTEGER NOT NULL,
      decided_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
      worker      TEXT NOT NULL,
      action      TEXT NOT NULL,
      member      TEXT NOT NULL,
      until_step  INTEGER NOT NULL,
      reason      TEXT NOT NULL,
      PRIMARY KEY (sweep, position)
    );
CREATE TABLE sweep_proposals (
      sweep   TEXT NOT NULL,
      trial   INTEGER NOT NULL,
      value_lines TEXT NOT NULL,
      PRIMARY KEY (sweep, trial)
    );
CREATE TABLE sweep_ladders (
      sweep             TEXT PRIMARY KEY,
      metric            TEXT NOT NULL,
      maximize          INTEGER NOT NULL,
      reduction_factor  INTEGER NOT NULL,
      rungs             TEXT NOT NULL
    , cooled INTEGER NOT NULL DEFAULT 0);
CREATE TABLE run_environment (
      run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      key     TEXT NOT NULL,
      value   TEXT NOT NULL,
      PRIMARY KEY (run_id, key)
    ) WITHOUT ROWID;
CREATE TABLE rung_probes (
      run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      step            INTEGER NOT NULL,
      cooldown_steps  INTEGER NOT NULL,
      val_loss        REAL NOT NULL,
      PRIMARY KEY (run_id, step)
    ) WITHOUT ROWID;
CREATE TABLE layer_metrics (
      run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      step    INTEGER NOT NULL,
      name    TEXT NOT NULL,
      value   REAL NOT NULL,
      PRIMARY KEY (run_id, step, name)
    ) WITHOUT ROWID;
