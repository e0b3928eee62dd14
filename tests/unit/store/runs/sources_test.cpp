// What the run store keeps of where a run's config came from: written with the run, read back,
// and absent (not an error) in a store from before it, which the next writer upgrades.
#include "core/store/runs/sources.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "core/store/history/reader.h"
#include "core/store/runs/writer.h"
#include "fake_runs.h"
#include "test_util.h"

namespace kiln {
namespace {

// sha256sum's digest of these bytes.
const char* kExperiment = "[model]\ntype = \"gpt\"\nn_layer = 2\n";
const char* kExperimentSha256 = "8fb46325af29ac0f923412815742fef2e297e5b431ead182c8cd566d85f60c54";

using testing::new_run;

TEST(RunSources, AreWrittenWithTheRunAndReadBack) {
  testing::TempDir dir;
  const std::string db = dir / "kiln.db";
  const ResolvedConfig config = load_config_text(kExperiment, "exp.toml", {"train.steps=3"});
  const int64_t id = RunStore(db).create_run(new_run("a"), provenance_of(config));
  HistoryDb history(db);
  const auto files = read_run_files(history.connection(), id);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].path, "exp.toml");
  EXPECT_EQ(files[0].sha256, kExperimentSha256);
  const auto sources = read_key_sources(history.connection(), id);
  EXPECT_EQ(sources.at("model.type"), "exp.toml:2");
  EXPECT_EQ(sources.at("model.n_layer"), "exp.toml:3");
  EXPECT_EQ(sources.at("train.steps"), "--set");
  EXPECT_EQ(sources.at("model.n_head"), "default (plugin gpt)");
  EXPECT_EQ(sources.at("optimizer.type"), "default");
  EXPECT_EQ(sources.size(), key_source_lines(config, true).size());
}

TEST(RunSources, AStoreFromBeforeThemReadsAsNoneAndIsUpgradedByTheNextWriter) {
  testing::TempDir dir;
  const std::string db = dir / "kiln.db";
  const int64_t id = RunStore(db).create_run(new_run("a"));
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  // Schema version 5: before the provenance tables (6), the sweeps of a scheduler (7), the
  // counted tokens (8), the config's JSON copy (9) and the run's inputs (10).
  const std::string older =
      "drop table task_scores; drop table run_input_files; drop table run_inputs; "
      "drop table run_files; drop table run_key_sources; drop table sweep_members; "
      "drop table sweeps; drop table sweep_claims; drop table sweep_decisions; "
      "drop table sweep_proposals; drop table sweep_ladders; drop table run_environment; drop "
      "table rung_probes; drop table layer_metrics; "
      "alter table bench_results drop column parameters; "
      "alter table bench_results drop column active_parameters; "
      "alter table metrics drop column "
      "counted_tokens; "
      "alter table metrics drop column source_tokens; "
      "alter table evals drop column counted_tokens; alter table runs drop column config_json; "
      "pragma user_version = 5";
  ASSERT_EQ(sqlite3_exec(raw, older.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  {
    HistoryDb history(db);
    EXPECT_TRUE(read_run_files(history.connection(), id).empty());
    EXPECT_TRUE(read_key_sources(history.connection(), id).empty());
    EXPECT_TRUE(read_inputs(history.connection(), id).empty());
  }
  RunStore upgraded(db);
  EXPECT_EQ(testing::scalar(db, "pragma user_version"), std::to_string(known_schema_version()));
  EXPECT_EQ(testing::scalar(db, "select count(*) from run_files"), "0");
}

}  // namespace
}  // namespace kiln
