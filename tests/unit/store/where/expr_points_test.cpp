// The metric keys of `kiln runs list --where` and `--sort` (core/store/where/expr.h): a metric at a
// point of the run (`val_loss@step=400`, `loss@tokens=1e6`), an aggregate over the run
// (`max(grad_norm)`), and the `in (...)` and `between ... and ...` comparisons, over a store
// whose metrics and evals rows are written here in SQL, so that every expected match is worked
// out by hand below from those rows.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/store/history/queries.h"
#include "core/store/history/reader.h"
#include "core/store/runs/writer.h"
#include "core/store/where/expr.h"
#include "core/store/where/sql.h"
#include "core/util/error.h"
#include "core/util/text.h"
#include "nested_filters.h"
#include "test_util.h"

namespace kiln {
namespace {

using Names = std::vector<std::string>;

// Four runs (ids 1 to 4), by their rows:
//   a  lr 1e-3  steps 1..5, 250,000 tokens a step
//      loss 5 4 3 2.5 2 | grad_norm 1 12 2 3 1 | tokens_per_sec 100 1000 1100 1200 1300
//      val 3.5 at step 2, 2.6 at step 4; test 2.4 at step 5
//   b  lr 3e-3  steps 1..3, 400,000 tokens a step
//      loss 4 3 1.9 | grad_norm 0.5 0.7 0.9 | tokens_per_sec 500 600 700 | val 2.0 at step 2
//   c  lr 1e-3  a row every 2 steps: 2, 4, 6, 300,000 tokens a row
//      loss 3 2.2 1.8 | grad_norm none, 50 (an update skipped), 4 | tokens_per_sec 900 950 1000
//      loss_scale 1024 512 1024 | val at step 4: 2.05 during training, 2.5 from `kiln eval` of
//      snapshot step_4
//   d  lr 2e-3  no rows yet
const char* const kRows = R"sql(
  INSERT INTO metrics (run_id, step, loss, grad_norm, tokens_per_sec, tokens_seen) VALUES
    (1, 1, 5.0, 1.0, 100, 250000), (1, 2, 4.0, 12.0, 1000, 500000),
    (1, 3, 3.0, 2.0, 1100, 750000), (1, 4, 2.5, 3.0, 1200, 1000000),
    (1, 5, 2.0, 1.0, 1300, 1250000),
    (2, 1, 4.0, 0.5, 500, 400000), (2, 2, 3.0, 0.7, 600, 800000), (2, 3, 1.9, 0.9, 700, 1200000);
  INSERT INTO metrics (run_id, step, loss, grad_norm, tokens_per_sec, tokens_seen, loss_scale,
                       skipped) VALUES
    (3, 2, 3.0, NULL, 900, 300000, 1024, 0), (3, 4, 2.2, 50.0, 950, 600000, 512, 1),
    (3, 6, 1.8, 4.0, 1000, 900000, 1024, 0);
  INSERT INTO evals (run_id, step, split, checkpoint, loss) VALUES
    (1, 2, 'val', '', 3.5), (1, 4, 'val', '', 2.6), (1, 5, 'test', '', 2.4),
    (2, 2, 'val', '', 2.0),
    (3, 4, 'val', '', 2.05), (3, 4, 'val', 'step_4', 2.5);
)sql";

class WherePoints : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& [name, lr] : std::vector<std::pair<std::string, double>>{
             {"a", 1e-3}, {"b", 3e-3}, {"c", 1e-3}, {"d", 2e-3}}) {
      add_run(name, lr);
    }
    exec(kRows);
  }

  void add_run(const std::string& name, double lr) {
    RunStore store(db_path());
    NewRun run;
    run.name = name;
    run.config_toml = fmt::format("[optimizer]\ntype = \"adamw\"\nlr = {}\n", lr);
    run.config_hash = "hash";
    run.seed = 1;
    run.planned_steps = 6;
    store.finish_run(store.create_run(run), "completed");
  }

  void exec(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }

  Names list(const std::string& where, const std::string& sort = "id") {
    HistoryDb db(db_path());
    Names out;
    for (const auto& r : list_runs(db, {where, sort, 0}))
      out.push_back(r.name);
    return out;
  }

  // The one-line message of the UserError a --where (or, with `sort`, a --sort) raises.
  std::string error_of(const std::string& where, const std::string& sort = "id") {
    try {
      list(where, sort);
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "no UserError for --where " << where.substr(0, 200) << " --sort " << sort;
    return "";
  }

  std::string db_path() const { return dir_ / "kiln.db"; }

  testing::TempDir dir_;
};

