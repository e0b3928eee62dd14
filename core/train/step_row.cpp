#include "core/train/step_row.h"

#include <utility>

#include <nlohmann/json.hpp>

namespace kiln {

MetricRow metric_row(const StepStats& stats, int world_size,
                     const std::vector<std::string>& sources, LayerMeasures layer_measures) {
  MetricRow row;
  row.layer_measures = std::move(layer_measures);
  row.step = stats.step;
  row.loss = stats.loss;
  row.lr = stats.lr;
  row.grad_norm = stats.grad_norm;
  row.tokens_per_sec = stats.tokens_per_sec;
  row.dt_ms = stats.dt_ms;
  row.tokens_seen = stats.tokens_seen;
  row.loss_scale = stats.loss_scale;
  row.skipped = stats.skipped;
  if (world_size > 1) row.rank_skew_ms = stats.rank_skew_ms;
  row.bubble = stats.bubble;
  if (stats.counted_tokens > 0) row.counted_tokens = stats.counted_tokens;
  nlohmann::json tokens = nlohmann::json::object();
  for (size_t k = 0; k < sources.size() && k < stats.source_tokens.size(); ++k)
    tokens[sources[k]] = stats.source_tokens[k];
  if (!tokens.empty()) row.source_tokens = tokens.dump();
  return row;
}

}  // namespace kiln
