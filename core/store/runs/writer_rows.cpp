#include "core/store/runs/writer.h"

// RunStore's rows: buffered as training makes them (core/store/runs/pending_rows.h), written in
// one transaction about once a second, and kept in memory while a PostgreSQL server is away.
#include <thread>

#include <fmt/format.h>

#include "core/util/env.h"
#include "core/util/error.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

std::string minutes_of(Clock::duration d) {
  return fmt::format("{:.1f} minutes", std::chrono::duration<double>(d).count() / 60.0);
}

}  // namespace

void RunStore::add_metric(int64_t run_id, const MetricRow& row) {
  pending_.metrics.emplace_back(run_id, row);
  if (listener_) listener_->metric_added(run_id, row);
  maybe_flush();
}

void RunStore::add_eval(int64_t run_id, const EvalRow& row) {
  pending_.evals.emplace_back(run_id, row);
  if (listener_) listener_->eval_added(run_id, row);
  maybe_flush();
}

void RunStore::maybe_flush() {
  // About once a second, and at least every 64 rows when steps are fast: a crash loses a
  // bounded number of steps either way. While the server is away: one try a second.
  if ((!away_since_ && pending_.metrics.size() >= 64) ||
      Clock::now() - last_flush_ >= std::chrono::seconds(1)) {
    try_flush();
  }
}

void RunStore::flush() {
  // What follows a flush (a snapshot, the run's end) needs the rows durable: wait for a server
  // that went away, up to server_wait_.
  for (try_flush(); away_since_; try_flush()) {
    if (Clock::now() - *away_since_ >= server_wait_) {
      give_up(fmt::format("run store '{}' has been unreachable for {} ({})", db_.path(),
                          minutes_of(Clock::now() - *away_since_), away_reason_));
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

void RunStore::try_flush() {
  if (pending_.empty()) {
    away_since_.reset();
    return;
  }
  last_flush_ = Clock::now();
  try {
    if (away_since_) db_.reconnect();
    write_pending();
  } catch (const SqliteError& e) {
    if (!db_.lost()) throw;
    // The rows stay buffered; an upsert written twice (a COMMIT whose answer was lost) replaces
    // itself, so none is ever duplicated.
    if (!away_since_) away_since_ = Clock::now();
    away_reason_ = e.reason();
    const size_t buffered = pending_.rows();
    if (buffered > kMaxBufferedRows) {
      give_up(fmt::format(
          "run store '{}' has been unreachable for {} ({}) and {} rows are buffered, the most a "
          "run keeps in memory",
          db_.path(), minutes_of(Clock::now() - *away_since_), away_reason_, buffered));
    }
    return;
  }
  away_since_.reset();
}

void RunStore::give_up(const std::string& why) {
  const size_t buffered = pending_.rows();
  std::string line;
  if (unstored_) {
    const size_t kept = write_unstored(why);
    line = fmt::format(
        "{}: {} rows of this run are in '{}': load them once the server is back with `kiln runs "
        "import {} --db {}`, then resume the run",
        why, kept, unstored_->file, unstored_->file, db_.path());
  } else {
    line = fmt::format(
        "{}: {} rows of this run are not stored: resume the run once the server is back "
        "(`kiln resume NAME --db {}`)",
        why, buffered, db_.path());
  }
  // Nothing is left to wait for: the run's end (and this store's destructor) return at once.
  pending_.clear();
  away_since_.reset();
  throw UserError(line);
}

void RunStore::keep_unstored_rows_in(int64_t run_id, const std::string& file) {
  Statement row(db_, R"sql(
      SELECT name, experiment, config, config_hash, seed, world_size, steps, git_commit, host,
             sweep, uuid, folder
      FROM runs WHERE id = ?)sql",
                {run_id});
  if (!row.step()) return;
  unstored_ = UnstoredRows{
      run_id,
      NewRun{row.text(0), row.text(1), row.text(2), row.text(3), row.integer(4), row.integer(5),
             row.integer(6), row.text(7), row.text(8), row.text(9), row.text(10), row.text(11)},
      file};
}

size_t RunStore::write_unstored(const std::string& error) {
  RunStore local(unstored_->file);
  const NewRun& run = unstored_->run;
  // A run that lost its server twice (resumed in between) adds to the file it has.
  const std::optional<RunRecord> there = local.find_run(run.name);
  const int64_t id = there && there->uuid == run.uuid ? there->id : local.create_run(run);
  const PendingRows kept = pending_.of_run(unstored_->run_id, id);
  if (!kept.empty()) kept.write(local.connection());
  local.finish_run(id, "failed", error);
  unstored_->written = true;
  return kept.rows();
}

std::chrono::seconds RunStore::configured_server_wait() {
  const int64_t seconds = env_integer(
      kServerWaitVariable, std::chrono::seconds(kServerWait).count(), 0, 365LL * 24 * 3600);
  return std::chrono::seconds(seconds);
}

void RunStore::add_snapshot(int64_t run_id, int64_t step, const std::string& label,
                            const std::string& path) {
  if (!away_since_) {
    try {
      Statement insert(db_, R"sql(
          INSERT OR REPLACE INTO snapshots (run_id, label, step, path) VALUES (?, ?, ?, ?))sql");
      insert.bind(1, run_id).bind(2, label).bind(3, step).bind(4, path);
      insert.step();
      return;
    } catch (const SqliteError& e) {
      if (!db_.lost()) throw;
      away_since_ = Clock::now();
      away_reason_ = e.reason();
    }
  }
  // The server is away: the row waits with the rows it follows.
  pending_.snapshots.push_back({run_id, step, label, path});
}

void RunStore::remove_snapshot(int64_t run_id, const std::string& label) {
  if (pending_.forget_snapshot(run_id, label)) return;  // never stored
  Statement drop(db_, "DELETE FROM snapshots WHERE run_id = ? AND label = ?");
  drop.bind(1, run_id).bind(2, label);
  drop.step();
}

void RunStore::write_pending() {
  const auto start = Clock::now();
  pending_.write(db_);
  pending_.clear();
  last_flush_ = Clock::now();
  seconds_spent_ += std::chrono::duration<double>(last_flush_ - start).count();
  if (listener_) listener_->committed();
}

}  // namespace kiln
