// Seeds grouped by config (core/app/presentation/seed_groups.h) over made-up runs whose losses are
// chosen so that every number of the report is known in closed form or from a published example;
// nothing expected here is computed by Kiln's statistics.
#include <cmath>
#include <regex>

#include "core/app/presentation/seed_groups.h"
#include "core/store/history/queries.h"
#include "core/util/error.h"
#include "fake_runs.h"

namespace kiln {
namespace {

class RunGroups : public testing::FakeRuns {
 protected:
  void SetUp() override {}  // each test adds its own runs, not FakeRuns' five

  // A (lr 1e-3, 2 layers) and B (lr 3e-3, 2 layers) three seeds each, C (lr 1e-3, 4 layers)
  // one, interleaved. Final losses: A 2.0 2.2 2.4, B 1.8 2.0 2.2, C 2.5; validation at step 2.
  void add_three_configs() {
    add({"a1", 1e-3, 2, "ha", {4.0, 3.0, 2.0}, {{2, 2.9}}, "completed", 1});
    add({"b1", 3e-3, 2, "hb", {4.0, 2.8, 1.8}, {{2, 2.7}}, "completed", 1});
    add({"a2", 1e-3, 2, "ha", {4.0, 3.1, 2.2}, {{2, 3.0}}, "completed", 2});
    add({"c1", 1e-3, 4, "hc", {4.0, 3.2, 2.5}, {{2, 3.1}}, "completed", 1});
    add({"b2", 3e-3, 2, "hb", {4.0, 2.9, 2.0}, {{2, 2.8}}, "completed", 2});
    add({"a3", 1e-3, 2, "ha", {4.0, 3.2, 2.4}, {{2, 3.1}}, "completed", 3});
    add({"b3", 3e-3, 2, "hb", {4.0, 3.0, 2.2}, {{2, 2.9}}, "completed", 3});
  }

  std::vector<RunRecord> all_runs() {
    HistoryDb db(db_path());
    return list_runs(db, ListQuery{});
  }

  std::string report(const std::vector<std::string>& keys, const GroupReportOptions& options = {}) {
    HistoryDb db(db_path());
    return grouped_report(db, group_runs(list_runs(db, ListQuery{}), keys), options);
  }
};

std::vector<std::string> names(const RunGroup& group) {
  std::vector<std::string> out;
  for (const auto& r : group.runs)
    out.push_back(r.name);
  return out;
}

// The cells of the row of `label` in the block titled `title` (cells are two spaces or more
// apart; a label or a cell has single spaces at most).
std::vector<std::string> row(const std::string& report, const std::string& title,
                             const std::string& label) {
  const size_t block = report.find("\n" + title);
  EXPECT_NE(block, std::string::npos) << title << "\n" << report;
  const size_t end = report.find("\n\n", block + 1);
  const size_t at = report.find("  " + label + "  ", block);
  EXPECT_TRUE(at != std::string::npos && at < end) << label << "\n" << report;
  const std::string line = report.substr(at, report.find('\n', at) - at);
  std::vector<std::string> cells;
  const std::regex gap("\\s{2,}");
  for (std::sregex_token_iterator it(line.begin(), line.end(), gap, -1), stop; it != stop; ++it) {
    if (!it->str().empty()) cells.push_back(*it);
  }
  return cells;
}

double cell(const std::vector<std::string>& cells, size_t i) {
  return i < cells.size() ? std::stod(cells[i]) : NAN;
}

// Student's t with 2 and 4 degrees of freedom in closed form (Wikipedia, "Student's
// t-distribution", table of special cases): the 2-dof quantile and the 4-dof CDF.
double t2_quantile(double p) {
  return (2 * p - 1) / std::sqrt(2 * p * (1 - p));
}
double t4_cdf(double t) {
  const double x = t / std::sqrt(4 + t * t);  // sin of the angle in the closed form
  return 0.5 + 0.75 * x * (1 - x * x / 3);
}

TEST_F(RunGroups, AutoGroupsEveryKeyButTheSeedAndLabelsByTheKeysThatDiffer) {
  add_three_configs();
  const auto groups = group_runs(all_runs(), {"auto"});
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].label, "model.n_layer=2 optimizer.lr=0.001");
  EXPECT_EQ(groups[1].label, "model.n_layer=2 optimizer.lr=0.003");
  EXPECT_EQ(groups[2].label, "model.n_layer=4 optimizer.lr=0.001");
  EXPECT_EQ(names(groups[0]), (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(names(groups[1]), (std::vector<std::string>{"b1", "b2", "b3"}));
  EXPECT_EQ(names(groups[2]), (std::vector<std::string>{"c1"}));
  EXPECT_TRUE(has_seeds(groups));
}

TEST_F(RunGroups, NamedKeysGroupOnThoseAloneAndOneGroupIsNamedAfterItsExperiment) {
  add_three_configs();
  const auto by_lr = group_runs(all_runs(), {"optimizer.lr"});
  ASSERT_EQ(by_lr.size(), 2u);
  EXPECT_EQ(by_lr[0].label, "optimizer.lr=0.001");
  EXPECT_EQ(names(by_lr[0]), (std::vector<std::string>{"a1", "a2", "c1", "a3"}));
  const auto one = group_runs(all_runs(), {"model.bias"});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].label, "exp");  // FakeRuns' experiment is exp.toml
  EXPECT_EQ(one[0].runs.size(), 7u);
  EXPECT_FALSE(has_seeds(group_runs(all_runs(), {"run.seed", "optimizer.lr", "model.n_layer"})));
}

TEST_F(RunGroups, AnUnknownKeyIsRefusedWithTheNearestOne) {
  add_three_configs();
  try {
    group_runs(all_runs(), {"optimizer.lrr"});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'optimizer.lr'?"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(group_runs(all_runs(), {"auto", "optimizer.lr"}), UserError);
  // A key without its section names the one it stands for (--group-by seed means run.seed).
  const std::string seed = testing::user_error_of([&] { group_runs(all_runs(), {"seed"}); });
  EXPECT_NE(seed.find("did you mean 'run.seed'?"), std::string::npos) << seed;
}

TEST_F(RunGroups, MeansIntervalsAndTestsMatchTheClosedForms) {
  add_three_configs();
  const std::string out = report({"auto"});
  const double se = 0.2 / std::sqrt(3.0);  // both sds are 0.2 exactly, n = 3
  const auto a = row(out, "final loss", "model.n_layer=2 optimizer.lr=0.001");
  ASSERT_EQ(a.size(), 6u) << out;
  EXPECT_EQ(a[1], "3");
  EXPECT_NEAR(cell(a, 2), 2.2, 1e-6);
  EXPECT_NEAR(cell(a, 3), 0.2, 1e-6);
  const double half = t2_quantile(0.975) * se;  // 4.302653 x se
  EXPECT_EQ(a[4], fmt::format("[{:.6f}, {:.6f}]", 2.2 - half, 2.2 + half));
  EXPECT_EQ(a[5], "baseline");

  const auto b = row(out, "final loss", "model.n_layer=2 optimizer.lr=0.003");
  ASSERT_EQ(b.size(), 8u) << out;
  EXPECT_NEAR(cell(b, 2), 2.0, 1e-6);
  EXPECT_EQ(b[5], "-0.200000");
  // Equal sds and sizes: Welch's t = -0.2 / (0.2 sqrt(2/3)) with 4 degrees of freedom.
  const double t = -0.2 / (0.2 * std::sqrt(2.0 / 3.0));
  EXPECT_NEAR(cell(b, 6), 2 * t4_cdf(t), 5e-5);  // 0.2878
  // A difference of one sd: R's power.t.test(delta = 1, sd = 1, power = 0.8) gives
  // n = 16.71477 per group (its documented example), so 17 seeds.
  EXPECT_EQ(b[7], "17");

  const auto c = row(out, "final loss", "model.n_layer=4 optimizer.lr=0.001");
  ASSERT_EQ(c.size(), 8u) << out;
  EXPECT_EQ(c[1], "1");
  EXPECT_EQ(c[2], "2.500000");
  EXPECT_EQ(c[3], "-");
  EXPECT_EQ(c[4], "1 seed: no interval");
  EXPECT_EQ(c[5], "+0.300000");
  EXPECT_EQ(c[6], "-");
  EXPECT_EQ(c[7], "-");
  EXPECT_NE(out.find("model.n_layer=4 optimizer.lr=0.001: no test: Welch's t-test needs 2 seeds "
                     "or more in each group; this group has 1 seed"),
            std::string::npos)
      << out;
  // Best validation loss: A 2.9 3.0 3.1, mean 3.0, sd 0.1.
  const auto val = row(out, "best val", "model.n_layer=2 optimizer.lr=0.001");
  EXPECT_NEAR(cell(val, 2), 3.0, 1e-6);
  EXPECT_NEAR(cell(val, 3), 0.1, 1e-6);
}

// Zero and near-zero spreads answer at once (sds 0 and ~1e-6 once spun in the power
// search): both groups without spread have no test; one without and one with a little get one.
TEST_F(RunGroups, IdenticalRunsHaveNoSpreadToTestAndNearZeroSpreadsTerminate) {
  add({"z1", 1e-3, 2, "hz", {4.0, 2.0}, {{2, 2.0}}, "completed", 1});
  add({"z2", 1e-3, 2, "hz", {4.0, 2.0}, {{2, 2.0}}, "completed", 2});
  add({"e1", 3e-3, 2, "he", {4.0, 2.1}, {{2, 2.1}}, "completed", 1});
  add({"e2", 3e-3, 2, "he", {4.0, 2.1 + 1e-12}, {{2, 2.1 + 1e-12}}, "completed", 2});
  add({"t1", 1e-2, 2, "ht", {4.0, 2.2}, {{2, 2.2}}, "completed", 1});
  add({"t2", 1e-2, 2, "ht", {4.0, 2.2 + 1e-6}, {{2, 2.2 + 1e-6}}, "completed", 2});
  add({"o1", 3e-2, 2, "ho", {4.0, 2.3}, {{2, 2.3}}, "completed", 1});
  GroupReportOptions options;
  options.baseline = "optimizer.lr=0.001";
  const std::string out = report({"optimizer.lr"}, options);
  EXPECT_NE(out.find("optimizer.lr=0.003: identical runs: no spread to test"), std::string::npos)
      << out;
  const auto tiny = row(out, "final loss", "optimizer.lr=0.01");
  ASSERT_EQ(tiny.size(), 8u) << out;
  EXPECT_EQ(tiny[7], "2") << out;  // sd 7e-7 against 0: two seeds show a difference of 0.2
  EXPECT_NE(out.find("optimizer.lr=0.03: no test: Welch's t-test needs 2 seeds or more in each "
                     "group; this group has 1 seed"),
            std::string::npos)
      << out;
}

// Reruns of one seed are one sample (counted apart, runs 1,1,6,6 made n = 2, sd 0, p = 0): two runs
// of seed 2 count once and are named, and a group left with one sample gets no test.
TEST_F(RunGroups, RerunsOfOneSeedAreOneSampleAndNamed) {
  add({"a1", 1e-3, 2, "ha", {4.0, 2.0}, {}, "completed", 1});
  add({"a2", 1e-3, 2, "ha", {4.0, 2.2}, {}, "completed", 2});
  add({"r1", 3e-3, 2, "hr", {4.0, 1.9}, {}, "completed", 2});
  add({"r2", 3e-3, 2, "hr", {4.0, 1.9}, {}, "completed", 2});
  GroupReportOptions options;
  options.baseline = "optimizer.lr=0.001";
  const std::string out = report({"optimizer.lr"}, options);
  const auto reruns = row(out, "final loss", "optimizer.lr=0.003");
  ASSERT_GE(reruns.size(), 3u) << out;
  EXPECT_EQ(reruns[1], "1") << out;
  EXPECT_NE(out.find("optimizer.lr=0.003: 2 runs of seed 2 counted once"), std::string::npos)
      << out;
  EXPECT_NE(out.find("optimizer.lr=0.003: no test: Welch's t-test needs 2 seeds or more in each "
                     "group; this group has 1 seed"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("0.0e+00"), std::string::npos) << out;
}

TEST_F(RunGroups, WelchPValueOfAPublishedExample) {
  // Wikipedia, "Welch's t-test", example 1: two samples of 15, Welch t = 2.46, dof = 25.0,
  // p = 0.021. Each value is one run's final loss.
  const std::vector<double> a = {27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1,
                                 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4};
  const std::vector<double> b = {27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0,
                                 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4};
  for (size_t i = 0; i < a.size(); ++i) {
    const auto seed = static_cast<int64_t>(i) + 1;
    add({fmt::format("a{}", i), 1e-3, 2, "ha", {30.0, a[i]}, {}, "completed", seed});
    add({fmt::format("b{}", i), 3e-3, 2, "hb", {30.0, b[i]}, {}, "completed", seed});
  }
  const std::string out = report({"optimizer.lr"});
  const auto row_b = row(out, "final loss", "optimizer.lr=0.003");
  ASSERT_EQ(row_b.size(), 8u) << out;
  EXPECT_NEAR(cell(row_b, 6), 0.021, 5e-4);
  // Group a's interval: mean 20.82, sd 2.7..., t(0.975, 14) = 2.145 in every t table.
  const auto row_a = row(out, "final loss", "optimizer.lr=0.001");
  const double mean = cell(row_a, 2), sd = cell(row_a, 3);
  EXPECT_NEAR(mean, 20.82, 1e-6);
  const std::string ci = row_a[4];
  const double low = std::stod(ci.substr(1)), high = std::stod(ci.substr(ci.find(", ") + 2));
  EXPECT_NEAR(high - mean, 2.145 * sd / std::sqrt(15.0), 1e-3 * sd);
  EXPECT_NEAR(mean - low, high - mean, 2e-6);
  EXPECT_NE(out.find("no run has a value"), std::string::npos);  // no validation evals
}

TEST_F(RunGroups, MetricPointsReadTheLastValueAtOrBeforeAsWhereDoes) {
  add_three_configs();
  const std::string out =
      report({"auto"}, {"", {"loss@step=2", "loss@tokens=2500", "val_loss@step=2"}});
  // Losses at step 2 of A: 3.0 3.1 3.2; tokens_seen is 1000 a step, so 2500 tokens is step 2.
  EXPECT_NEAR(cell(row(out, "loss@step=2", "model.n_layer=2 optimizer.lr=0.001"), 2), 3.1, 1e-6);
  EXPECT_NEAR(cell(row(out, "loss@tokens=2500", "model.n_layer=2 optimizer.lr=0.001"), 2), 3.1,
              1e-6);
  EXPECT_NEAR(cell(row(out, "val_loss@step=2", "model.n_layer=2 optimizer.lr=0.003"), 2), 2.8,
              1e-6);
  auto error = [&](const std::string& metric) {
    try {
      report({"auto"}, {"", {metric}});
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("loss@step=4"),
            "--metric loss@step=4: run 'a1' has not reached step 4 (it stops at step 3): leave "
            "the run out or pick an earlier point");
  // As --where reads it: the last eval at or before the point.
  const std::string at_3 = report({"auto"}, {"", {"val_loss@step=3"}});
  EXPECT_NEAR(cell(row(at_3, "val_loss@step=3", "model.n_layer=2 optimizer.lr=0.003"), 2), 2.8,
              1e-6);
  EXPECT_EQ(error("val_loss@step=1"),
            "--metric val_loss@step=1: run 'a1' has no val_loss value at or before step 1: its "
            "val_loss evals are at step 2");
  EXPECT_NE(error("loss@epoch=2").find("expected step or tokens after 'loss@'"), std::string::npos);
  EXPECT_NE(error("max(loss)").find("expected METRIC@step=S or METRIC@tokens=T"),
            std::string::npos);
  EXPECT_NE(error("perplexity@step=2").find("unknown metric 'perplexity'"), std::string::npos);
}

TEST_F(RunGroups, TheBaselineIsPickedByLabelOrByKeyValueTerms) {
  add_three_configs();
  const std::string by_terms = report({"auto"}, {"optimizer.lr=3e-3", {}});
  EXPECT_NE(by_terms.find("3 groups, baseline 'model.n_layer=2 optimizer.lr=0.003'"),
            std::string::npos)
      << by_terms;
  EXPECT_EQ(row(by_terms, "final loss", "model.n_layer=2 optimizer.lr=0.001")[5], "+0.200000");
  const std::string by_label = report({"auto"}, {"model.n_layer=4 optimizer.lr=0.001", {}});
  EXPECT_NE(by_label.find("baseline 'model.n_layer=4 optimizer.lr=0.001'"), std::string::npos);
  EXPECT_THROW(report({"auto"}, {"optimizer.lr=1e-3", {}}), UserError);  // two groups
  EXPECT_THROW(report({"auto"}, {"optimizer.lr=5", {}}), UserError);     // none
  EXPECT_THROW(report({"auto"}, {"run.seed=2", {}}), UserError);         // varies inside A and B
}

}  // namespace
}  // namespace kiln
