// RunStore's rows: buffered as training makes them, written in one transaction about once a
// second, and kept in memory while a PostgreSQL server is away (core/store/run_store.h).
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "core/store/run_store.h"
#include "core/util/error.h"
#include "core/util/fault.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

std::string minutes_of(Clock::duration d) {
  return fmt::format("{:.1f} minutes", std::chrono::duration<double>(d).count() / 60.0);
}

// A count that only some runs have (core/store/run_store.h, counted_tokens): NULL otherwise.
void bind_count(Statement& statement, int index, const std::optional<int64_t>& count) {
  if (count) {
    statement.bind(index, *count);
  } else {
    statement.bind_null(index);
  }
}

}  // namespace

void RunStore::add_metric(int64_t run_id, const MetricRow& row) {
  pending_metrics_.emplace_back(run_id, row);
  if (listener_) listener_->metric_added(run_id, row);
  maybe_flush();
}

void RunStore::add_eval(int64_t run_id, const EvalRow& row) {
  pending_evals_.emplace_back(run_id, row);
  if (listener_) listener_->eval_added(run_id, row);
  maybe_flush();
}

void RunStore::maybe_flush() {
  // About once a second, and at least every 64 rows when steps are fast: a crash loses a
  // bounded number of steps either way. While the server is away: one try a second.
  if ((!away_since_ && pending_metrics_.size() >= 64) ||
      Clock::now() - last_flush_ >= std::chrono::seconds(1)) {
    try_flush();
  }
}

void RunStore::flush() {
  // What follows a flush (a snapshot, the run's end) needs the rows durable: wait for a server
  // that went away, up to kServerWait.
  for (try_flush(); away_since_; try_flush()) {
    if (Clock::now() - *away_since_ >= kServerWait) {
      throw UserError(fmt::format(
          "run store '{}' has been unreachable for {} ({}): {} rows of this run are not stored: "
          "resume the run once the server is back (`kiln resume NAME --db {}`)",
          db_.path(), minutes_of(Clock::now() - *away_since_), away_reason_,
          pending_metrics_.size() + pending_evals_.size(), db_.path()));
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

void RunStore::try_flush() {
  if (pending_metrics_.empty() && pending_evals_.empty()) return;
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
    const size_t buffered = pending_metrics_.size() + pending_evals_.size();
    if (buffered > kMaxBufferedRows) {
      throw UserError(fmt::format(
          "run store '{}' has been unreachable for {} ({}) and {} rows are buffered, the most a "
          "run keeps in memory: resume the run once the server is back",
          db_.path(), minutes_of(Clock::now() - *away_since_), away_reason_, buffered));
    }
    return;
  }
  away_since_.reset();
}

void RunStore::write_pending() {
  auto start = Clock::now();
  Transaction write(db_);
  // REPLACE: a resumed run re-does the steps after its snapshot, and their rows replace the old
  // ones rather than duplicating them.
  Statement metric(db_, R"sql(
      INSERT OR REPLACE INTO metrics (run_id, step, loss, lr, grad_norm, tokens_per_sec, dt_ms,
                                      tokens_seen, loss_scale, skipped, rank_skew_ms, bubble,
                                      counted_tokens)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql");
  for (const auto& [run_id, m] : pending_metrics_) {
    metric.bind(1, run_id).bind(2, m.step).bind(3, m.loss).bind(4, m.lr).bind(5, m.grad_norm);
    metric.bind(6, m.tokens_per_sec).bind(7, m.dt_ms).bind(8, m.tokens_seen);
    metric.bind(9, m.loss_scale).bind(10, static_cast<int64_t>(m.skipped));
    metric.bind(11, m.rank_skew_ms).bind(12, m.bubble);
    bind_count(metric, 13, m.counted_tokens);
    metric.step();
    metric.reset();
  }
  Statement eval(db_, R"sql(
      INSERT OR REPLACE INTO evals (run_id, step, split, loss, perplexity, checkpoint,
                                    counted_tokens)
      VALUES (?, ?, ?, ?, ?, ?, ?))sql");
  for (const auto& [run_id, e] : pending_evals_) {
    eval.bind(1, run_id).bind(2, e.step).bind(3, e.split).bind(4, e.loss);
    eval.bind(5, std::exp(e.loss)).bind(6, e.checkpoint);
    bind_count(eval, 7, e.counted_tokens);
    eval.step();
    eval.reset();
  }
  fault_point("store.uncommitted");
  write.commit();
  pending_metrics_.clear();
  pending_evals_.clear();
  last_flush_ = Clock::now();
  seconds_spent_ += std::chrono::duration<double>(last_flush_ - start).count();
  if (listener_) listener_->committed();
}

}  // namespace kiln
