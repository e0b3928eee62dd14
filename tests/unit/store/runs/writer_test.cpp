#include "core/store/runs/writer.h"

#include <gtest/gtest.h>

#include "core/util/error.h"
#include "fake_runs.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::query;
using testing::TempDir;

using testing::new_run;

TEST(RunStore, RecordsRunsMetricsAndEvals) {
  TempDir dir;
  const std::string db = dir / "sub/kiln.db";
  {
    RunStore store(db);
    int64_t id = store.create_run(new_run("a"));
    for (int step = 1; step <= 3; ++step) {
      store.add_metric(id, MetricRow{step, 4.0 - step, 1e-3, 0.5, 1000, 10, step * 64, 1, false,
                                     2.5, std::nullopt, std::nullopt, ""});
    }
    store.add_eval(id, EvalRow{3, "val", 1.5, "", std::nullopt});
    store.finish_run(id, "completed");
  }
  auto runs = query(db, "select name, status, seed, world_size, finished_at is not null from runs");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0], (std::vector<std::string>{"a", "completed", "7", "1", "1"}));
  auto metrics =
      query(db, "select step, loss, tokens_seen, rank_skew_ms from metrics order by step");
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_EQ(metrics[2], (std::vector<std::string>{"3", "1.0", "192", "2.5"}));
  EXPECT_EQ(query(db, "select loss from evals")[0][0], "1.5");
  EXPECT_EQ(query(db, "pragma journal_mode")[0][0], "wal");
}

TEST(RunStore, ARedoneStepReplacesItsRow) {
  TempDir dir;
  RunStore store(dir / "kiln.db");
  int64_t id = store.create_run(new_run("a"));
  store.add_metric(
      id, MetricRow{1, 3.0, 0, 0, 0, 0, 0, 1, false, std::nullopt, std::nullopt, std::nullopt, ""});
  store.flush();
  store.add_metric(
      id, MetricRow{1, 2.0, 0, 0, 0, 0, 0, 1, false, std::nullopt, std::nullopt, std::nullopt, ""});
  store.flush();
  auto rows = query(dir / "kiln.db", "select loss from metrics");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], "2.0");
}

TEST(RunStore, NamesAreUniqueAndFindableByNameOrId) {
  TempDir dir;
  RunStore store(dir / "kiln.db");
  int64_t id = store.create_run(new_run("a"));
  EXPECT_THROW(store.create_run(new_run("a")), UserError);
  EXPECT_EQ(store.find_run("a")->id, id);
  EXPECT_EQ(store.find_run(std::to_string(id))->name, "a");
  EXPECT_FALSE(store.find_run("b").has_value());
  // A name that starts with the digits of an id is a name, not that id.
  EXPECT_FALSE(store.find_run(std::to_string(id) + "f1b").has_value());
  EXPECT_EQ(store.create_run(new_run(std::to_string(id) + "f1b")), id + 1);
}

TEST(RunStore, FailedRunKeepsItsError) {
  TempDir dir;
  RunStore store(dir / "kiln.db");
  int64_t id = store.create_run(new_run("a"));
  store.finish_run(id, "failed", "out of memory");
  EXPECT_EQ(query(dir / "kiln.db", "select status, error from runs")[0],
            (std::vector<std::string>{"failed", "out of memory"}));
}

TEST(RunStore, AFileThatIsNotSqliteIsAClearError) {
  TempDir dir;
  testing::write_text(dir / "kiln.db", std::string(8192, 'z'));
  try {
    RunStore store(dir / "kiln.db");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("file is not a database"), std::string::npos) << e.what();
  }
}

TEST(RunStore, UnwritablePathIsAClearError) {
  try {
    RunStore store("/proc/kiln/kiln.db");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/kiln"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
