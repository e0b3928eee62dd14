// Sweeps and reproducibility, through the real binary.
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::scalar;
using Sweep = testing::TinyRun;

TEST_F(Sweep, GridWithTwoJobsRecordsEveryMemberTaggedAndSkipsThemOnRerun) {
  const std::string exp = experiment();
  const std::string args = "sweep " + exp +
                           " --name g --grid optimizer.lr=1e-3,1e-2 --grid run.seed=1,2 "
                           "--set train.steps=8 --set eval.every=0 --jobs 2";
  auto first = run_kiln(args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'g' and status = 'completed'"),
            "4");
  EXPECT_EQ(scalar(db(), "select count(*) from metrics"), "32");
  EXPECT_EQ(scalar(db(), "select count(*) from runs where name = 'g/optimizer.lr=1e-3,run.seed=1'"),
            "1");
  // jobs 2 on this machine's cores: each member gets its share of threads.
  EXPECT_NE(first.output.find("2 at a time"), std::string::npos) << first.output;
  for (const char* column : {"optimizer.lr", "run.seed", "final_loss", "best_val", "status"}) {
    EXPECT_NE(first.output.find(column), std::string::npos) << column << "\n" << first.output;
  }
  auto again = run_kiln(args);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("4 members, 0 to run"), std::string::npos) << again.output;
}

TEST_F(Sweep, AFailingMemberIsRecordedAndTheOthersGoOn) {
  const std::string exp = experiment();
  auto result = run_kiln("sweep " + exp +
                         " --name f --zip model.vocab_size=64,10 --zip train.steps=4,4 "
                         "--set eval.every=0");
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_EQ(scalar(db(), "select status from runs where name like 'f/model.vocab_size=64%'"),
            "completed");
  EXPECT_EQ(scalar(db(), "select status from runs where name like 'f/model.vocab_size=10%'"),
            "failed");
  EXPECT_NE(scalar(db(), "select error from runs where status = 'failed'").find("vocabulary"),
            std::string::npos);
}

TEST_F(Sweep, SweepFilesExpandGridZipAndSeedsAndCatchTyposBeforeRunning) {
  const std::string exp = experiment();
  testing::write_text(dir_ / "s.toml", "base = \"" + exp +
                                           "\"\nseeds = [1, 2]\n"
                                           "[grid]\noptimizer.lr = [1e-3, 2e-3]\n"
                                           "[set]\ntrain.steps = 2\neval.every = 0\n");
  auto ok = run_kiln("sweep " + (dir_ / "s.toml"));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 's'"), "4");
  testing::write_text(dir_ / "bad.toml", "base = \"" + exp + "\"\n[grid]\noptimizer.lrr = [1]\n");
  auto bad = run_kiln("sweep " + (dir_ / "bad.toml"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("did you mean 'optimizer.lr'?"), std::string::npos) << bad.output;
  testing::write_text(dir_ / "typo.toml", "base = \"" + exp + "\"\ngird = 3\n");
  auto typo = run_kiln("sweep " + (dir_ / "typo.toml"));
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.output.find("typo.toml:2:1: unknown sweep key 'gird': did you mean 'grid'?"),
            std::string::npos)
      << typo.output;
}

TEST_F(Sweep, SameConfigAndSeedIsBitIdenticalAndAnotherSeedIsNot) {
  const std::string exp = experiment() + " --set model.dropout=0.1 --set train.steps=15";
  ASSERT_EQ(run_kiln("run " + exp + " --name a").exit_code, 0);
  ASSERT_EQ(run_kiln("run " + exp + " --name b").exit_code, 0);
  ASSERT_EQ(run_kiln("run " + exp + " --name c --set run.seed=7").exit_code, 0);
  auto a = losses("a"), b = losses("b"), c = losses("c");
  ASSERT_EQ(a.size(), 15u);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  EXPECT_NE(a[0], c[0]);  // different initial weights already
  EXPECT_EQ(scalar(db(), "select count(distinct config_hash) from runs"), "2");
  // `runs compare` says so too: the identical-case line, and never the mismatch one (which also
  // holds the word "identical", as in "after 3 identical steps").
  const std::string hash = scalar(db(), "select config_hash from runs where name = 'a'");
  auto compare = run_kiln("runs compare a b --db " + db());
  EXPECT_EQ(compare.exit_code, 0) << compare.output;
  EXPECT_NE(
      compare.output.find("a and b (config " + hash + "): loss curves identical over 15 steps"),
      std::string::npos)
      << compare.output;
  EXPECT_EQ(compare.output.find("first differ"), std::string::npos) << compare.output;
}

}  // namespace
}  // namespace kiln