TEST_F(WherePoints, AMetricAtAStepIsItsLastRowAtOrBeforeItOfARunThatGotThere) {
  // Step 4: a's row is 2.5, c's 2.2; b stopped at step 3 and d has no rows: false for both.
  EXPECT_EQ(list("loss@step=4 < 2.4"), Names({"c"}));
  EXPECT_EQ(list("not loss@step=4 < 2.4"), Names({"a", "b", "d"}));
  // Step 5: c has no row there, so its row of step 4 (2.2); a's is 2.
  EXPECT_EQ(list("loss@step=5 = 2.2"), Names({"c"}));
  // Step 3: a 3, b 1.9, c its row of step 2 (3).
  EXPECT_EQ(list("loss@step=3 < 3"), Names({"b"}));
  EXPECT_EQ(list("loss@step=3 >= 3"), Names({"a", "c"}));
  // Before any row: nothing.
  EXPECT_EQ(list("loss@step=0 > 0 or loss@step=0 <= 0"), Names({}));
  EXPECT_EQ(list("grad_norm@step=2 = 12 and tokens_per_sec@step=2 = 1000"), Names({"a"}));
  // c's grad_norm at step 2 is missing: false either way.
  EXPECT_EQ(list("grad_norm@step=3 > 0"), Names({"a", "b"}));
}

TEST_F(WherePoints, AMetricAtATokenCountIsTheLastRowWithAtMostThatMany) {
  // 1e6 tokens: a's row of step 4 (1,000,000 tokens, loss 2.5); b's of step 2 (800,000, loss
  // 3); c has seen 900,000 at most.
  EXPECT_EQ(list("loss@tokens=1e6 <= 2.5"), Names({"a"}));
  EXPECT_EQ(list("loss@tokens=1e6 <= 3"), Names({"a", "b"}));
  EXPECT_EQ(list("loss@tokens=900000 = 1.8"), Names({"c"}));
  EXPECT_EQ(list("loss@tokens=900001 = 1.8"), Names({}));
  EXPECT_EQ(list("tokens_seen@tokens=1.1e6 = 1000000"), Names({"a"}));
}

TEST_F(WherePoints, AnEvalAtAPointIsTheLastOneAtOrBeforeIt) {
  // Step 4: a's eval of step 4 (2.6); c's of step 4 during training (2.05), not kiln eval's
  // 2.5; b stopped at step 3.
  EXPECT_EQ(list("val_loss@step=4 < 2.1"), Names({"c"}));
  EXPECT_EQ(list("val_loss@step=4 = 2.6"), Names({"a"}));
  // Step 3: a's eval of step 2 (3.5), b's of step 2 (2.0); c has none before step 4.
  EXPECT_EQ(list("val_loss@step=3 = 3.5"), Names({"a"}));
  EXPECT_EQ(list("val_loss@step=3 > 0"), Names({"a", "b"}));
  EXPECT_EQ(list("test_loss@step=5 < 3"), Names({"a"}));
  EXPECT_EQ(list("test_loss@step=4 < 3"), Names({}));
  // 1e6 tokens: a at step 4 (eval 2.6), b at step 2 (eval 2.0); c never got there.
  EXPECT_EQ(list("val_loss@tokens=1e6 < 3"), Names({"a", "b"}));
}

