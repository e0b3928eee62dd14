// The shipped fine-tuning example (experiments/sft_example.toml), shortened: it trains, and its
// step lines, eval lines, run store rows and `kiln eval` say how many tokens the loss counted,
// numbers this test counts itself from the records' responses; its bench times the passes apart.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ranks.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::run_kiln;

// The targets the plain template's loss counts in one record: each response, and the blank line
// ("\n\n") that ends it.
int64_t counted_in(const nlohmann::json& record) {
  int64_t counted = 0;
  if (record.contains("messages")) {
    for (const auto& m : record["messages"]) {
      if (m["role"] == "assistant") counted += m["content"].get<std::string>().size() + 2;
    }
    return counted;
  }
  for (const auto& pair : record.value("history", nlohmann::json::array()))
    counted += pair[1].get<std::string>().size() + 2;
  return counted + record["response"].get<std::string>().size() + 2;
}

// The counted targets of the first `limit` records of a JSON Lines file.
int64_t counted_in_file(const std::string& path, size_t limit) {
  std::ifstream in(path);
  std::string line;
  int64_t counted = 0;
  for (size_t n = 0; n < limit && std::getline(in, line); ++n)
    counted += counted_in(nlohmann::json::parse(line));
  return counted;
}

// `kiln bench` of the example times its masked steps' phases apart: the backward pass is not
// folded into the forward's row (a row reads "backward  12.345  40.1%").
TEST(SftExample, BenchTimesTheForwardAndBackwardPassesApart) {
  testing::InDirectory source(KILN_SOURCE_DIR);
  if (!std::filesystem::exists("data/kjv_char/tokenizer.json")) {
    GTEST_SKIP() << "SKIP: data/kjv_char is not prepared (tools/setup.sh makes it)";
  }
  testing::TempDir dir;
  auto result = run_kiln(
      fmt::format("bench experiments/sft_example.toml --steps 2 --warmup 1 --set run.db={} "
                  "--set run.out_dir={}",
                  dir / "kiln.db", dir / "runs"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto ms_of = [&](const std::string& phase) {
    const std::regex row("\n" + phase + " +([0-9.]+) +[0-9.]+%");
    std::smatch m;
    return std::regex_search(result.output, m, row) ? std::stod(m[1]) : -1.0;
  };
  EXPECT_GT(ms_of("forward"), 0) << result.output;
  EXPECT_GT(ms_of("backward"), 0) << result.output;
}

TEST(SftExample, TrainsAndReportsTheTokensItsLossCounted) {
  testing::InDirectory source(KILN_SOURCE_DIR);
  if (!std::filesystem::exists("data/kjv_char/tokenizer.json")) {
    GTEST_SKIP() << "SKIP: data/kjv_char is not prepared (tools/setup.sh makes it)";
  }
  testing::TempDir dir;
  const std::string db = dir / "kiln.db";
  auto result = run_kiln(fmt::format(
      "run experiments/sft_example.toml --name sft --set train.steps=4 --set schedule.warmup=1 "
      "--set eval.every=4 "
      "--set checkpoint.every=4 --set train.log_every=1 --set run.db={} --set run.out_dir={}",
      db, dir / "runs"));
  ASSERT_EQ(result.exit_code, 0) << result.output;

  // Step 1 reads the first 2 micro-batches of 8 records; an evaluation, every validation record.
  const int64_t step_one = counted_in_file("experiments/data/kjv_sft_train.jsonl", 16);
  const int64_t val = counted_in_file("experiments/data/kjv_sft_val.jsonl", 1000);
  EXPECT_NE(result.output.find("240 records"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("the loss counts only the targets the data marks"),
            std::string::npos);
  EXPECT_NE(result.output.find(fmt::format("| {} counted\n", step_one)), std::string::npos)
      << step_one << "\n"
      << result.output;
  EXPECT_NE(result.output.find(fmt::format("over {} counted tokens", val)), std::string::npos)
      << val << "\n"
      << result.output;

  // The run store keeps the same counts.
  EXPECT_EQ(testing::query(db, "select counted_tokens from metrics where step = 1")[0][0],
            std::to_string(step_one));
  EXPECT_EQ(testing::query(db, "select counted_tokens from evals where step = 4")[0][0],
            std::to_string(val));

  auto eval = run_kiln("eval sft --db " + db);
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find(fmt::format("({} counted by the loss)", val)), std::string::npos)
      << val << "\n"
      << eval.output;
}

// The rows of `metrics` of run `name`: step, loss, counted_tokens.
std::vector<std::vector<std::string>> metric_rows(const std::string& db, const std::string& name) {
  return testing::query(db, fmt::format("select step, loss, counted_tokens from metrics where "
                                        "run_id = (select id from runs where name = '{}') "
                                        "order by step",
                                        name));
}

// With ddp every rank divides its loss by the count of all ranks: two ranks of 4 rows read the
// records one process of 8 rows reads in each micro-step, and follow it step for step.
TEST(SftExample, TwoDdpRanksCountAndLearnAsOneProcess) {
  testing::InDirectory source(KILN_SOURCE_DIR);
  if (!std::filesystem::exists("data/kjv_char/tokenizer.json")) {
    GTEST_SKIP() << "SKIP: data/kjv_char is not prepared (tools/setup.sh makes it)";
  }
  testing::TempDir dir;
  const std::string db = dir / "kiln.db";
  const std::string common = fmt::format(
      " --set train.steps=3 --set schedule.warmup=1 --set eval.every=0 --set checkpoint.every=0 "
      "--set run.threads=1 --set run.db={} --set run.out_dir={}",
      db, dir / "runs");
  auto one = run_kiln("run experiments/sft_example.toml --name one" + common);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const int port = testing::free_local_port();
  auto two = run_kiln(fmt::format(
      "launch --nproc-per-node 2 --master-port {} -- run experiments/sft_example.toml --name two "
      "--set parallel.type=ddp --set train.micro_batch=4{}",
      port, common));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const auto a = metric_rows(db, "one"), b = metric_rows(db, "two");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i][2], b[i][2]) << "step " << i + 1;
    EXPECT_NEAR(std::stod(a[i][1]), std::stod(b[i][1]), 1e-5) << "step " << i + 1;
  }
  EXPECT_EQ(a[0][2], std::to_string(counted_in_file("experiments/data/kjv_sft_train.jsonl", 16)));
}

