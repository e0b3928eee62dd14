// Run identities (core/store/runs/paths.h): the one rule for run names and what its
// message promises, uuids, folders that names cannot share or reach into, and run ids that
// `kiln runs rm` never frees for reuse, in new stores and in stores migrated from before.
#include "core/store/runs/paths.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/store/history/queries.h"
#include "core/store/history/reader.h"
#include "core/store/history/removal.h"
#include "core/store/runs/writer.h"
#include "core/util/error.h"
#include "fake_runs.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string name_error(const std::string& name) {
  try {
    check_run_name(name, "pick another");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(RunName, TheRuleAcceptsWhatItsMessageSaysAndNothingElse) {
  // What tests, sweeps (members are <sweep>/<key=value,...>, values in canonical form) and
  // default names (experiment-YYYYmmdd-HHMMSS) need.
  for (const std::string& ok : std::vector<std::string>{
           "a", "x/snapshots/step_000005", "lr-sweep/optimizer.lr=0.003,run.seed=1",
           "sw/precision.type=bf16,model.dropout=0.5,train.compile=true", "big/optimizer.lr=1e+20",
           "dev/run.device=cuda:0", "kjv_char-20250101-120000", "-x", ".hidden",
           std::string(200, 'a')}) {
    EXPECT_TRUE(is_run_name(ok)) << ok;
    EXPECT_EQ(name_error(ok), "") << ok;
  }
  for (const std::string& bad : std::vector<std::string>{
           "", "a b", "caf\xc3\xa9", "a*", "what?", "x@1a2b3c4d", "/abs", "a//b", "a/", "../up",
           "a/./b", "a/..", "tab\there", "back\\slash", "quote\"", std::string(201, 'a')}) {
    EXPECT_FALSE(is_run_name(bad)) << bad;
    const std::string error = name_error(bad);
    EXPECT_NE(error.find("cannot be used"), std::string::npos) << bad;
    EXPECT_NE(error.find("1 to 200 characters from ASCII letters, digits and . _ - = , + : in "
                         "parts separated by single '/' (no empty, '.' or '..' part, no leading "
                         "or trailing '/')"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find(": pick another"), std::string::npos) << error;
  }
}

TEST(RunName, UuidsAreVersion4AndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 2000; ++i) {
    const std::string uuid = new_run_uuid();
    ASSERT_TRUE(is_run_uuid(uuid)) << uuid;
    EXPECT_EQ(uuid[14], '4') << uuid;
    EXPECT_NE(std::string("89ab").find(uuid[19]), std::string::npos) << uuid;
    seen.insert(uuid);
  }
  EXPECT_EQ(seen.size(), 2000u);
  EXPECT_FALSE(is_run_uuid("1A2B3C4D-0000-4000-8000-000000000000"));  // uppercase
  EXPECT_FALSE(is_run_uuid("1a2b3c4d00004000800000000000000000000"));
}

// Whether `path` is `dir` or lies under it, by path components.
bool inside(const std::string& path, const std::string& dir) {
  const fs::path p(path), d(dir);
  return std::mismatch(d.begin(), d.end(), p.begin(), p.end()).first == d.end();
}

TEST(RunName, FoldersAreAbsoluteAndNoNameReachesAnothersFolder) {
  const std::string uuid = "1a2b3c4d-0000-4000-8000-000000000000";
  const RunPaths sweep_member = RunPaths::for_new_run("runs", "sw/lr=1", uuid);
  EXPECT_EQ(sweep_member.folder(), (fs::current_path() / "runs/sw/lr=1@1a2b3c4d").string());
  EXPECT_EQ(RunPaths::for_new_run("/o/./runs/", "x", uuid).folder(), "/o/runs/x@1a2b3c4d");
  const std::string other = "9f8e7d6c-0000-4000-8000-000000000000";
  const RunPaths a = RunPaths::for_new_run("/o", "a", uuid);
  const RunPaths a_b = RunPaths::for_new_run("/o", "a/b", other);
  const RunPaths nested = RunPaths::for_new_run("/o", "a/snapshots/step_000005", other);
  const RunPaths twin = RunPaths::for_new_run("/o", "a", other);  // same name, another run
  for (const RunPaths* p : {&a_b, &nested, &twin}) {
    EXPECT_FALSE(inside(p->folder(), a.folder())) << p->folder();
    EXPECT_FALSE(inside(a.snapshots(), p->folder())) << p->folder();
  }
  EXPECT_THROW(RunPaths::for_new_run("/o", "a b", uuid), UserError);
}

TEST(RunName, TheMarkerNamesTheRun) {
  testing::TempDir dir;
  const std::string uuid = new_run_uuid();
  const RunPaths paths = RunPaths::for_new_run(dir.str(), "m", uuid);
  EXPECT_FALSE(read_run_marker(paths));
  write_run_marker(paths, uuid, "/stores/kiln.db");
  const auto marker = read_run_marker(paths);
  ASSERT_TRUE(marker);
  EXPECT_EQ(marker->uuid, uuid);
  EXPECT_EQ(marker->stores, std::vector<std::string>{"/stores/kiln.db"});
  // A marker of a Kiln before store lists: the uuid alone.
  testing::write_text(paths.marker(), "{\"kiln_run\": \"" + uuid + "\", \"name\": \"m\"}\n");
  EXPECT_TRUE(read_run_marker(paths)->stores.empty());
  testing::write_text(paths.marker(), "{not json");
  EXPECT_FALSE(read_run_marker(paths));
}

using testing::new_run;

TEST(RunIds, AreNeverReusedAfterARunIsRemoved) {
  testing::TempDir dir;
  const std::string db_path = dir / "kiln.db";
  {
    RunStore store(db_path);
    EXPECT_EQ(store.create_run(new_run("a")), 1);
    EXPECT_EQ(store.create_run(new_run("b")), 2);
    EXPECT_EQ(store.create_run(new_run("c")), 3);
  }
  {
    HistoryDb db(db_path);
    const auto quiet = [](const std::string&) {};
    remove_run(db, find_run_record(db, "c"), quiet);
    remove_run(db, find_run_record(db, "b"), quiet);
  }
  RunStore store(db_path);
  EXPECT_EQ(store.create_run(new_run("d")), 4);  // not 2 or 3
  EXPECT_EQ(store.find_run("3"), std::nullopt);  // id 3 names nothing, then or ever
  EXPECT_EQ(store.find_run("4")->name, "d");
  const RunRecord d = store.require_run("d");
  EXPECT_TRUE(is_run_uuid(d.uuid)) << d.uuid;
  EXPECT_NE(d.uuid, store.require_run("a").uuid);
  EXPECT_EQ(d.folder, "");  // made without one: a run with no folder of its own
}

// A store from before run identities (schema version 3), made by undoing that migration and the
// later ones (bench results, run sources), in which an older kiln removed run c (id 3).
TEST(RunIds, AStoreFromBeforeGetsUuidsNoFolderAndNoReusedIds) {
  testing::TempDir dir;
  const std::string db_path = dir / "kiln.db";
  {
    RunStore store(db_path);
    for (const char* name : {"a", "b", "c"})
      store.create_run(new_run(name));
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(raw,
                   "DELETE FROM runs WHERE name = 'c'; DROP TABLE run_ids; "
                   "DROP TABLE task_scores; DROP TABLE run_input_files; DROP TABLE run_inputs; "
                   "DROP TABLE bench_results; DROP TABLE run_files; "
                   "DROP TABLE run_key_sources; DROP TABLE sweep_members; "
                   "DROP TABLE sweeps; DROP TABLE sweep_claims; DROP TABLE sweep_decisions; "
                   "DROP TABLE sweep_proposals; DROP TABLE sweep_ladders; DROP TABLE "
                   "run_environment; DROP TABLE rung_probes; DROP TABLE layer_metrics; "
                   "ALTER TABLE runs DROP "
                   "COLUMN config_json; "
                   "ALTER TABLE metrics DROP COLUMN counted_tokens; "
                   "ALTER TABLE metrics DROP COLUMN source_tokens; "
                   "ALTER TABLE evals DROP COLUMN counted_tokens; "
                   "DROP TABLE run_config_hashes; DROP INDEX runs_by_uuid; "
                   "ALTER TABLE runs DROP COLUMN uuid; ALTER TABLE runs DROP COLUMN folder; "
                   "PRAGMA user_version = 3",
                   nullptr, nullptr, nullptr),
      SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
  {
    HistoryDb old(db_path);  // read as it is, without upgrading
    const RunRecord b = find_run_record(old, "b");
    EXPECT_EQ(b.uuid, "");
    EXPECT_EQ(b.folder, "");
    // Before run identities the store knows only a run's current hash.
    EXPECT_EQ(run_config_hashes(old.connection(), b), std::vector<std::string>{b.config_hash});
    // `kiln runs rm` upgrades the store before it deletes: b's id is remembered.
    remove_run(old, b, [](const std::string&) {});
  }
  RunStore store(db_path);
  const RunRecord a = store.require_run("a");
  EXPECT_TRUE(is_run_uuid(a.uuid)) << a.uuid;
  EXPECT_EQ(a.folder, "");  // its legacy folder: <out_dir>/<name>
  EXPECT_EQ(run_config_hashes(store.connection(), a), std::vector<std::string>{"0123456789abcdef"});
  // Not 2 (b's); 3 was c's, which the older kiln freed before any record of it was kept.
  EXPECT_EQ(store.create_run(new_run("d")), 3);
  EXPECT_EQ(store.create_run(new_run("e")), 4);
  EXPECT_NE(store.require_run("d").uuid, a.uuid);
}

}  // namespace
}  // namespace kiln