TEST_F(WherePoints, AggregatesOverEveryRowOfTheRun) {
  // max grad_norm: a 12, b 0.9, c 50 (its skipped update counts), d none.
  EXPECT_EQ(list("max(grad_norm) > 10"), Names({"a", "c"}));
  EXPECT_EQ(list("min(grad_norm) < 1"), Names({"b"}));
  // mean tokens_per_sec: a (100+1000+1100+1200+1300)/5 = 940, b 600, c (900+950+1000)/3 = 950.
  EXPECT_EQ(list("mean(tokens_per_sec) > 900"), Names({"a", "c"}));
  EXPECT_EQ(list("mean(tokens_per_sec) = 940"), Names({"a"}));
  // first and last rows: a 5 and 2, b 4 and 1.9, c 3 and 1.8.
  EXPECT_EQ(list("first(loss) = 5 or last(loss) = 1.8"), Names({"a", "c"}));
  EXPECT_EQ(list("min(loss) < 2"), Names({"b", "c"}));
  // val evals, kiln eval's included: a max 3.5, mean (3.5+2.6)/2; c mean (2.05+2.5)/2 = 2.275;
  // c's first eval at step 4 is the one during training.
  EXPECT_EQ(list("MAX(val_loss) >= 3.5"), Names({"a"}));
  EXPECT_EQ(list("mean(val_loss) < 2.28 and mean(val_loss) > 2.27"), Names({"c"}));
  EXPECT_EQ(list("first(val_loss) < 2.1"), Names({"b", "c"}));
  EXPECT_EQ(list("last(test_loss) = 2.4"), Names({"a"}));
  EXPECT_EQ(list("last(loss_scale) = 1024 and min(loss_scale) = 512"), Names({"c"}));
  EXPECT_EQ(list("not max(loss) > 0"), Names({"d"}));
}

TEST_F(WherePoints, InAndBetweenForEveryKindOfKey) {
  EXPECT_EQ(list("name in (a, c)"), Names({"a", "c"}));
  EXPECT_EQ(list("name IN ('a', \"d\",b)"), Names({"a", "b", "d"}));
  EXPECT_EQ(list("not name in (a)"), Names({"b", "c", "d"}));
  // steps done: a 5, b 3, c 6, d 0.
  EXPECT_EQ(list("steps in (3, 6)"), Names({"b", "c"}));
  EXPECT_EQ(list("steps between 3 and 5"), Names({"a", "b"}));
  EXPECT_EQ(list("steps BETWEEN 6 AND 6 or steps between 0 and 0"), Names({"c", "d"}));
  EXPECT_EQ(list("steps between 5 and 3"), Names({}));
  EXPECT_EQ(list("optimizer.lr in (1e-3, 3e-3)"), Names({"a", "b", "c"}));
  EXPECT_EQ(list("optimizer.lr between 1e-3 and 2e-3"), Names({"a", "c", "d"}));
  // Points: a 3, b 1.9, c 3 (its row of step 2).
  EXPECT_EQ(list("loss@step=3 in (3, 1.9)"), Names({"a", "b", "c"}));
  EXPECT_EQ(list("loss@step=3 between 1 and 2"), Names({"b"}));
  EXPECT_EQ(list("val_loss@step=2 between 1.9 and 2.0"), Names({"b"}));
  // Aggregates: max grad_norm a 12, b 0.9, c 50.
  EXPECT_EQ(list("max(grad_norm) in (12, 50)"), Names({"a", "c"}));
  EXPECT_EQ(list("max(grad_norm) between 0.9 and 12 and name in (a,b,c,d)"), Names({"a", "b"}));
}

