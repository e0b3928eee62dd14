// Snapshots and resume through the real binary: damaged snapshots, refused changes, eval /
// sample / export. (Kills at random moments and at fault points: fault_test.cpp.)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "snapshot_writers.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::scalar;
using Resume = testing::EachSnapshotWriter<>;
using Restart = testing::TinyRun;

KILN_EACH_SNAPSHOT_WRITER(Resume);

void damage(const std::string& path, bool truncate) {
  if (truncate) {
    std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
    return;
  }
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(std::filesystem::file_size(path) / 2));
  char c = 0;
  f.read(&c, 1);
  f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(path) / 2));
  c = static_cast<char>(c ^ 0x5a);
  f.write(&c, 1);
}

TEST_P(Resume, DamagedSnapshotsAreReportedAndTheLastGoodOneIsUsed) {
  const std::string exp = experiment();
  ASSERT_EQ(run_kiln("run " + exp +
                     " --name c --set train.steps=12 --set checkpoint.every=4 "
                     "--set checkpoint.keep=3 --set eval.every=0")
                .exit_code,
            0);
  const std::string snaps = folder_of("c") + "/snapshots";
  damage(snaps + "/step_000012/shard_0.safetensors", false);
  auto eval = run_kiln("eval c --steps 2 --db " + db());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("step_000012' is damaged: 'shard_0.safetensors' fails its checksum"),
            std::string::npos)
      << eval.output;
  EXPECT_NE(eval.output.find("c step_000008 step 8"), std::string::npos) << eval.output;

  damage(snaps + "/step_000008/optimizer_0.pt", true);
  auto resumed = run_kiln("resume c --set train.steps=16 --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("'optimizer_0.pt' has"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming after step 4"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("resume changes train.steps: 12 -> 16"), std::string::npos);
  EXPECT_EQ(scalar(db(), "select count(*) || ' ' || max(step) from metrics"), "16 16");
  EXPECT_EQ(scalar(db(), "select changes from resumes"), "train.steps: 12 -> 16");
  EXPECT_EQ(scalar(db(), "select steps from runs"), "16");  // planned: `runs list` shows 16/16
}

TEST_P(Resume, ChangesToTheModelOrDataAreRefusedWithTheKeys) {
  const std::string exp = experiment();
  ASSERT_EQ(
      run_kiln("run " + exp + " --name r --set train.steps=4 --set checkpoint.every=2").exit_code,
      0);
  auto refused = run_kiln("resume r --db " + db() +
                          " --set model.n_layer=3 --set train.seq_len=16 --set train.steps=8");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("resume cannot change model.n_layer, train.seq_len"),
            std::string::npos)
      << refused.output;
  auto done = run_kiln("resume r --db " + db());
  EXPECT_EQ(done.exit_code, 2);
  EXPECT_NE(done.output.find("already completed"), std::string::npos) << done.output;
}

// The lr per stored step of run `name`, from the store.
std::vector<double> lrs(const std::string& db, const std::string& name) {
  return testing::query_doubles(db,
                                "select lr from metrics join runs on runs.id = run_id where "
                                "name = '" +
                                    name + "' order by step");
}

// A resume that raises train.steps under a cosine schedule would move the lr of the next step
// (from 6.6e-4 to 3.9e-3, without a word): refused with the numbers and both choices;
// --keep-schedule holds steps past the planned 8 at step 8's lr (read from the store, as the
// run recorded it); --reschedule goes on with the new span and says what the lr became.
TEST_P(Resume, ARaisedTrainStepsMovesTheScheduleOnlyWhenAsked) {
  const std::string exp = experiment();
  const std::string cosine =
      " --set schedule.type=\"cosine\" --set train.steps=8 --set checkpoint.every=4";
  for (const char* name : {"keep", "again"}) {
    ASSERT_EQ(run_kiln("run " + exp + " --name " + name + cosine).exit_code, 0);
  }
  const std::string raise = "resume keep --db " + db() + " --set train.steps=16";
  testing::expect_one_error_line(run_kiln(raise), raise,
                                 "train.steps 8 -> 16 moves the lr of step 9 from ");
  EXPECT_EQ(scalar(db(), "select status || ' ' || steps from runs where name = 'keep'"),
            "completed 8");

  auto kept = run_kiln(raise + " --keep-schedule");
  ASSERT_EQ(kept.exit_code, 0) << kept.output;
  EXPECT_NE(kept.output.find("resume changes schedule.total_steps: 0 -> 8"), std::string::npos)
      << kept.output;
  const std::vector<double> held = lrs(db(), "keep");
  ASSERT_EQ(held.size(), 16u);
  for (size_t i = 8; i < 16; ++i)
    EXPECT_EQ(held[i], held[7]) << "step " << i + 1;

  auto rescheduled = run_kiln("resume again --db " + db() + " --set train.steps=16 --reschedule");
  ASSERT_EQ(rescheduled.exit_code, 0) << rescheduled.output;
  EXPECT_NE(rescheduled.output.find("lr of step 9: "), std::string::npos) << rescheduled.output;
  const std::vector<double> moved = lrs(db(), "again");
  ASSERT_EQ(moved.size(), 16u);
  EXPECT_GT(moved[8], held[8]);  // the longer cosine is higher at step 9 than the held final lr
}