// Packing (data.pack) must not change what the model computes for a record: with a learning rate
// of 0 the weights stay as initialised, so the packed and the padded runs' closing test passes
// evaluate the same model on the same records (the validation file as the test split), and their
// losses agree to float32 rounding, over the same count of targets.
TEST(SftExample, PackedRowsEvaluateEveryRecordAsPaddedRowsDo) {
  testing::InDirectory source(KILN_SOURCE_DIR);
  if (!std::filesystem::exists("data/kjv_char/tokenizer.json")) {
    GTEST_SKIP() << "SKIP: data/kjv_char is not prepared (tools/setup.sh makes it)";
  }
  testing::TempDir dir;
  const std::string db = dir / "kiln.db";
  const std::string common = fmt::format(
      " --set train.steps=2 --set schedule.warmup=1 --set optimizer.lr=0 --set eval.every=0 "
      "--set checkpoint.every=0 "
      "--set data.test=experiments/data/kjv_sft_val.jsonl --set run.threads=1 --set run.db={} "
      "--set run.out_dir={} --set model.block_size=384",
      db, dir / "runs");  // one context for both, so that both draw the same initial weights
  auto padded = run_kiln("run experiments/sft_example.toml --name padded" + common);
  ASSERT_EQ(padded.exit_code, 0) << padded.output;
  auto packed = run_kiln("run experiments/sft_example.toml --name packed --set data.pack=true " +
                         common + " --set train.seq_len=384");
  ASSERT_EQ(packed.exit_code, 0) << packed.output;
  EXPECT_NE(packed.output.find("240 records"), std::string::npos) << packed.output;
  EXPECT_NE(packed.output.find("packed into"), std::string::npos) << packed.output;
  auto eval_of = [&](const std::string& run) {
    return testing::query(db,
                          "select e.loss, e.counted_tokens from evals e join runs r on "
                          "r.id = e.run_id where r.name = '" +
                              run + "' and e.split = 'test'")[0];
  };
  const auto a = eval_of("padded"), b = eval_of("packed");
  EXPECT_EQ(a[1], std::to_string(counted_in_file("experiments/data/kjv_sft_val.jsonl", 1000)));
  EXPECT_EQ(a[1], b[1]);
  EXPECT_NEAR(std::stod(a[0]), std::stod(b[0]), 1e-5);
}

// The records' position is part of a snapshot: a run killed after step 4 and resumed gives
// the losses and counts of a run never stopped, digit for digit.
TEST(SftExample, AResumedRunContinuesBitForBit) {
  testing::InDirectory source(KILN_SOURCE_DIR);
  if (!std::filesystem::exists("data/kjv_char/tokenizer.json")) {
    GTEST_SKIP() << "SKIP: data/kjv_char is not prepared (tools/setup.sh makes it)";
  }
  testing::TempDir dir;
  const std::string db = dir / "kiln.db";
  const std::string common = fmt::format(
      " --set train.steps=6 --set schedule.warmup=1 --set eval.every=0 --set checkpoint.every=2 "
      "--set train.micro_batch=2 --set train.batch_tokens=768 --set run.db={} --set run.out_dir={}",
      db, dir / "runs");
  auto whole = run_kiln("run experiments/sft_example.toml --name whole" + common);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  // SIGKILLed as its second snapshot (step 4) is published, before the run store records it.
  ::setenv("KILN_FAULT", "snapshot.published:2", 1);
  auto killed = run_kiln("run experiments/sft_example.toml --name cut" + common);
  ::unsetenv("KILN_FAULT");
  EXPECT_NE(killed.exit_code, 0) << killed.output;
  auto resumed = run_kiln("resume cut --db " + db);
  ASSERT_EQ(resumed.exit_code, 0) << killed.output << resumed.output;
  EXPECT_EQ(metric_rows(db, "whole"), metric_rows(db, "cut"));
}

}  // namespace
}  // namespace kiln
