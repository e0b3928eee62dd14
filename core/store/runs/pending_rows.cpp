#include "core/store/runs/pending_rows.h"

#include <algorithm>
#include <cmath>

#include "core/util/fault.h"

namespace kiln {

namespace {

// A count that only some runs have (core/store/runs/rows.h, counted_tokens): NULL otherwise.
void bind_count(Statement& statement, int index, const std::optional<int64_t>& count) {
  if (count) {
    statement.bind(index, *count);
  } else {
    statement.bind_null(index);
  }
}

void write_metrics(Connection& db, const std::vector<std::pair<int64_t, MetricRow>>& rows) {
  Statement metric(db, R"sql(
      INSERT OR REPLACE INTO metrics (run_id, step, loss, lr, grad_norm, tokens_per_sec, dt_ms,
                                      tokens_seen, loss_scale, skipped, rank_skew_ms, bubble,
                                      counted_tokens, source_tokens)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql");
  for (const auto& [run_id, m] : rows) {
    metric.bind(1, run_id).bind(2, m.step).bind(3, m.loss).bind(4, m.lr).bind(5, m.grad_norm);
    metric.bind(6, m.tokens_per_sec).bind(7, m.dt_ms).bind(8, m.tokens_seen);
    metric.bind(9, m.loss_scale).bind(10, static_cast<int64_t>(m.skipped));
    metric.bind(11, m.rank_skew_ms).bind(12, m.bubble);
    bind_count(metric, 13, m.counted_tokens);
    if (m.source_tokens.empty()) {
      metric.bind_null(14);
    } else {
      metric.bind(14, m.source_tokens);
    }
    metric.step();
    metric.reset();
    write_layer_metrics(db, run_id, m.step, m.layer_measures);
  }
}

void write_evals(Connection& db, const std::vector<std::pair<int64_t, EvalRow>>& rows) {
  Statement eval(db, R"sql(
      INSERT OR REPLACE INTO evals (run_id, step, split, loss, perplexity, checkpoint,
                                    counted_tokens)
      VALUES (?, ?, ?, ?, ?, ?, ?))sql");
  for (const auto& [run_id, e] : rows) {
    eval.bind(1, run_id).bind(2, e.step).bind(3, e.split).bind(4, e.loss);
    eval.bind(5, std::exp(e.loss)).bind(6, e.checkpoint);
    bind_count(eval, 7, e.counted_tokens);
    eval.step();
    eval.reset();
  }
}

}  // namespace

void PendingRows::clear() {
  metrics.clear();
  evals.clear();
  snapshots.clear();
}

bool PendingRows::forget_snapshot(int64_t run_id, const std::string& label) {
  const auto before = snapshots.size();
  snapshots.erase(
      std::remove_if(snapshots.begin(), snapshots.end(),
                     [&](const SnapshotRow& s) { return s.run_id == run_id && s.label == label; }),
      snapshots.end());
  return snapshots.size() != before;
}

PendingRows PendingRows::of_run(int64_t run_id, int64_t as_run) const {
  PendingRows out;
  for (const auto& [id, m] : metrics) {
    if (id == run_id) out.metrics.emplace_back(as_run, m);
  }
  for (const auto& [id, e] : evals) {
    if (id == run_id) out.evals.emplace_back(as_run, e);
  }
  for (SnapshotRow s : snapshots) {
    if (s.run_id != run_id) continue;
    s.run_id = as_run;
    out.snapshots.push_back(s);
  }
  return out;
}

void PendingRows::write(Connection& db) const {
  Transaction write(db);
  write_metrics(db, metrics);
  write_evals(db, evals);
  for (const SnapshotRow& s : snapshots) {
    Statement(db,
              "INSERT OR REPLACE INTO snapshots (run_id, label, step, path) VALUES (?, ?, ?, ?)",
              {s.run_id, s.label, s.step, s.path})
        .step();
  }
  fault_point("store.uncommitted");
  write.commit();
}

}  // namespace kiln
