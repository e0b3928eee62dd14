#include "core/data/packing.h"

#include <stdexcept>

namespace kiln {

std::vector<int64_t> pack_in_order(const std::vector<int64_t>& lengths, int64_t row_length) {
  std::vector<int64_t> rows{0};
  int64_t used = 0;  // places taken in the row being filled
  for (size_t d = 0; d < lengths.size(); ++d) {
    if (lengths[d] < 1 || lengths[d] > row_length) {
      throw std::invalid_argument("pack_in_order: a document longer than a row, or empty");
    }
    if (used + lengths[d] > row_length) {
      rows.push_back(static_cast<int64_t>(d));
      used = 0;
    }
    used += lengths[d];
  }
  if (!lengths.empty()) rows.push_back(static_cast<int64_t>(lengths.size()));
  return rows;
}

void positions_after_separators(const int64_t* tokens, int64_t count, int64_t separator,
                                int64_t* positions) {
  for (int64_t i = 0; i < count; ++i)
    positions[i] = i == 0 || tokens[i - 1] == separator ? 0 : positions[i - 1] + 1;
}

}  // namespace kiln
