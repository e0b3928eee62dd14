// Every config a user is shown must load: each file in experiments/ (sweep files through the
// sweep loader, every member expanded and checked) and each ```toml example in README.md and the
// docs/ pages. The files are found by listing the folders and scanning the documents here, so a
// new experiment, page or example is covered without touching this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/app/sweeps/spec.h"
#include "core/app/sweeps/spec_file.h"
#include "core/config/config.h"
#include "core/data/task_file.h"
#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A sweep file by what it says, independently of Kiln's own is_sweep_file(): a top-level
// `base = ...` line, or "sweep" in its name.
bool looks_like_sweep(const std::string& file_name, const std::string& text) {
  static const std::regex base_line(R"((^|\n)[ \t]*base[ \t]*=)");
  return file_name.find("sweep") != std::string::npos || std::regex_search(text, base_line);
}

// Loads a sweep file and expands it: every member's config is validated against the base.
void expect_sweep_loads(const std::string& path) {
  SCOPED_TRACE(path);
  EXPECT_TRUE(is_sweep_file(path));
  try {
    const SweepSpec spec = load_sweep_file(path);
    const std::vector<SweepMember> members = expand_sweep(spec);
    EXPECT_FALSE(members.empty());
    for (const auto& member : members)
      EXPECT_EQ(member.name.rfind(spec.name + "/", 0), 0u) << member.name;
  } catch (const UserError& e) {
    ADD_FAILURE() << e.what();
  }
}

TEST(ShippedConfigs, EveryExperimentFileLoads) {
  // Sweep files name their base experiment relative to the source tree, as users run kiln there.
  const testing::InDirectory in_source_tree(KILN_SOURCE_DIR);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator("experiments")) {
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  int experiments = 0, sweeps = 0;
  for (const auto& file : files) {
    const std::string path = file.string();
    if (looks_like_sweep(file.filename().string(), testing::read_file(path))) {
      expect_sweep_loads(path);
      ++sweeps;
      continue;
    }
    SCOPED_TRACE(path);
    EXPECT_FALSE(is_sweep_file(path));
    try {
      EXPECT_FALSE(load_config(path, {}).type("model").empty());
    } catch (const UserError& e) {
      ADD_FAILURE() << e.what();
    }
    ++experiments;
  }
  // Guards against an empty listing passing vacuously.
  EXPECT_GE(experiments, 1);
  EXPECT_GE(sweeps, 1);
  std::cout << experiments << " experiment files and " << sweeps << " sweep files loaded\n";
}

struct TomlBlock {
  std::string where;  // the document and the line of the opening fence: docs/sweeps.md:12
  std::string text;
};

// The ```toml blocks of one document (README.md, docs/x.md). Fences may be indented (a block
// inside a numbered list): the body loses that indentation.
void add_toml_blocks(const std::string& document, std::vector<TomlBlock>& blocks) {
  const std::string readme = testing::read_file(std::string(KILN_SOURCE_DIR) + "/" + document);
  const std::string open = "```toml\n";
  for (size_t at = readme.find(open); at != std::string::npos; at = readme.find(open, at + 1)) {
    const size_t line_start = readme.rfind('\n', at) + 1;  // npos + 1 == 0 on the first line
    const std::string indent = readme.substr(line_start, at - line_start);
    if (indent.find_first_not_of(' ') != std::string::npos) continue;  // not a fence
    const size_t body = at + open.size();
    const size_t close = readme.find("\n" + indent + "```", body - 1);
    if (close == std::string::npos) break;
    const int line = static_cast<int>(std::count(readme.begin(), readme.begin() + at, '\n')) + 1;
    std::string text;
    std::istringstream lines(readme.substr(body, close + 1 - body));
    for (std::string l; std::getline(lines, l);)
      text += (l.compare(0, indent.size(), indent) == 0 ? l.substr(indent.size()) : l) + "\n";
    blocks.push_back({document + ":" + std::to_string(line), text});
  }
}

// README.md's and every docs/ page's, found by listing the folder.
std::vector<TomlBlock> documented_toml_blocks() {
  std::vector<TomlBlock> blocks;
  add_toml_blocks("README.md", blocks);
  std::vector<std::string> pages;
  for (const auto& entry : fs::directory_iterator(fs::path(KILN_SOURCE_DIR) / "docs")) {
    if (entry.path().extension() == ".md")
      pages.push_back("docs/" + entry.path().filename().string());
  }
  std::sort(pages.begin(), pages.end());
  for (const auto& page : pages)
    add_toml_blocks(page, blocks);
  return blocks;
}

TEST(ShippedConfigs, EveryTomlExampleInTheReadmeAndDocsLoads) {
  // Sweep files name their base experiment relative to the source tree, as users run kiln there.
  const testing::InDirectory in_source_tree(KILN_SOURCE_DIR);
  testing::TempDir scratch;
  const auto blocks = documented_toml_blocks();
  ASSERT_GE(blocks.size(), 8u) << "too few ```toml examples found in README.md and docs/";
  size_t index = 0;
  for (const auto& block : blocks) {
    const std::string& where = block.where;
    SCOPED_TRACE(where);
    if (looks_like_sweep("", block.text)) {
      const std::string path = scratch / ("example_" + std::to_string(index++) + ".toml");
      testing::write_text(path, block.text);
      expect_sweep_loads(path);
      continue;
    }
    // An evaluation task file (docs/tasks.md) is read as one, beside the items it names.
    if (std::regex_search(block.text, std::regex("(^|\n)kind = "))) {
      const std::string path = scratch / ("example_" + std::to_string(index++) + ".toml");
      testing::write_text(path, block.text);
      try {
        EXPECT_FALSE(read_task_spec(path).name.empty());
      } catch (const UserError& e) {
        ADD_FAILURE() << e.what();
      }
      continue;
    }
    // A fragment (a section or two) is completed with the one section that has no default. Its
    // paths are written as from the source tree's root, as a user in a checkout types them.
    const bool fragment = block.text.find("[model]") == std::string::npos;
    const std::string text = fragment ? block.text + "\n[model]\ntype = \"gpt\"\n" : block.text;
    try {
      const std::string name = fs::path(where).filename().string();
      EXPECT_FALSE(load_config_text(text, name, {}).type("model").empty());
    } catch (const UserError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln
