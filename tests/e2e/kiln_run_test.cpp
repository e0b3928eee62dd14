// A first `kiln run`, as a user makes it on a small corpus the test prepares itself: one store row
// per step and a falling loss, micro-batches that add up to one batch, and the mistakes a user
// makes refused in one line with no run left marked running.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "tiny_run.h"

namespace kiln {
namespace {

using testing::query;
using testing::run_kiln;

using KilnRun = testing::TinyRun;

TEST_F(KilnRun, RunRecordsOneRowPerStepAndTheLossFalls) {
  auto result = run_kiln("run " + experiment() + " --name tiny");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  auto rows = query(db(),
                    "select step, loss, lr, grad_norm, tokens_per_sec, tokens_seen from "
                    "metrics order by step");
  ASSERT_EQ(rows.size(), 30u);
  for (const auto& row : rows) {
    for (const auto& value : row)
      EXPECT_NE(value, "NULL");
  }
  EXPECT_EQ(rows.back()[0], "30");
  EXPECT_EQ(rows.back()[5], std::to_string(30 * 8 * 32));
  auto loss = losses("tiny");
  EXPECT_GT(loss.front(), 3.5);  // ~ln(64) at init
  EXPECT_LT(loss.back(), loss.front() - 1.0) << result.output;
  auto run = query(db(),
                   "select status, config_hash, seed, world_size, config like '%[model]%' "
                   "from runs where name = 'tiny'");
  EXPECT_EQ(run[0][0], "completed");
  EXPECT_EQ(run[0][1].size(), 16u);
  EXPECT_EQ(run[0][4], "1");
  EXPECT_EQ(query(db(), "select count(*) from evals where split = 'val'")[0][0], "3");
  EXPECT_NE(result.output.find("step 30/30"), std::string::npos);
}

TEST_F(KilnRun, AccumulatedMicroBatchesFollowTheSameCurveAsOneBatch) {
  const std::string path = experiment();
  auto one = run_kiln("run " + path + " --name whole --set train.steps=5");
  auto four = run_kiln("run " + path +
                       " --name accum --set train.steps=5 "
                       "--set train.micro_batch=2 --set train.batch_tokens=256");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(four.exit_code, 0) << four.output;
  EXPECT_NE(four.output.find("x 4 micro-steps"), std::string::npos) << four.output;
  expect_same_curve("whole", "accum", 5);
}

TEST_F(KilnRun, UserMistakesExitTwoWithOneLineAndLeaveNoRunningRow) {
  struct Case {
    std::string args, expect;
  };
  const std::string exp = experiment();
  const std::vector<Case> cases = {
      {"run " + exp + " --set train.stpes=5", "did you mean 'train.steps'?"},
      {"run " + exp + " --set model.type=gtp", "unknown model plugin 'gtp'"},
      {"run " + exp + " --set train.batch_tokens=1000", "not a multiple of"},
      {"run " + exp + " --set data.train=/nonexistent/*.bin", "matches no file"},
      {"run " + exp + " --set data.test=/nonexistent/*.bin", "data.test"},
      {"run " + exp + " --set run.db=/proc/nope/kiln.db", "/proc/nope"},
      {"run " + exp + " --set train.seq_len=64", "longer than the model's context"},
      {"run " + exp + " --set model.vocab_size=10", "but the model's vocabulary has 10 ids"},
      {"run " + exp + " --name ../escape", "cannot be used"},
      {"run /nonexistent.toml", "cannot open experiment file"},
      {"frobnicate", "frobnicate"},
  };
  for (const auto& c : cases) {
    auto result = run_kiln(c.args);
    EXPECT_EQ(result.exit_code, 2) << c.args << "\n" << result.output;
    EXPECT_NE(result.output.find(c.expect), std::string::npos) << c.args << "\n" << result.output;
    EXPECT_EQ(result.output.find("kiln: error: "), 0u) << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  }
  const std::string running =
      testing::scalar(db(), "select count(*) from runs where status = 'running'");
  EXPECT_TRUE(running.empty() || running == "0") << running;
}

TEST_F(KilnRun, DuplicateNameIsRefused) {
  const std::string exp = experiment();
  ASSERT_EQ(run_kiln("run " + exp + " --name same --set train.steps=1").exit_code, 0);
  auto again = run_kiln("run " + exp + " --name same --set train.steps=1");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("a run named 'same' already exists"), std::string::npos);
}

}  // namespace
}  // namespace kiln
