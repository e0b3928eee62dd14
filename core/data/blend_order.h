// Which source fills each row of a blend (data "blend", plugins/data_blend.cpp): row g of a split's
// stream is drawn from source k with probability weight_k / sum of the weights, independently of
// every other row, by a counter-based draw: u = SplitMix64(key, g) as a number in [0, 1), against
// the cumulative shares, where key = SplitMix64(seed, FNV-1a of the split's name). So a row's
// source is a pure function of (seed, split, g, the weights): the same at any world size and
// micro-batch split, and over N rows a source's count is Binomial(N, its share).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln {

class BlendOrder {
 public:
  // weights: positive, one per source, in the blend's order.
  BlendOrder(const std::vector<double>& weights, uint64_t seed, std::string_view split);

  size_t source_of(int64_t row) const;
  size_t sources() const { return cumulative_.size(); }
  double share(size_t source) const;  // weight / sum of the weights

 private:
  std::vector<double> cumulative_;  // the shares summed, the last exactly 1
  uint64_t key_;
};

}  // namespace kiln
