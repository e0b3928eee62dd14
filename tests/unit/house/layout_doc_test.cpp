// docs/layout.md checked against the tree, so that the page a newcomer reads first stays the map of
// the sources: every header of core/ and plugins/ is named there, in the row of its folder or by
// its path, and every file and room the page names exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "layout_doc.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using kiln::testing::code_spans_of;
using kiln::testing::layout_doc;
using kiln::testing::LayoutRow;

fs::path tree_root() {
  return KILN_SOURCE_DIR;
}

// The headers under core/ and plugins/, relative to the tree: "core/util/error.h".
std::vector<fs::path> headers_of_the_house() {
  std::vector<fs::path> out;
  for (const auto& dir : {"core", "plugins"}) {
    for (const auto& entry : fs::recursive_directory_iterator(tree_root() / dir)) {
      if (entry.is_regular_file() && entry.path().extension() == ".h") {
        out.push_back(fs::relative(entry.path(), tree_root()));
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The row that describes the folder `file` lives in: the one whose folder is the longest that
// holds it (core/store/db/ before core/store/). Null when no row's folder holds it.
const LayoutRow* row_holding(const fs::path& file) {
  const LayoutRow* best = nullptr;
  for (const auto& row : layout_doc().rows) {
    const bool holds =
        std::mismatch(row.folder.begin(), row.folder.end(), file.begin(), file.end()).first ==
        row.folder.end();
    if (holds && (!best || row.folder.string().size() > best->folder.string().size())) best = &row;
  }
  return best;
}

bool names(const std::string& text, const std::string& name) {
  const auto spans = code_spans_of(text);
  return std::find(spans.begin(), spans.end(), name) != spans.end();
}

bool named_by_path(const fs::path& file) {
  const auto& layout = layout_doc();
  const auto names_it = [&](const auto& line) { return names(line.text, file.string()); };
  return std::any_of(layout.rows.begin(), layout.rows.end(), names_it) ||
         std::any_of(layout.prose.begin(), layout.prose.end(), names_it);
}

// A span that names a file of the tree: `writer.h`, `tools/setup.sh`; not `run.db` or
// `config.json`, names of files Kiln reads or writes, nor `tests/unit/<room>/`.
bool looks_like_a_source_file(const std::string& span) {
  static const std::regex file(R"(^[A-Za-z0-9_./+-]+\.(h|cpp|cmake|sh|py|txt|toml|md)$)");
  return std::regex_match(span, file);
}

TEST(HouseLayout, NamesEveryHeaderOfCoreAndPlugins) {
  const auto headers = headers_of_the_house();
  ASSERT_FALSE(headers.empty()) << "no headers under " << tree_root();
  for (const auto& header : headers) {
    if (named_by_path(header)) continue;
    const LayoutRow* row = row_holding(header);
    if (row && names(row->text, header.filename().string())) continue;
    const std::string where =
        row ? "in the row of `" + row->folder.string() + "/` (line " + std::to_string(row->line) +
                  ")"
            : "in a row for its folder `" + header.parent_path().string() + "/`";
    ADD_FAILURE() << header.string() << " is not named in docs/layout.md: add `"
                  << header.filename().string() << "` and what it holds " << where
                  << ", or name it by its path `" << header.string() << "`";
  }
}

TEST(HouseLayout, EveryFileAndRoomItNamesExists) {
  const auto& layout = layout_doc();
  size_t checked = 0;
  for (const auto& row : layout.rows) {
    const std::string top = row.folder.begin()->string();
    if ((top == "core" || top == "plugins") && !fs::is_directory(tree_root() / row.folder)) {
      ADD_FAILURE() << "docs/layout.md:" << row.line << " has a row for `" << row.folder.string()
                    << "/`, which is no folder of the tree: remove the row, or rename it";
    }
    for (const auto& span : code_spans_of(row.text)) {
      if (!looks_like_a_source_file(span)) continue;
      ++checked;
      EXPECT_TRUE(fs::exists(tree_root() / row.folder / span) || fs::exists(tree_root() / span))
          << "docs/layout.md:" << row.line << " names `" << span << "`, which is neither "
          << row.folder.string() << "/" << span << " nor " << span
          << " in the tree: correct the name, or remove it with what it says of the file";
    }
  }
  for (const auto& line : layout.prose) {
    for (const auto& span : code_spans_of(line.text)) {
      if (!looks_like_a_source_file(span)) continue;
      ++checked;
      EXPECT_TRUE(fs::exists(tree_root() / span))
          << "docs/layout.md:" << line.line << " names `" << span
          << "`, which is not in the tree: write its path from the top of the tree, or remove it";
    }
  }
  EXPECT_GE(checked, 100u) << "docs/layout.md names fewer files than it does: is its table "
                              "still read (rows start with `|`, the first cell a folder)?";
}

}  // namespace
