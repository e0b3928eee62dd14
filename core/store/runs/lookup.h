// Finding runs in a run store: the one RunRecord every lookup returns, the one query that reads
// it (each run with the summary of its metrics), and the one message for a run that is not
// there. RunStore (writing) and HistoryDb (reading) both look runs up through these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/store/db/connection.h"

namespace kiln {

// A run with the summary of its metrics: one row of `kiln runs list`.
struct RunRecord {
  int64_t id = 0;
  std::string name, status, sweep, created_at, finished_at, experiment;
  std::string config;  // the resolved config as stored: canonical TOML text
  std::string config_hash, git_commit, host, error;
  std::string uuid;    // the run's identity (core/store/runs/paths.h); "" in a store before it
  std::string folder;  // absolute, as made; "" for a run made before runs had identities
  int64_t steps = 0;   // optimizer steps done (the last metrics row)
  int64_t planned_steps = 0;
  int64_t world_size = 1;                // ranks it last ran on (a resume may change it)
  std::optional<double> final_loss;      // loss of the last step
  std::optional<double> best_loss;       // lowest training loss
  std::optional<double> best_val;        // lowest validation loss (evals, split 'val')
  std::optional<double> tokens_per_sec;  // mean over the steps after the first (warm-up)
  std::optional<double> duration_s;      // finished_at - created_at; none while unfinished
};

// The columns of `runs` that arrived with later migrations, which a store opened without
// migrating (HistoryDb) may lack: runs.sweep with the sweep runner's, runs.uuid and runs.folder
// with run identities'.
struct RunColumns {
  bool sweep = true;
  bool identity = true;
};
RunColumns run_columns(Connection& db);
// Whether the store has table `name`: one opened without upgrading it (HistoryDb) may be older
// than a table its readers look in.
bool has_table(Connection& db, const std::string& name);
// Whether `table` (which exists) has `column`: a store read without upgrading may predate it.
bool has_column(Connection& db, const std::string& table, const std::string& column);

// Every run with its summary, as a query the caller extends with WHERE / ORDER BY / LIMIT on the
// RunRecord field names (duration for duration_s). A column the store lacks reads as "".
std::string run_summary_select(const RunColumns& columns);
// The rows of a query built on run_summary_select().
std::vector<RunRecord> read_run_records(Connection& db, const SqlFragment& query);

// By name, or by id when no run has that name.
std::optional<RunRecord> lookup_run(Connection& db, const std::string& name_or_id,
                                    const RunColumns& columns);
// lookup_run, or a UserError: "no run 'X' in 'DB': `kiln runs list --db DB` lists them".
RunRecord require_run(Connection& db, const std::string& name_or_id, const RunColumns& columns);

// A run's optimizer steps (metrics rows) and how many of them skipped their update
// (metrics.skipped: non-finite gradients). A store older than that column counts none skipped.
struct UpdateCount {
  int64_t steps = 0;
  int64_t skipped = 0;
};
UpdateCount count_updates(Connection& db, int64_t run_id, bool has_skipped_column);

// What the store records of which snapshots are the run's own (core/checkpoint/snapshot_catalog.h):
// every config hash the run has had (a resume that changes a resumable key changes it, and the
// earlier snapshots carry the earlier one; a store from before run identities knows only the
// current one), and the labels of the snapshots it lists, oldest first. Reads only.
std::vector<std::string> run_config_hashes(Connection& db, const RunRecord& run);
std::vector<std::string> listed_snapshot_labels(Connection& db, int64_t run_id);

}  // namespace kiln
