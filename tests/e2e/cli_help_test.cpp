// `kiln --help` and every command's --help, as a user reads them: each command is listed with a
// one-line description, its help shows the options' defaults and ends by naming the docs/ page
// that documents it, and that page exists in the source tree. The commands are found by walking
// the help output itself, so a new command is covered without a line here.
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/test_util.h"

namespace kiln {
namespace {

using testing::run_kiln;

// The subcommands a help text lists under "Subcommands:" (CLI11), each with its description.
struct Listed {
  std::string name, description;
};
std::vector<Listed> subcommands_of(const std::string& help) {
  std::vector<Listed> out;
  const auto header = help.find("Subcommands:");
  if (header == std::string::npos) return out;
  static const std::regex row(R"(^  (\S+)\s+(\S.*)$)");
  std::istringstream lines(help.substr(header));
  std::string line;
  std::getline(lines, line);  // the header itself
  while (std::getline(lines, line) && !line.empty()) {
    std::smatch m;
    if (std::regex_match(line, m, row)) out.push_back({m[1], m[2]});
  }
  return out;
}

// Checks `kiln PATH --help` and then each command it lists.
void check_help(const std::string& path, int depth) {
  const auto result = run_kiln(path + " --help");
  ASSERT_EQ(result.exit_code, 0) << "kiln " << path << " --help\n" << result.output;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(result.output, m, std::regex(R"(Documented in (docs/[a-z-]+\.md))")))
      << "kiln " << path << " --help names no docs/ page:\n"
      << result.output;
  EXPECT_TRUE(std::filesystem::is_regular_file(std::string(KILN_SOURCE_DIR) + "/" + m[1].str()))
      << "kiln " << path << " --help names " << m[1] << ", which does not exist";
  ASSERT_LT(depth, 3) << "commands nest deeper than kiln's groups do: " << path;
  for (const auto& sub : subcommands_of(result.output)) {
    EXPECT_GE(sub.description.size(), 10u) << path << " " << sub.name << " lacks a description";
    check_help(path + " " + sub.name, depth + 1);
  }
}

TEST(CliHelp, EveryCommandSaysWhatItDoesAndNamesItsPageInDocs) {
  const auto top = run_kiln("--help");
  ASSERT_EQ(top.exit_code, 0) << top.output;
  EXPECT_NE(top.output.find("README.md"), std::string::npos) << top.output;
  const auto commands = subcommands_of(top.output);
  ASSERT_GE(commands.size(), 10u) << "kiln --help lists too few commands:\n" << top.output;
  for (const auto& command : commands) {
    EXPECT_GE(command.description.size(), 10u) << command.name << " lacks a description";
    check_help(command.name, 1);
  }
}

// An option's default is on its help line: after '=' in CLI11 2.1 (Debian 12), in brackets from 2.4
// (Debian 13, sid). `kiln sweep --jobs` defaults to 1 and `kiln serve --port` to 6006
// (TensorBoard's), the values their variables hold before parsing.
TEST(CliHelp, OptionsShowTheirDefaults) {
  const auto sweep = run_kiln("sweep --help");
  EXPECT_TRUE(std::regex_search(sweep.output, std::regex(R"(--jobs INT(=1 | \[1\]))")))
      << sweep.output;
  const auto serve = run_kiln("serve --help");
  EXPECT_TRUE(
      std::regex_search(serve.output, std::regex(R"(--port INT[^\n]*(=6006|\[6006\]) *\n)")))
      << serve.output;
}

TEST(CliHelp, PluginsListsKindsWithParameters) {
  auto result = run_kiln("plugins");
  ASSERT_EQ(result.exit_code, 0);
  for (const char* text :
       {"model plugins", "gpt", "n_layer", "optimizer plugins", "adamw", "sgd", "schedule plugins",
        "cosine", "min_lr_ratio", "[train]", "batch_tokens", "blend", "sources.NAME.weight"}) {
    EXPECT_NE(result.output.find(text), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace kiln
