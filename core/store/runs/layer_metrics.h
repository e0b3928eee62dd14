// Measures of a model's layers at each step (table layer_metrics, migration 18): what
// Model::take_layer_measures() gives after a step, such as a mixture of experts' router losses and
// load (moe_3.aux_loss, moe_3.load_imbalance; docs/moe.md). Written with the step's metrics row
// (MetricRow::layer_measures); --where, --sort, `runs show` and `runs compare --metric` read each
// name as a metric.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/store/db/connection.h"

namespace kiln {

using LayerMeasures = std::vector<std::pair<std::string, double>>;

struct LayerMetricRow {
  int64_t step = 0;
  std::string name;  // "moe_3.aux_loss"
  double value = 0;
};

// Inside the caller's transaction; a row with the same run, step and name replaces the old one.
void write_layer_metrics(Connection& db, int64_t run_id, int64_t step,
                         const LayerMeasures& measures);
// Those of the steps after `after` up to `last`, in order of step and name; none on a store
// older than migration 18.
std::vector<LayerMetricRow> read_layer_metrics(Connection& db, int64_t run_id,
                                               int64_t after = std::numeric_limits<int64_t>::min(),
                                               int64_t last = std::numeric_limits<int64_t>::max());
// Every name any run of the store has.
std::vector<std::string> layer_metric_names(Connection& db);

}  // namespace kiln
