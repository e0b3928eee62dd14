// Run history: what `kiln runs ...` and `kiln report` read from the run store (core/run_store.h),
// and the one thing they change (`kiln runs rm`). No LibTorch: only SQLite and the stored TOML.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace kiln {

// A connection to an existing run store; it never creates one (a mistyped --db is an error, not a
// new empty file). It registers the SQL function kiln_config(config, 'section.key'): the typed
// value of a resolved-config key (integer, real, text, 1/0 for a bool), NULL when absent.
class HistoryDb {
 public:
  explicit HistoryDb(const std::string& path);
  ~HistoryDb();
  HistoryDb(const HistoryDb&) = delete;
  HistoryDb& operator=(const HistoryDb&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  // runs.sweep arrives with the sweep runner's migration; older stores show no sweep.
  bool has_sweep_column() const { return has_sweep_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  bool has_sweep_ = false;
};

// A run with the summary of its metrics: one row of `kiln runs list`.
struct RunRecord {
  int64_t id = 0;
  std::string name, status, sweep, created_at, finished_at, experiment, config, config_hash,
      git_commit, host, error;
  int64_t steps = 0;  // optimizer steps done (the last metrics row)
  int64_t planned_steps = 0;
  std::optional<double> final_loss;      // loss of the last step
  std::optional<double> best_loss;       // lowest training loss
  std::optional<double> best_val;        // lowest validation loss (evals, split 'val')
  std::optional<double> tokens_per_sec;  // mean over the steps after the first (warm-up)
  std::optional<double> duration_s;      // finished_at - created_at; none while unfinished
};

struct ListQuery {
  std::string where;        // core/where_expr.h; empty = every run
  std::string sort = "id";  // a key; '-' prefix = descending
  int64_t limit = 0;        // 0 = no limit
};

std::vector<RunRecord> list_runs(HistoryDb& db, const ListQuery& query);
// By name, or by id when no run has that name; a UserError when neither exists.
RunRecord find_run_record(HistoryDb& db, const std::string& name_or_id);
// Each argument is a run name or id, a sweep, or a glob on names; in argument order, each run
// once; a UserError for an argument that matches nothing.
std::vector<RunRecord> match_runs(HistoryDb& db, const std::vector<std::string>& patterns);

// Cells as text, for the terminal and for HTML.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> numeric;  // right-aligned columns
};
std::string render_text_table(const Table& table);
Table run_list_table(const std::vector<RunRecord>& runs);
// "table" (aligned, rounded), "csv" or "json" (every digit, empty/null when unknown).
std::string format_run_list(const std::vector<RunRecord>& runs, const std::string& format);

// `kiln runs show`: identity, timing, metrics summary, evals, snapshots, resumes and config.
std::string describe_run(HistoryDb& db, const RunRecord& run);

// The resolved config flattened: "optimizer.lr" -> "0.003" (strings unquoted).
std::map<std::string, std::string> config_values(const std::string& config_toml);
// The config keys whose values are not the same in every run (run.name left out: it labels
// them), each with every run's value: "-" where a run lacks the key, "" quoted for an empty
// string.
std::vector<std::pair<std::string, std::vector<std::string>>> differing_config(
    const std::vector<RunRecord>& runs);
Table differing_config_table(const std::vector<RunRecord>& runs);

// Loss curves compared bit for bit, step by step.
struct CurveComparison {
  bool identical = false;                // over every step either run has
  int64_t common_steps = 0;              // steps both runs have, up to the first difference
  int64_t first_difference = 0;          // the step, when not identical
  std::optional<double> loss_a, loss_b;  // at that step; none when the run has no such row
};
CurveComparison compare_loss_curves(HistoryDb& db, int64_t run_a, int64_t run_b);
// `kiln runs compare`: differing config, summaries side by side, and for every pair of runs
// sharing a config hash whether their loss curves are identical.
std::string compare_report(HistoryDb& db, const std::vector<RunRecord>& runs);

// `kiln runs export`: the metrics rows, then the evals, as "csv" or "jsonl" (README).
std::string export_run(HistoryDb& db, const RunRecord& run, const std::string& format);

// `<run.out_dir>/<name>`: where the run keeps its snapshots and lock; "" for a name that could
// reach outside run.out_dir (never one `kiln run` accepts).
std::string run_folder(const RunRecord& run);
// Deletes the run's row (its metrics, evals, snapshots and resumes rows cascade) and its folder;
// a UserError, changing nothing, while a kiln process is training it. Returns the folder it
// removed, or "" when the run had none.
std::string remove_run(HistoryDb& db, const RunRecord& run);

// One metric of one run as points: metric loss | val_loss | lr | grad_norm | tokens_per_sec,
// x step | tokens | time (seconds of step time so far). A missing value is NaN.
struct Curve {
  std::vector<double> x, y;
};
Curve load_curve(HistoryDb& db, const RunRecord& run, const std::string& metric,
                 const std::string& x_axis);

}  // namespace kiln