// Export reads only the snapshot's weights: the run's data may have moved, and the
// weights exported then are those exported before it moved, byte for byte.
TEST_P(Resume, ExportNeedsNoData) {
  ASSERT_EQ(
      run_kiln("run " + experiment() + " --name w --set train.steps=2 --set checkpoint.every=2")
          .exit_code,
      0);
  const std::string before = dir_ / "before.safetensors", after = dir_ / "after.safetensors";
  ASSERT_EQ(run_kiln("export w -o " + before + " --db " + db()).exit_code, 0);
  std::filesystem::rename(dir_ / "data", dir_ / "moved");
  auto exported = run_kiln("export w -o " + after + " --db " + db());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_EQ(testing::read_file(after), testing::read_file(before));
  EXPECT_NE(run_kiln("eval w --db " + db()).exit_code, 0);  // eval does read the data
}

TEST_F(Restart, AnUnfinishedNameIsRefusedUnlessRestarted) {
  const std::string exp = experiment();
  // SIGKILLed once its row says running, however long this machine takes to get there.
  testing::run_child_until(
      {"run", exp, "--name", "u", "--set", "train.steps=100000"}, "/dev/null", "",
      [&] { return scalar(db(), "select status from runs where name = 'u'") == "running"; });
  ASSERT_EQ(scalar(db(), "select status from runs where name = 'u'"), "running");
  auto refused = run_kiln("run " + exp + " --name u");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("continue it with `kiln resume u`, or start it afresh with "
                                "--restart"),
            std::string::npos)
      << refused.output;
  auto restarted = run_kiln("run " + exp + " --name u --restart --set train.steps=3");
  EXPECT_EQ(restarted.exit_code, 0) << restarted.output;
  EXPECT_EQ(scalar(db(), "select count(*) from metrics"), "3");
}

TEST_P(Resume, ExportThenInitFromReproducesTheEvalLoss) {
  const std::string exp = experiment();
  ASSERT_EQ(run_kiln("run " + exp +
                     " --name a --set train.steps=20 --set checkpoint.every=20 "
                     "--set eval.every=20 --set eval.steps=4")
                .exit_code,
            0);
  const std::string weights = dir_ / "a.safetensors";
  auto exported = run_kiln("export a -o " + weights + " --db " + db());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  // lr 0: the one step leaves the imported weights as they are, so its eval sees them exactly.
  auto b = run_kiln("run " + exp + " --name b --set model.init_from=" + weights +
                    " --set optimizer.lr=0 --set train.steps=1 --set eval.every=1 "
                    "--set eval.steps=4");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const double before = testing::query_doubles(
      db(), "select loss from evals join runs on id = run_id where name = 'a' and step = 20")[0];
  const double after = testing::query_doubles(
      db(), "select loss from evals join runs on id = run_id where name = 'b' and step = 1")[0];
  EXPECT_NEAR(before, after, 1e-6);

  auto mismatch = run_kiln("run " + exp + " --name c --set model.init_from=" + weights +
                           " --set model.n_embd=48 --set model.n_head=2");
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_NE(mismatch.output.find("transformer.wte.weight is [64, 32] but the model needs [64, 48]"),
            std::string::npos)
      << mismatch.output;
}

TEST_P(Resume, EvalRecordsARowAndSamplingIsReproducible) {
  const std::string exp = experiment();
  ASSERT_EQ(
      run_kiln("run " + exp + " --name s --set train.steps=10 --set checkpoint.every=10").exit_code,
      0);
  auto eval = run_kiln("eval s --split val --db " + db());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("val loss"), std::string::npos);
  EXPECT_EQ(scalar(db(), "select checkpoint from evals where checkpoint != ''"), "step_000010");
  const std::string args = "sample s --prompt 'In the' --tokens 30 --seed 3 --db " + db();
  auto one = run_kiln(args), two = run_kiln(args);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_EQ(one.output, two.output);
  EXPECT_NE(one.output.find("In the"), std::string::npos);
  auto other = run_kiln("sample s --prompt 'In the' --tokens 30 --seed 4 --db " + db());
  EXPECT_NE(one.output, other.output);
}

}  // namespace
}  // namespace kiln
