// Which snapshots are a run's own (core/checkpoint/snapshot_catalog.h): a snapshot is
// judged by what its manifest names, which this test writes by hand, so nothing here is what
// Kiln computed itself.
#include "core/checkpoint/snapshot_catalog.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#define XXH_INLINE_ALL  // compiled in, as core/checkpoint/snapshot.cpp has it
#include <xxhash.h>

#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const std::string kRun = "1a2b3c4d-0000-4000-8000-000000000000";
const std::string kOther = "9f8e7d6c-0000-4000-8000-000000000000";

class SnapshotCatalog : public ::testing::Test {
 protected:
  // A snapshot folder whose manifest.json is `manifest` (no other file: ownership is all these
  // tests ask about).
  void make(const std::string& label, const std::string& manifest) {
    testing::write_text(dir_ / label + "/manifest.json", manifest);
  }
  void make_owned_by(const std::string& label, const std::string& run, const std::string& hash) {
    make(label, "{\"format\": 1, \"run\": \"" + run + "\", \"config_hash\": \"" + hash +
                    "\", \"files\": {}}");
  }

  static std::vector<std::string> labels(const std::vector<SnapshotRef>& snapshots) {
    std::vector<std::string> out;
    for (const auto& s : snapshots)
      out.push_back(s.label);
    return out;
  }
  std::set<std::string> on_disk() const {
    std::set<std::string> out;
    for (const auto& entry : fs::directory_iterator(dir_.str()))
      out.insert(entry.path().filename().string());
    return out;
  }

  testing::TempDir dir_;
};

TEST_F(SnapshotCatalog, OnlyTheRunsOwnAreUsedAndEveryOtherIsNamed) {
  make_owned_by("step_000001", kRun, "h1");
  make_owned_by("step_000002", kOther, "h1");             // another run's
  make("step_000003", "{\"format\": 1, \"files\": {}}");  // an unmarked one
  make_owned_by("step_000004", kRun, "zz");               // a hash the run never had
  make("step_000005", "{not json");                       // damaged: verify reports it
  make_owned_by("step_000006", kRun, "h2");               // after a resume that changed the hash
  const SnapshotOwner owner{kRun, {"h1", "h2"}, false, {}};
  const RunSnapshots found = owned_snapshots(dir_.str(), owner);
  EXPECT_EQ(labels(found.own),
            (std::vector<std::string>{"step_000001", "step_000005", "step_000006"}));
  ASSERT_EQ(found.foreign.size(), 3u);
  EXPECT_NE(found.foreign[0].find("step_000002' belongs to another run (" + kOther + ")"),
            std::string::npos)
      << found.foreign[0];
  EXPECT_NE(found.foreign[1].find("step_000003' names no run"), std::string::npos);
  EXPECT_NE(found.foreign[2].find("config hash 'zz', which this run never had"), std::string::npos);

  // A run made before run identities: its unmarked snapshots that the store lists are its own.
  const SnapshotOwner legacy{kRun, {"h1"}, true, {"step_000003"}};
  EXPECT_EQ(labels(owned_snapshots(dir_.str(), legacy).own),
            (std::vector<std::string>{"step_000001", "step_000003", "step_000005"}));
}

TEST_F(SnapshotCatalog, NoneOfTheRunsOwnIsAClearErrorNamingTheOthers) {
  make_owned_by("step_000002", kOther, "h1");
  const SnapshotOwner owner{kRun, {"h1"}, false, {}};
  std::vector<std::string> warnings;
  try {
    select_snapshot(owned_snapshots(dir_.str(), owner), dir_.str(), "latest",
                    [&](const std::string& w) { warnings.push_back(w); });
    FAIL() << "a foreign snapshot was selected";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no snapshot of this run in"), std::string::npos) << what;
    EXPECT_NE(what.find("step_000002' belongs to another run"), std::string::npos) << what;
  }
  EXPECT_TRUE(warnings.empty());
}

// A run stopped after an evaluation and before its first regular snapshot has best ones only:
// "latest" is the newest of them, said in one warning (so that such a run resumes).
// A snapshot that verifies: its three files, each listed in the manifest with its size and XXH3
// (computed here with xxHash itself, as the snapshot format defines it).
void make_intact(const std::string& dir, const std::string& run, const std::string& hash) {
  nlohmann::json files = nlohmann::json::object();
  for (const char* name : {"model.pt", "optimizer.pt", "state.json"}) {
    const std::string bytes = std::string("contents of ") + name;
    testing::write_text(dir + "/" + name, bytes);
    files[name] = {{"bytes", bytes.size()},
                   {"xxh3", fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size()))}};
  }
  const nlohmann::json manifest = {
      {"format", 1}, {"run", run}, {"config_hash", hash}, {"files", files}};
  testing::write_text(dir + "/manifest.json", manifest.dump());
}

TEST_F(SnapshotCatalog, LatestOfARunWithBestSnapshotsOnlyIsItsNewestBest) {
  make_intact(dir_ / "best_000003", kRun, "h1");
  make_intact(dir_ / "best_000005", kRun, "h1");
  const SnapshotOwner owner{kRun, {"h1"}, false, {}};
  std::vector<std::string> warnings;
  const SnapshotRef picked =
      select_snapshot(owned_snapshots(dir_.str(), owner), dir_.str(), "latest",
                      [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_EQ(picked.label, "best_000005");
  EXPECT_EQ(picked.step, 5);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("no intact regular snapshot"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("best_000005 (step 5)"), std::string::npos) << warnings[0];
}

TEST_F(SnapshotCatalog, PruningDeletesOnlyTheRunsOwn) {
  for (const char* label : {"step_000001", "step_000003", "step_000004", "best_000003"})
    make_owned_by(label, kRun, "h1");
  make_owned_by("step_000002", kOther, "h1");
  make_owned_by("best_000001", kOther, "h1");
  make("step_000005", "{\"format\": 1, \"files\": {}}");
  make("step_000000", "{not json");
  const std::vector<SnapshotRef> removed =
      prune_snapshots(dir_.str(), /*keep=*/1, SnapshotOwner{kRun, {"h1"}, false, {}});
  EXPECT_EQ(labels(removed), (std::vector<std::string>{"step_000001", "step_000003"}));
  EXPECT_EQ(on_disk(), (std::set<std::string>{"step_000000", "step_000002", "best_000001",
                                              "step_000004", "step_000005", "best_000003"}));
}

}  // namespace
}  // namespace kiln
