// What rearranging the code must not change, pinned by files an earlier Kiln wrote
// (tests/e2e/pins/): every shipped experiment's config hash (resume, snapshot ownership and seed
// groups compare hashes), the run store's schema as sqlite3 prints it, and the form of `kiln
// --version`.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <string>

#include "tiny_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::run_kiln;
using testing::run_shell;
using BehaviourPins = testing::TinyRun;

const std::string kPins = std::string(KILN_SOURCE_DIR) + "/tests/e2e/pins/";

// experiments/NAME.toml -> hash, from the pinned file (lines "path hash"; '#' starts a comment).
std::map<std::string, std::string> pinned_hashes() {
  std::map<std::string, std::string> hashes;
  for (const std::string& line : testing::read_lines(kPins + "config_hashes.txt")) {
    std::smatch match;
    if (std::regex_match(line, match, std::regex("(\\S+) ([0-9a-f]{16})")))
      hashes[match[1].str()] = match[2].str();
  }
  return hashes;
}

// The hash `kiln config` prints on its first line, or "" where the file is not an experiment.
std::string config_hash(const std::string& experiment) {
  const auto result = run_kiln("config " + experiment, KILN_SOURCE_DIR);
  std::smatch match;
  const std::regex first_line("^# \\S+: config hash ([0-9a-f]{16})\n");
  return std::regex_search(result.output, match, first_line) ? match[1].str() : "";
}

TEST(BehaviourPinsHashes, EveryShippedExperimentKeepsItsConfigHash) {
  const auto pinned = pinned_hashes();
  ASSERT_GE(pinned.size(), 8u);
  for (const auto& [experiment, hash] : pinned)
    EXPECT_EQ(config_hash(experiment), hash) << experiment;
  // A new experiment gets its pin with it, so that a later change cannot move its hash unseen.
  for (const auto& entry : fs::directory_iterator(fs::path(KILN_SOURCE_DIR) / "experiments")) {
    const std::string name = "experiments/" + entry.path().filename().string();
    if (entry.path().extension() != ".toml" || pinned.count(name)) continue;
    EXPECT_EQ(config_hash(name), "")
        << name << " is an experiment with no pinned hash in " << kPins << "config_hashes.txt";
  }
}

TEST_F(BehaviourPins, TheRunStoreSchemaIsWhatSqlite3PrintedBefore) {
  const auto trained = run_kiln("run " + experiment() + " --set train.steps=2");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto schema = run_shell("sqlite3 '" + db() + "' .schema");
  ASSERT_EQ(schema.exit_code, 0) << schema.output;
  std::string pinned = testing::read_file(kPins + "store_schema.sql");
  const std::string version = run_shell("sqlite3 '" + db() + "' 'pragma user_version'").output;
  EXPECT_NE(pinned.find("(user_version " + version.substr(0, version.find('\n')) + ")"),
            std::string::npos)
      << "user_version " << version;
  pinned.erase(0, pinned.find('\n') + 1);  // the comment line that says who wrote it
  EXPECT_EQ(schema.output, pinned);
}

TEST(BehaviourPinsVersion, VersionNamesTheCommitAndTheLibTorchItWasBuiltOn) {
  const auto result = run_kiln("--version");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(std::regex_match(result.output,
                               std::regex("kiln ([0-9a-f]{12}|\\(not built from a git checkout\\)) "
                                          "\\(LibTorch [0-9]+\\.[0-9]+\\.[0-9]+, (CPU|CUDA) "
                                          "build\\)\n")))
      << result.output;
}

}  // namespace
}  // namespace kiln
