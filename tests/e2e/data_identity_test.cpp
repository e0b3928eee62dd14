// The files a run reads are the ones it started with, through the real binary: a
// resume from another directory that has data of its own, a re-prepared corpus, `kiln eval
// --data`, and a run whose init_from file is gone. Each compares with an uninterrupted twin's
// curve, or with files the test prepared itself.
#include <filesystem>

#include <fmt/format.h>

#include "tiny_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::expect_one_error_line;
using testing::run_kiln;
using testing::scalar;

class DataIdentity : public testing::TinyRun {
 protected:
  // Another corpus prepared in `folder`/data: text the tiny run never saw.
  void prepare_other(const std::string& folder) {
    fs::create_directories(folder);
    std::string text;
    for (int i = 0; i < 200; ++i)
      text += fmt::format("Another text altogether, line {} of it, quite unlike the first.\n", i);
    testing::write_text(folder + "/corpus.txt", text);
    auto prepared = run_kiln(
        fmt::format("prepare {}/corpus.txt --out {}/data --val-fraction 0.1", folder, folder));
    ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  }

  // The tiny experiment with data given relative to the test's directory, as a user writes it.
  std::string relative_experiment() {
    const std::string path = experiment("[checkpoint]\nevery = 6\n");
    std::string text = testing::read_file(path);
    for (const std::string& absolute : {dir_ / "data/train_", dir_ / "data/val_"}) {
      text.replace(text.find(absolute), absolute.size(), absolute.substr(dir_.str().size() + 1));
    }
    testing::write_text(path, text);
    return path;
  }
};

// Before: data.train = "data/train_*.bin" was read against the directory of the resume, which had
// other data under that name; the run went on with it without a word.
TEST_F(DataIdentity, AResumeFromAnotherDirectoryReadsTheFilesTheRunStartedWith) {
  const std::string exp = relative_experiment();
  const std::string elsewhere = dir_ / "elsewhere";
  prepare_other(elsewhere);
  const std::string twin =
      run_kiln("run " + exp + " --name twin --set train.steps=12", dir_.str()).output;
  ASSERT_EQ(scalar(db(), "select status from runs where name = 'twin'"), "completed") << twin;
  auto first = run_kiln("run " + exp + " --name r --set train.steps=6", dir_.str());
  ASSERT_EQ(first.exit_code, 0) << first.output;

  auto resumed = run_kiln("resume r --set train.steps=12 --db " + db(), elsewhere);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_curve("twin", "r", 12);
  EXPECT_EQ(scalar(db(),
                   "select resolved from run_inputs join runs on runs.id = run_id where "
                   "name = 'r' and key = 'data.train'"),
            dir_ / "data/train_*.bin");

  auto shown = run_kiln("runs show r --db " + db(), elsewhere);
  EXPECT_NE(shown.output.find("data/train_*.bin  " + dir_ / "data/train_*.bin"), std::string::npos)
      << shown.output;
  // eval and sample from there read the run's own data and tokenizer too.
  auto here = run_kiln("eval r --db " + db(), dir_.str());
  auto there = run_kiln("eval r --db " + db(), elsewhere);
  ASSERT_EQ(there.exit_code, 0) << there.output;
  EXPECT_EQ(here.output.substr(here.output.find("val loss")),
            there.output.substr(there.output.find("val loss")));
  auto sampled = run_kiln("sample r --tokens 5 --prompt 'In the' --db " + db(), elsewhere);
  EXPECT_EQ(sampled.exit_code, 0) << sampled.output;
}

TEST_F(DataIdentity, AResumeOnRepreparedDataIsRefusedUnlessAllowedAndThenRecorded) {
  const std::string exp = experiment("[checkpoint]\nevery = 6\n");
  ASSERT_EQ(run_kiln("run " + exp + " --name r --set train.steps=6").exit_code, 0);
  prepare_other(dir_.str());  // over the same data folder: other shards under the same names

  const std::string args = "resume r --set train.steps=12 --db " + db();
  auto refused = run_kiln(args);
  expect_one_error_line(refused, args,
                        "run 'r' would resume on other files than it trained on: "
                        "data.train (" +
                            dir_ / "data/train_*.bin" + "): train_");
  EXPECT_NE(refused.output.find("--allow-data-change"), std::string::npos);
  EXPECT_EQ(scalar(db(), "select count(*) from resumes"), "0");
  EXPECT_EQ(scalar(db(), "select status from runs"), "completed");

  auto allowed = run_kiln(args + " --allow-data-change");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_NE(scalar(db(), "select changes from resumes").find("files changed: data.train ("),
            std::string::npos);
  // The record now describes the files as they are: the next resume goes on without a word.
  auto next = run_kiln("resume r --set train.steps=14 --db " + db());
  EXPECT_EQ(next.exit_code, 0) << next.output;
  EXPECT_EQ(next.output.find("files changed"), std::string::npos) << next.output;
}

TEST_F(DataIdentity, EvalTakesAnyTokenFilesAndRecordsThemByTheirAbsolutePath) {
  const std::string exp = experiment("[checkpoint]\nevery = 6\n");
  ASSERT_EQ(run_kiln("run " + exp + " --name r --set train.steps=6").exit_code, 0);
  const std::string elsewhere = dir_ / "elsewhere";
  prepare_other(elsewhere);
  auto own = run_kiln("eval r --db " + db());
  auto same = run_kiln("eval r --data 'data/val_*.bin' --db " + db(), dir_.str());
  ASSERT_EQ(same.exit_code, 0) << same.output;
  // The run's own val shards under --data: the same loss as --split val.
  const auto loss_of = [](const std::string& out) { return out.substr(out.find(" loss ")); };
  EXPECT_EQ(loss_of(own.output), loss_of(same.output));
  auto other = run_kiln("eval r --data 'data/val_*.bin' --db " + db(), elsewhere);
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find(elsewhere + "/data/val_*.bin loss"), std::string::npos)
      << other.output;
  EXPECT_NE(loss_of(own.output), loss_of(other.output));
  EXPECT_EQ(scalar(db(), "select count(*) from evals where checkpoint != '' and split = '" +
                             elsewhere + "/data/val_*.bin'"),
            "1");

  const std::string none = "eval r --data 'nothing_*.bin' --db " + db();
  expect_one_error_line(run_kiln(none), none, "--data nothing_*.bin matches no file");
  const std::string both = "eval r --data 'data/val_*.bin' --split test --db " + db();
  EXPECT_NE(run_kiln(both).exit_code, 0);
}

// A run that started from weights (model.init_from) is evaluated, sampled and exported from its
// snapshots: the start's file may be gone, and is not read.
TEST_F(DataIdentity, EvalAndExportOfARunFromInitialWeightsNeedNotFindThem) {
  const std::string exp = experiment("[checkpoint]\nevery = 6\n");
  ASSERT_EQ(run_kiln("run " + exp + " --name a --set train.steps=6").exit_code, 0);
  ASSERT_EQ(run_kiln("export a -o start.safetensors --db " + db(), dir_.str()).exit_code, 0);
  auto b = run_kiln(
      "run " + exp + " --name b --set train.steps=6 --set model.init_from=start.safetensors",
      dir_.str());
  ASSERT_EQ(b.exit_code, 0) << b.output;
  fs::remove(dir_ / "start.safetensors");
  auto eval = run_kiln("eval b --db " + db(), dir_ / "runs");
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
  auto exported = run_kiln("export b -o " + dir_ / "b.safetensors" + " --db " + db());
  EXPECT_EQ(exported.exit_code, 0) << exported.output;
}

}  // namespace
}  // namespace kiln
