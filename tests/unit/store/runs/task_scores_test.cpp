// The scoring rules' version of each task score (core/store/runs/task_scores.h): a score written
// now names the current rules; one from a store before the column reads as version 1; and the
// note that `runs show` and `runs compare` print names the runs and tasks with older scores.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "core/store/history/reader.h"
#include "core/store/runs/task_scores.h"
#include "core/store/runs/writer.h"
#include "fake_runs.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::new_run;

TEST(TaskRules, OlderScoresAreNamedAndReadAsVersionOne) {
  testing::TempDir dir;
  const std::string db = dir / "kiln.db";
  int64_t a = 0, b = 0;
  {
    RunStore store(db);
    a = store.create_run(new_run("a"));
    b = store.create_run(new_run("b"));
    store.add_task_scores(a, {{3, "cloze", "acc", "", 0.5, 0.1, 20, 0, 1},
                              {3, "arith", "exact_match", "", 0.2, 0.1, 20, 0, 1}});
    store.add_task_scores(b, {{3, "cloze", "acc", "", 0.6, 0.1, 20, 0}});
  }
  HistoryDb history(db);
  EXPECT_EQ(read_task_scores(history.connection(), b)[0].rules, kTaskScoringRules);
  EXPECT_EQ(read_task_scores(history.connection(), a)[0].rules, 1);
  EXPECT_EQ(older_rules_note(history.connection(), {b}, ""), "");
  const std::string note = older_rules_note(history.connection(), {a, b}, "cloze");
  EXPECT_NE(note.find("the cloze scores of a were computed by Kiln's scoring rules before "
                      "version 2"),
            std::string::npos)
      << note;
  EXPECT_NE(older_rules_note(history.connection(), {a}, "").find("arith, cloze scores of a"),
            std::string::npos);

  // A store from before the column (schema 15, so without the later columns too): every score is
  // version 1's.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "ALTER TABLE task_scores DROP COLUMN rules;"
                         "ALTER TABLE sweep_ladders DROP COLUMN cooled; DROP TABLE layer_metrics;"
                         "ALTER TABLE bench_results DROP COLUMN parameters;"
                         "ALTER TABLE bench_results DROP COLUMN active_parameters;"
                         "PRAGMA user_version = 15;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  HistoryDb old(db);
  EXPECT_EQ(read_task_scores(old.connection(), b)[0].rules, 1);
  EXPECT_NE(older_rules_note(old.connection(), {b}, "").find("of b were"), std::string::npos);
  RunStore upgraded(db);  // the next writer adds the column, the old scores version 1
  HistoryDb now(db);
  EXPECT_EQ(read_task_scores(now.connection(), b)[0].rules, 1);
}

}  // namespace
}  // namespace kiln
