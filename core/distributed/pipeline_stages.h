// Where a pipeline cuts a model's layer sequence (embedding, blocks, head) into stages, and the
// world its stages and replicas make.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/api/parallel.h"

namespace kiln {

// The first layer of each of `stages` stages, then the layer count: the cuts that
// `split_points` names ("3,6": stages start at layers 0, 3 and 6), or, when it is empty, the
// cuts that make the stages' parameter counts closest to equal (`layer_sizes`: each layer's
// parameter count; a layer without any counts as one). A UserError when the stages or the cuts
// do not fit the layers.
std::vector<size_t> pipeline_stage_starts(const std::vector<int64_t>& layer_sizes, int stages,
                                          const std::string& split_points);

// parallel.dp replicas of parallel.pp stages: a world of exactly pp x dp ranks, dp of them reading
// data, each step parallel.microbatches micro-batches; a UserError for any other world.
WorldShape pipeline_world_shape(const Params& params, int world);

}  // namespace kiln
