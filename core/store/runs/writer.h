// The run store: one SQLite file (WAL mode) holding every run, its resolved config, and one
// metrics row per optimizer step. Rows are buffered and written in one transaction about once a
// second (or every 64 rows), so the store costs a negligible share of step time and a crash loses
// at most those rows; SQLite's journal guarantees the file itself is never corrupted.
// The schema is documented in docs/run-store.md ("The schema"); its migrations are in
// core/store/runs/schema.h, included here. The rows it is given are core/store/runs/rows.h; it
// writes a run's own row through core/store/runs/run_row.h and the buffered rows through
// core/store/runs/pending_rows.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/store/db/connection.h"
#include "core/store/runs/lookup.h"
#include "core/store/runs/pending_rows.h"
#include "core/store/runs/rows.h"
#include "core/store/runs/schema.h"
#include "core/store/runs/sources.h"
#include "core/store/runs/task_scores.h"

namespace kiln {

class RunStore {
 public:
  // Opens or creates the db (and its directory); a UserError when it cannot be used.
  explicit RunStore(const std::string& path);
  ~RunStore();  // flushes
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  // A UserError when the name is taken: run names are unique. The id is one no run of this
  // store ever had, even one since removed. Where its config came from is written with it.
  int64_t create_run(const NewRun& run, const RunProvenance& provenance = {});
  // By name, or by id when no run has that name (core/store/runs/lookup.h).
  std::optional<RunRecord> find_run(const std::string& name_or_id);
  // find_run, or a UserError: "no run 'X' in 'DB': `kiln runs list --db DB` lists them".
  RunRecord require_run(const std::string& name_or_id);
  // The run's steps and skipped updates so far, rows still buffered included.
  UpdateCount count_updates(int64_t run_id);

  // Buffered; written about once a second (core/store/runs/writer_rows.cpp). When a PostgreSQL
  // server goes away (a restart, a network cut), training goes on and the rows stay buffered,
  // up to kMaxBufferedRows, until it answers again; past that the run fails with one line.
  void add_metric(int64_t run_id, const MetricRow& row);
  void add_eval(int64_t run_id, const EvalRow& row);
  // Not buffered: the buffered rows, then these, written at once (a task's scores are few and
  // come seldom).
  void add_task_scores(int64_t run_id, const std::vector<TaskScoreRow>& rows);
  // Every buffered row durable before it returns (what a snapshot and the run's end need): it
  // waits for a server that is away, up to kServerWait (or KILN_SERVER_WAIT_SECONDS), then
  // fails with one line, the buffered rows written to the unstored-rows file when there is one.
  void flush();
  static constexpr size_t kMaxBufferedRows = 100000;  // about 20 MB
  static constexpr std::chrono::minutes kServerWait{5};
  static constexpr const char* kServerWaitVariable = "KILN_SERVER_WAIT_SECONDS";
  // Where the run's rows go when the server does not come back in time (RunPaths::unstored_rows):
  // a local SQLite store given the run's row as it is now and every row of it still buffered,
  // which `kiln runs import FILE --db URL` merges back into the run. Read while the server is up.
  void keep_unstored_rows_in(int64_t run_id, const std::string& file);
  // The one listener (null: none); it must stay alive until it is replaced or removed.
  void set_listener(RunStoreListener* listener) { listener_ = listener; }
  void finish_run(int64_t run_id, const std::string& status, const std::string& error = "");
  // A resumed run: rows after `from_step` are dropped, the status is running again, the
  // (possibly changed) config, its planned steps and the world size it now runs at replace the
  // old ones and the resume is recorded with `changes`;
  // `provenance` adds to the run's (the sources of the keys the resume gave a value, its inputs
  // as they are now).
  void reopen_run(int64_t run_id, int64_t from_step, const std::string& changes,
                  const std::string& config_toml, const std::string& config_hash,
                  int64_t planned_steps, int64_t world_size, const RunProvenance& provenance = {});
  void add_snapshot(int64_t run_id, int64_t step, const std::string& label,
                    const std::string& path);
  void remove_snapshot(int64_t run_id, const std::string& label);
  const std::string& path() const { return db_.path(); }
  Connection& connection() { return db_; }  // for the reads of core/store/runs/lookup.h
  double seconds_spent() const { return seconds_spent_; }  // inside add_*/flush, for reports

 private:
  struct UnstoredRows {
    int64_t run_id = 0;
    NewRun run;
    std::string file;
    bool written = false;
  };

  void migrate();
  void maybe_flush();
  void try_flush();      // the rows written, or kept when the server is away
  void write_pending();  // one transaction, timed and heard by the listener
  // The server stayed away too long: the buffered rows go to the unstored-rows file (or are
  // lost without one) and a UserError says so, with the command that loads them.
  [[noreturn]] void give_up(const std::string& why);
  size_t write_unstored(const std::string& error);  // the rows written there
  static std::chrono::seconds configured_server_wait();

  Connection db_;
  PendingRows pending_;
  std::optional<UnstoredRows> unstored_;
  std::chrono::seconds server_wait_{kServerWait};
  RunStoreListener* listener_ = nullptr;
  std::chrono::steady_clock::time_point last_flush_;
  std::optional<std::chrono::steady_clock::time_point> away_since_;  // the server's, if away
  std::string away_reason_;
  double seconds_spent_ = 0;
};

}  // namespace kiln
