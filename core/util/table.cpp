#include "core/util/table.h"

#include <algorithm>

namespace kiln {

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    n += (c & 0xC0) != 0x80;  // count UTF-8 lead bytes, not continuation bytes
  return n;
}

std::string render_text_table(const Table& table) {
  std::vector<size_t> widths(table.header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], display_width(row[i]));
  };
  measure(table.header);
  for (const auto& row : table.rows)
    measure(row);
  auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(widths[i] - display_width(row[i]), ' ');
      out += (i ? "  " : "") + (table.numeric[i] ? pad + row[i] : row[i] + pad);
    }
    return out.erase(out.find_last_not_of(' ') + 1) + "\n";
  };
  std::string out = line(table.header);
  for (const auto& row : table.rows)
    out += line(row);
  return out;
}

}  // namespace kiln