TEST_F(WherePoints, SortByAPointOrAnAggregateRunsLackingItLast) {
  // max grad_norm: c 50, a 12, b 0.9, d none.
  EXPECT_EQ(list("", "-max(grad_norm)"), Names({"c", "a", "b", "d"}));
  // mean tokens_per_sec: b 600, a 940, c 950.
  EXPECT_EQ(list("", "mean(tokens_per_sec)"), Names({"b", "a", "c", "d"}));
  // val at step 4: c 2.05, a 2.6; b and d have none, by id.
  EXPECT_EQ(list("", "val_loss@step=4"), Names({"c", "a", "b", "d"}));
  EXPECT_EQ(list("", "-val_loss@step=4"), Names({"a", "c", "b", "d"}));
  // loss at 1e6 tokens: a 2.5, b 3.
  EXPECT_EQ(list("steps > 0", "loss@tokens=1e6"), Names({"a", "b", "c"}));
}

TEST_F(WherePoints, MistakesAreOneLineNamingTheColumn) {
  struct Case {
    std::string expr, expect;
  };
  const std::vector<Case> cases = {
      {"loss@epoch=3 < 1",
       "expected step or tokens after 'loss@' (as in loss@step=100) at column 6, found "
       "'epoch=3'"},
      {"loss@step < 1", "expected '=' after '@step' at column 11, found '<'"},
      {"loss@step=-1 < 1",
       "expected a step (a whole number such as 400) after '@step=' at column 11, found '-1'"},
      {"loss@step=1.5 < 1", "after '@step=' at column 11, found '1.5'"},
      {"loss@tokens=lots < 1",
       "expected a token count (a number such as 1e6) after '@tokens=' at column 13"},
      {"los@step=3 < 1", "unknown metric 'los' at column 1: did you mean 'loss'? metrics are "},
      {"steps > 1 and max(grad_nrm) > 1",
       "unknown metric 'grad_nrm' at column 19: did you mean 'grad_norm'?"},
      {"median(loss) > 1", "unknown aggregate 'median' at column 1: "},
      {"max(loss > 1", "expected ')' to close 'max(' at column 10, found '>'"},
      {"max() > 1", "expected a metric (such as loss or grad_norm) after 'max(' at column 5"},
      {"loss > 1", "unknown key 'loss' at column 1: 'loss' is a metric: name it at a point"},
      {"name in a", "expected '(' to open the list of values after 'in' at column 9, found 'a'"},
      {"name in (a, b", "expected ',' or ')' to close the list at column 14, found the end"},
      {"name in ()", "expected a value (a number, 'text' or a bare word) at column 10"},
      {"steps between 1 3",
       "expected 'and' between the two ends of 'between' at column 17, found '3'"},
      {"steps between 1 and", "expected a value (a number, 'text' or a bare word) at column 20"},
      {"steps in (1) (2)", "expected 'and', 'or' or the end of the expression at column 14"},
  };
  for (const auto& c : cases) {
    const std::string message = error_of(c.expr);
    EXPECT_NE(message.find(c.expect), std::string::npos) << c.expr << "\n" << message;
    EXPECT_EQ(message.rfind("--where \"" + c.expr + "\": ", 0), 0u) << message;
  }
  EXPECT_NE(error_of("", "-max(grad_nrm)")
                .find("--sort '-max(grad_nrm)': unknown metric 'grad_nrm' at column 6"),
            std::string::npos);
  EXPECT_NE(error_of("", "loss@step=4 x")
                .find("--sort 'loss@step=4 x': expected the end of the key at column 13"),
            std::string::npos);
  EXPECT_NE(error_of("", "loss").find("'loss' is a metric"), std::string::npos);
}

