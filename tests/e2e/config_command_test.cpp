// `kiln config` and the provenance a run keeps: an experiment that extends another, printed with
// where each value came from, trained, shown and diffed. The SHA-256 of each file is checked
// against sha256sum's.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using ConfigCommand = testing::TinyRun;

// sha256sum's digest of the file.
std::string sha256sum(const std::string& path) {
  FILE* pipe = ::popen(("sha256sum '" + path + "'").c_str(), "r");
  char digest[64] = {};
  const size_t n = std::fread(digest, 1, sizeof digest, pipe);
  ::pclose(pipe);
  return std::string(digest, n);
}

// The line of `output` that assigns `key` (`key = ...  # source`), or "".
std::string line_of(const std::string& output, const std::string& key) {
  std::smatch match;
  const std::regex line("(^|\n)(" + key + " = [^\n]*)");
  return std::regex_search(output, match, line) ? match[2].str() : "";
}

// `key = value`, padding, `# source`: the padding is the printer's, the rest is checked.
void expect_line(const std::string& output, const std::string& key, const std::string& value,
                 const std::string& source) {
  const std::string line = line_of(output, key);
  EXPECT_TRUE(std::regex_match(line, std::regex(key + " = " + value + " *  # " + source)))
      << "expected " << key << " = " << value << "  # " << source << ", got: " << line;
}

TEST_F(ConfigCommand, PrintsEveryKeyWithWhereItCameFromAndTheFilesRead) {
  const std::string base = experiment();
  const std::string derived = dir_ / "derived.toml";
  testing::write_text(derived, "extends = \"tiny.toml\"\n\n[train]\nsteps = 5\n");
  auto result = run_kiln("config " + derived + " --set optimizer.lr=0.02");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string& out = result.output;
  expect_line(out, "steps", "5", derived + ":4");
  expect_line(out, "lr", "0.02", "--set");
  expect_line(out, "n_layer", "2", base + ":8");
  expect_line(out, "bias", "true", "default \\(plugin gpt\\)");
  expect_line(out, "grad_clip", "1.0", "default");
  EXPECT_TRUE(std::regex_search(out, std::regex("\\[optimizer\\]\ntype = \"adamw\" +# default\n")))
      << out;
  EXPECT_NE(out.find(base + "     sha256 " + sha256sum(base)), std::string::npos) << out;
  EXPECT_NE(out.find(derived + "  sha256 " + sha256sum(derived)), std::string::npos) << out;

  // What it prints is TOML that loads again, to the same config hash.
  const std::string printed = dir_ / "printed.toml";
  testing::write_text(printed, out);
  auto again = run_kiln("config " + printed);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  auto hash = [](const std::string& text) {
    std::smatch match;
    return std::regex_search(text, match, std::regex("config hash ([0-9a-f]{16})")) ? match[1].str()
                                                                                    : "";
  };
  EXPECT_FALSE(hash(out).empty()) << out;
  EXPECT_EQ(hash(again.output), hash(out));
}

TEST_F(ConfigCommand, ARunKeepsItsFilesAndDiffSaysWhereEachValueCameFrom) {
  const std::string base = experiment();
  const std::string derived = dir_ / "derived.toml";
  testing::write_text(derived, "extends = \"tiny.toml\"\n\n[train]\nsteps = 5\n");
  ASSERT_EQ(run_kiln("run " + derived + " --name d").exit_code, 0);
  ASSERT_EQ(run_kiln("run " + base + " --name t --set train.steps=3").exit_code, 0);
  EXPECT_EQ(testing::scalar(db(),
                            "select group_concat(file, ', ') from (select path || ' ' || "
                            "sha256 as file from run_files join runs on runs.id = run_id where "
                            "name = 'd' order by position)"),
            base + " " + sha256sum(base) + ", " + derived + " " + sha256sum(derived));

  auto show = run_kiln("runs show d --db " + db());
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("files, in the order applied"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find(derived + "  " + sha256sum(derived)), std::string::npos)
      << show.output;

  auto diff = run_kiln("runs diff t d --db " + db());
  ASSERT_EQ(diff.exit_code, 0) << diff.output;
  EXPECT_NE(diff.output.find("t and d: 1 config key differs"), std::string::npos) << diff.output;
  EXPECT_EQ(testing::words_of_line(diff.output, "train.steps"),
            std::vector<std::string>({"train.steps", "3", "--set", "5", derived + ":4"}))
      << diff.output;

  // A resume's --set becomes the source of the key it sets; the others keep theirs.
  auto resumed = run_kiln("resume t --set train.steps=4 --set eval.every=2 --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  diff = run_kiln("runs diff t d --db " + db());
  EXPECT_EQ(testing::words_of_line(diff.output, "eval.every"),
            std::vector<std::string>({"eval.every", "2", "--set", "10", base + ":27"}))
      << diff.output;
}

// A store's password given in run.db is refused by `kiln config` as by `kiln run`, and neither
// prints it: the same rule wherever a config is read.
TEST_F(ConfigCommand, AStorePasswordIsRefusedAndNeverPrinted) {
  for (const std::string& db : {std::string("host=db.example user=kiln password=hunter2"),
                                std::string("postgresql://kiln:hunter2@db.example/runs")}) {
    for (const std::string command : {"config", "run"}) {
      const std::string args = command + " " + experiment() + " --set 'run.db=\"" + db + "\"'";
      auto result = run_kiln(args);
      testing::expect_one_error_line(result, args, "carries a password");
      EXPECT_EQ(result.output.find("hunter2"), std::string::npos) << result.output;
    }
  }
}

}  // namespace
}  // namespace kiln
