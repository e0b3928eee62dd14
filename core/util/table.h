// Tables of text cells: what `kiln runs`, `kiln sweep` and `kiln report` show as rows and
// columns. The cells are final text; render_text_table aligns them for a terminal, and the HTML
// report renders the same Table its own way.
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> numeric;  // right-aligned columns
};

// Columns two spaces apart, each as wide as its widest cell; no trailing spaces.
std::string render_text_table(const Table& table);

// Columns a UTF-8 string takes in a terminal, counting each code point as one.
size_t display_width(const std::string& s);

}  // namespace kiln
