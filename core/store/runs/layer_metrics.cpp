#include "core/store/runs/layer_metrics.h"

#include "core/store/runs/lookup.h"

namespace kiln {

void write_layer_metrics(Connection& db, int64_t run_id, int64_t step,
                         const LayerMeasures& measures) {
  if (measures.empty()) return;
  Statement insert(
      db, "INSERT OR REPLACE INTO layer_metrics (run_id, step, name, value) VALUES (?, ?, ?, ?)");
  for (const auto& [name, value] : measures) {
    insert.bind(1, run_id).bind(2, step).bind(3, name).bind(4, value);
    insert.step();
    insert.reset();
  }
}

std::vector<LayerMetricRow> read_layer_metrics(Connection& db, int64_t run_id, int64_t after,
                                               int64_t last) {
  std::vector<LayerMetricRow> rows;
  if (!has_table(db, "layer_metrics")) return rows;
  Statement q(db,
              "SELECT step, name, value FROM layer_metrics WHERE run_id = ? AND step > ? AND "
              "step <= ? ORDER BY step, name",
              {run_id, after, last});
  while (q.step())
    rows.push_back({q.integer(0), q.text(1), q.real(2)});
  return rows;
}

std::vector<std::string> layer_metric_names(Connection& db) {
  std::vector<std::string> names;
  if (!has_table(db, "layer_metrics")) return names;
  Statement q(db, "SELECT DISTINCT name FROM layer_metrics ORDER BY name");
  while (q.step())
    names.push_back(q.text(0));
  return names;
}

}  // namespace kiln
