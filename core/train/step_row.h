// A training step as the run store keeps it: the row `kiln runs show`, `kiln report` and the
// dashboard read back (core/store/runs/writer.h).
#pragma once

#include <string>
#include <vector>

#include "core/store/runs/writer.h"
#include "core/train/trainer.h"

namespace kiln {

// The run store's row for a step; rank skew only when several ranks took it; with `sources` (a
// blend's source_names()), the tokens the step took from each; with `layer_measures`, the
// model's (Model::take_layer_measures).
MetricRow metric_row(const StepStats& stats, int world_size,
                     const std::vector<std::string>& sources = {},
                     LayerMeasures layer_measures = {});

}  // namespace kiln