TEST_F(WherePoints, ValuesAndMetricNamesAreDataNeverSql) {
  add_run("x') or 1=1 --", 1e-3);
  EXPECT_EQ(list("name IN ('x'') or 1=1 --')"), Names({"x') or 1=1 --"}));
  EXPECT_EQ(list("name in (\"x') or 1=1 --\", a)"), Names({"a", "x') or 1=1 --"}));
  EXPECT_EQ(list("name between 'x' and 'x'') or 1=1 --'"), Names({"x') or 1=1 --"}));
  // Unquoted, the list ends at the first ')' and `1=1` is no key.
  EXPECT_NE(error_of("name in (x') or 1=1 --)")
                .find("expected a key (a column such as "
                      "best_loss, or a config key such as "
                      "optimizer.lr) at column 17, found '1=1'"),
            std::string::npos);
  // A metric is a name from the list, never text that reaches SQL.
  EXPECT_NE(error_of("max('loss') > 1").find("expected a metric"), std::string::npos);
  EXPECT_NE(error_of("max(loss') > 1").find("expected ')' to close 'max('"), std::string::npos);
  EXPECT_NE(error_of("max(loss) or 1=1) > 1").find("expected an operator"), std::string::npos);
  EXPECT_NE(error_of("loss@step=1;drop table runs < 1").find("found '1;drop'"), std::string::npos);
  EXPECT_NE(error_of("max(runs) > 1").find("unknown metric 'runs'"), std::string::npos);
  EXPECT_EQ(list("id > 0").size(), 5u);

  // What reaches SQLite is our text and placeholders: none of the values above.
  const KeySpace keys{{{"name", "name"}},
                      "kiln_config(config, ?)",
                      {{"loss", "loss"}},
                      {{"val_loss", "'val'"}},
                      "summary.id"};
  const SqlFragment sql =
      where_sql(*parse_where("name in ('x'') --', b) and val_loss@step=7 between 1 and 'y' and "
                             "max(loss) > 2 and loss@tokens=5e5 ~ 'z*'",
                             keys),
                keys);
  for (const char* typed : {"x'", "--", "'y'", "'z", "5e5", "7"})
    EXPECT_EQ(sql.sql.find(typed), std::string::npos) << typed << " in " << sql.sql;
  // Two names, the step twice, two ends, 2, the token count twice, the glob.
  ASSERT_EQ(sql.params.size(), 10u);
  EXPECT_EQ(std::get<std::string>(sql.params[0]), "x') --");
  EXPECT_EQ(std::get<int64_t>(sql.params[2]), 7);
  EXPECT_EQ(std::get<int64_t>(sql.params[3]), 7);
  EXPECT_EQ(std::get<std::string>(sql.params[5]), "y");
  EXPECT_EQ(std::get<double>(sql.params[7]), 5e5);
  EXPECT_EQ(std::get<std::string>(sql.params[9]), "z*");
}

using testing::right_nested;

TEST_F(WherePoints, MetricKeysRunInSQLiteAtEveryLimit) {
  // The deepest filter, its innermost comparison a point on the token axis (three subqueries).
  EXPECT_EQ(list(right_nested("loss@tokens=1e6 <= 2.5 and max(grad_norm) in (12)", 31)),
            Names({"a"}));
  std::string nots = "val_loss@step=4 between 2 and 2.1";
  for (int i = 0; i < 16; ++i)
    nots = "not (name = nobody or " + nots + ")";
  EXPECT_EQ(list(nots), Names({"c"}));  // 2.05, negated an even number of times
  // 100 points and aggregates are the most (SQLite plans a filter in a time that grows with the
  // square of their number); they may hold 10,000 comparisons.
  std::vector<std::string> terms(99, "loss@tokens=1 < 0");
  terms.push_back("loss@step=5 = 2");
  const std::string hundred = join(terms, " or ");
  EXPECT_EQ(list(hundred, "loss@tokens=1e6"), Names({"a"}));
  const std::string values = join(std::vector<std::string>(999, "0"), ", ");
  const std::string lists =
      join(std::vector<std::string>(10, "max(grad_norm) in (" + values + ", 12)"), " or ");
  EXPECT_EQ(list(lists), Names({"a"}));
  const std::string more = hundred + " or max(loss) > 0";
  EXPECT_EQ(error_of(more),
            fmt::format("--where \"{}... ({} characters)\": more than 100 points and aggregates "
                        "(the one at column {} is one too many): each reads every run's rows "
                        "anew; compare one of them with 'in (...)' or 'between' instead",
                        more.substr(0, 100), more.size(), hundred.size() + 5));
}

