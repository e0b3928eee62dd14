#include "core/app/presentation/layer_metrics_table.h"

#include <algorithm>
#include <map>
#include <string>

#include <fmt/format.h>

#include "core/store/runs/layer_metrics.h"

namespace kiln {

Table layer_metrics_table(HistoryDb& db, int64_t run_id) {
  struct Summary {
    double last = 0, sum = 0, max = 0;
    int64_t steps = 0;
  };
  std::map<std::string, Summary> by_name;
  for (const LayerMetricRow& row : read_layer_metrics(db.connection(), run_id)) {
    Summary& s = by_name[row.name];
    s.max = s.steps == 0 ? row.value : std::max(s.max, row.value);
    s.last = row.value;
    s.sum += row.value;
    ++s.steps;
  }
  Table t{{"metric", "steps", "last", "mean", "max"}, {}, {false, true, true, true, true}};
  for (const auto& [name, s] : by_name) {
    t.rows.push_back({name, std::to_string(s.steps), fmt::format("{:.4f}", s.last),
                      fmt::format("{:.4f}", s.sum / static_cast<double>(s.steps)),
                      fmt::format("{:.4f}", s.max)});
  }
  return t;
}

}  // namespace kiln
