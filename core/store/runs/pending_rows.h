// The rows a run store holds until its next commit (core/store/runs/writer.h decides when): the
// steps' metrics and evaluations, and the snapshots taken while a PostgreSQL server is away,
// written together in one transaction. The same rows, of one run, are what the unstored-rows file
// receives when that server does not come back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/store/db/connection.h"
#include "core/store/runs/rows.h"

namespace kiln {

struct SnapshotRow {
  int64_t run_id = 0, step = 0;
  std::string label, path;
};

struct PendingRows {
  std::vector<std::pair<int64_t, MetricRow>> metrics;  // each with its run's id
  std::vector<std::pair<int64_t, EvalRow>> evals;
  std::vector<SnapshotRow> snapshots;  // only while the server is away

  bool empty() const { return metrics.empty() && evals.empty() && snapshots.empty(); }
  // The metrics and evaluations: what fills memory while the server is away.
  size_t rows() const { return metrics.size() + evals.size(); }
  void clear();
  // Drops a snapshot's row that waits here; false when none does.
  bool forget_snapshot(int64_t run_id, const std::string& label);
  // The rows of run `run_id`, under the id `as_run` (the run's id in another store).
  PendingRows of_run(int64_t run_id, int64_t as_run) const;
  // Every row in one transaction (fault point "store.uncommitted" before its commit). REPLACE: a
  // resumed run re-does the steps after its snapshot, and their rows replace the old ones rather
  // than duplicating them, as does an upsert written twice (a COMMIT whose answer was lost).
  void write(Connection& db) const;
};

}  // namespace kiln