TEST_F(WherePoints, AListHoldsAThousandValuesEachOneComparison) {
  std::vector<std::string> values(999, "zz");
  values.push_back("a");
  const std::string thousand = "name in (" + join(values, ", ") + ")";
  EXPECT_EQ(list(thousand), Names({"a"}));
  const std::string longer = "name in (" + join(values, ", ") + ", b)";
  EXPECT_NE(error_of(longer).find(fmt::format(
                "a list of more than 1000 values (the one at column {} is one too many)",
                longer.size() - 1)),
            std::string::npos);
  // Ten lists of 1,000 are the 10,000 comparisons a filter may hold, and so are 5,000
  // `between`s: one more is refused.
  const std::string lists = join(std::vector<std::string>(10, thousand), " or ");
  EXPECT_EQ(list(lists), Names({"a"}));
  EXPECT_NE(error_of(lists + " or id = 1")
                .find(fmt::format("more than 10000 comparisons (the one at column {} is one too "
                                  "many)",
                                  lists.size() + 5)),
            std::string::npos);
  const std::string betweens =
      join(std::vector<std::string>(5000, "steps between 1 and 2"), " or ");
  EXPECT_EQ(list(betweens), Names({}));
  EXPECT_NE(error_of(betweens + " or id = 1").find("more than 10000 comparisons"),
            std::string::npos);
}

TEST_F(WherePoints, AStoreFromBeforeLossScaleHasNone) {
  // Schema version 1: metrics.loss_scale and metrics.skipped came with version 2.
  exec(
      "ALTER TABLE metrics DROP COLUMN loss_scale; ALTER TABLE metrics DROP COLUMN skipped; "
      "PRAGMA user_version = 1");
  EXPECT_EQ(list("max(loss_scale) > 0 or loss_scale@step=4 > 0"), Names({}));
  EXPECT_EQ(list("not last(loss_scale) > 0 and max(grad_norm) > 10"), Names({"a", "c"}));
}

// Task scores (core/store/runs/task_scores.h) are metrics named TASK.METRIC: a's cloze acc 0.3 at
// step 2 and 0.5 at step 4; c's 0.6 at step 4 during training and 0.9 from `kiln eval --task` of
// snapshot step_4; b has an arithmetic exact_match of 0.1 at step 2 only.
TEST_F(WherePoints, ATaskScoreIsAMetricNamedTaskDotMetric) {
  exec(R"sql(
    INSERT INTO task_scores (run_id, step, task, metric, checkpoint, value, items) VALUES
      (1, 2, 'cloze', 'acc', '', 0.3, 10), (1, 4, 'cloze', 'acc', '', 0.5, 10),
      (3, 4, 'cloze', 'acc', '', 0.6, 10), (3, 4, 'cloze', 'acc', 'step_4', 0.9, 10),
      (2, 2, 'arith', 'exact_match', '', 0.1, 10);
  )sql");
  EXPECT_EQ(list("cloze.acc@step=4 >= 0.5"), Names({"a", "c"}));
  EXPECT_EQ(list("cloze.acc@step=3 = 0.3"), Names({"a"}));  // the last at or before step 3
  EXPECT_EQ(list("max(cloze.acc) > 0.55"), Names({"c"}));
  EXPECT_EQ(list("first(cloze.acc) < 0.4 or arith.exact_match@step=2 > 0"), Names({"a", "b"}));
  EXPECT_EQ(list("max(cloze.acc) > 0", "-max(cloze.acc)"), Names({"c", "a"}));
  const std::string unknown = error_of("cloze.acc_norm@step=4 > 0");
  EXPECT_NE(unknown.find("unknown metric 'cloze.acc_norm' at column 1: metrics are "),
            std::string::npos)
      << unknown;
  EXPECT_NE(unknown.find("arith.exact_match, cloze.acc"), std::string::npos) << unknown;
  // Without `@` or an aggregate, `a.b` is a config key, as before.
  EXPECT_EQ(list("optimizer.lr = 0.003"), Names({"b"}));
}

}  // namespace
}  // namespace kiln
