// docs/layout.md read as data, so that the house tests and the page cannot disagree: the rooms of
// core/ in the order of its room table (bottom to top), the sub-rooms of each split room in the
// order of their own table, and every table row with the folder it describes and the names in it.
#pragma once

#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "test_util.h"

namespace kiln::testing {

// A table row whose first cell names a folder: `core/util/`, or `db/` under "The sub-rooms of
// `core/store/`", or `plugins/llama/`.
struct LayoutRow {
  std::filesystem::path folder;  // relative to the source tree, without the trailing '/'
  std::string text;              // the whole row as written
  size_t line = 0;               // in docs/layout.md, from 1
};

// A line of the page outside code fences, tables and headings.
struct LayoutProse {
  std::string text;
  size_t line = 0;
};

struct Layout {
  std::vector<std::string> rooms;                             // core/'s rooms, bottom to top
  std::map<std::string, std::vector<std::string>> sub_rooms;  // room -> its sub-rooms, the same
  std::vector<LayoutRow> rows;
  std::vector<LayoutProse> prose;
};

inline std::filesystem::path layout_doc_path() {
  return std::filesystem::path(KILN_SOURCE_DIR) / "docs" / "layout.md";
}

// The `code` spans of a line of Markdown, without their backticks.
inline std::vector<std::string> code_spans_of(const std::string& line) {
  static const std::regex span("`([^`]+)`");
  std::vector<std::string> out;
  for (std::sregex_iterator it(line.begin(), line.end(), span), end; it != end; ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

// The first cell of a table row, trimmed and without backticks.
inline std::string first_cell_of(const std::string& row) {
  const auto end = row.find('|', 1);
  std::string cell = row.substr(1, end == std::string::npos ? std::string::npos : end - 1);
  std::erase(cell, '`');
  const auto first = cell.find_first_not_of(' ');
  const auto last = cell.find_last_not_of(' ');
  return first == std::string::npos ? "" : cell.substr(first, last - first + 1);
}

inline Layout read_layout() {
  static const std::regex sub_room_heading(R"(^#+ The sub-rooms of `core/([a-z_]+)/`)");
  static const std::regex room_cell(R"(^core/([a-z_]+)/$)");
  Layout layout;
  std::string split_room;  // the room whose sub-room table the rows below belong to
  bool in_fence = false;
  size_t number = 0;
  for (const auto& line : read_lines(layout_doc_path())) {
    ++number;
    if (line.rfind("```", 0) == 0) in_fence = !in_fence;
    if (in_fence || line.rfind("```", 0) == 0) continue;
    std::smatch m;
    if (line.rfind('#', 0) == 0) {
      split_room = std::regex_search(line, m, sub_room_heading) ? std::string(m[1]) : "";
      continue;
    }
    if (line.rfind('|', 0) != 0) {
      layout.prose.push_back({line, number});
      continue;
    }
    const std::string cell = first_cell_of(line);
    if (cell.empty() || cell.back() != '/') continue;  // the header row or the rule under it
    const std::string folder = split_room.empty() ? cell : "core/" + split_room + "/" + cell;
    layout.rows.push_back({folder.substr(0, folder.size() - 1), line, number});
    if (!split_room.empty()) {
      layout.sub_rooms[split_room].push_back(cell.substr(0, cell.size() - 1));
    } else if (std::regex_match(cell, m, room_cell)) {
      layout.rooms.push_back(m[1]);
    }
  }
  return layout;
}

// The page, read once per test process.
inline const Layout& layout_doc() {
  static const Layout layout = read_layout();
  return layout;
}

}  // namespace kiln::testing
