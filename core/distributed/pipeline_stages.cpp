#include "core/distributed/pipeline_stages.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {
namespace {

// {0} and the first layer of each stage that split_points names.
std::vector<size_t> explicit_starts(size_t n, int stages, const std::string& split_points) {
  if (static_cast<size_t>(stages) > n) {
    throw UserError(fmt::format(
        "parallel.pp = {} stages but the model has {} layers (embedding, blocks, head): lower "
        "parallel.pp or add layers",
        stages, n));
  }
  std::vector<size_t> starts = {0};
  if (split_points.empty()) return starts;
  for (const auto& item : split(split_points, ',')) {
    size_t at = 0;
    try {
      at = std::stoul(item);
    } catch (const std::exception&) {
      at = 0;
    }
    if (at <= starts.back() || at >= n) {
      throw UserError(fmt::format(
          "parallel.split_points = \"{}\": each must be a layer index above the previous one "
          "and below {} (the model's layer count), e.g. \"{}\" for 2 stages",
          split_points, n, n / 2));
    }
    starts.push_back(at);
  }
  if (starts.size() != static_cast<size_t>(stages)) {
    throw UserError(fmt::format(
        "parallel.split_points = \"{}\" makes {} stages but parallel.pp = {}: give pp - 1 = {} "
        "layer indices",
        split_points, starts.size(), stages, stages - 1));
  }
  return starts;
}

}  // namespace

std::vector<size_t> pipeline_stage_starts(const std::vector<int64_t>& layer_sizes, int stages,
                                          const std::string& split_points) {
  const size_t n = layer_sizes.size();
  std::vector<size_t> starts = explicit_starts(n, stages, split_points);
  if (split_points.empty()) {
    std::vector<double> prefix = {0};
    for (int64_t size : layer_sizes)
      prefix.push_back(prefix.back() + static_cast<double>(std::max<int64_t>(size, 1)));
    for (int k = 1; k < stages; ++k) {
      const double target = prefix[n] * k / stages;
      size_t best = starts.back() + 1;
      for (size_t b = best; b <= n - static_cast<size_t>(stages - k); ++b) {
        if (std::abs(prefix[b] - target) < std::abs(prefix[best] - target)) best = b;
      }
      starts.push_back(best);
    }
  }
  starts.push_back(n);
  return starts;
}

WorldShape pipeline_world_shape(const Params& params, int world) {
  const int64_t pp = params.integer("pp"), dp = params.integer("dp");
  if (pp * dp != world) {
    throw UserError(fmt::format(
        "parallel.pp = {} x parallel.dp = {} makes {} processes, but this world has {} "
        "(WORLD_SIZE): launch {} processes, e.g. kiln launch --nproc-per-node {} -- run ..., "
        "or change pp and dp",
        pp, dp, pp * dp, world, pp * dp, pp * dp));
  }
  return WorldShape{static_cast<int>(dp), params.integer("microbatches")};
}

}  // namespace kiln
