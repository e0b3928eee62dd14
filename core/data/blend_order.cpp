#include "core/data/blend_order.h"

#include <algorithm>
#include <stdexcept>

#include "core/util/counter_hash.h"

namespace kiln {

BlendOrder::BlendOrder(const std::vector<double>& weights, uint64_t seed, std::string_view split)
    : key_(splitmix64_output(seed, fnv1a64(split))) {
  double total = 0;
  for (double w : weights) {
    if (!(w > 0)) throw std::invalid_argument("BlendOrder: a weight that is not positive");
    total += w;
  }
  if (weights.empty()) throw std::invalid_argument("BlendOrder: no source");
  double sum = 0;
  for (double w : weights)
    cumulative_.push_back((sum += w) / total);
  cumulative_.back() = 1.0;  // rounding must not leave a draw past the last source
}

size_t BlendOrder::source_of(int64_t row) const {
  const double u = unit_interval(splitmix64_output(key_, static_cast<uint64_t>(row)));
  return static_cast<size_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) -
                             cumulative_.begin());
}

double BlendOrder::share(size_t source) const {
  return cumulative_[source] - (source == 0 ? 0.0 : cumulative_[source - 1]);
}

}  // namespace kiln
