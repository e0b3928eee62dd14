// `kiln prepare` at scale (core/data/prepare.h): the same shards at any thread count, and a
// prepare SIGKILLed mid-encode or mid-publish, or stopped by Ctrl-C, leaves no half shard under
// a final name and finishes with --resume to the bytes of a prepare never stopped. The King James
// Bible (4 MB, tools/setup.sh) through the GPT-2 tokenizer: four units of 1 MiB, two per batch at
// one thread.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <sys/wait.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::run_kiln;

// Every file of a prepared folder (not its .prepare/ staging) and its bytes.
std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      files[entry.path().filename().string()] = testing::read_file(entry.path().string());
    }
  }
  return files;
}

class PrepareResume : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(corpus_) || !fs::exists(std::string(KILN_SOURCE_DIR) + "/data/gpt2")) {
      GTEST_SKIP() << "SKIP: data/kjv.txt or data/gpt2 is missing (tools/setup.sh makes them)";
    }
  }

  testing::CommandResult prepare(const std::string& out, const std::string& extra) {
    return run_kiln(fmt::format("prepare {} --tokenizer gpt2 --val-fraction 0.05 "
                                "--test-fraction 0.05 --shard-tokens 300000 --out {} {}",
                                corpus_, dir_ / out, extra),
                    KILN_SOURCE_DIR);
  }

  // A prepare killed by the fault point `fault`, then resumed.
  testing::CommandResult killed_then_resumed(const std::string& out, const std::string& fault) {
    ::setenv("KILN_FAULT", fault.c_str(), 1);
    auto killed = prepare(out, "--threads 1");
    ::unsetenv("KILN_FAULT");
    EXPECT_NE(killed.exit_code, 0) << killed.output;
    EXPECT_TRUE(fs::exists(dir_ / (out + "/.prepare"))) << killed.output;
    return prepare(out, "--threads 1 --resume");
  }

  const std::string corpus_ = std::string(KILN_SOURCE_DIR) + "/data/kjv.txt";
  testing::TempDir dir_;
};

TEST_F(PrepareResume, TheShardsAreTheSameAtAnyThreadCount) {
  auto one = prepare("one", "--threads 1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto three = prepare("three", "--threads 3");
  ASSERT_EQ(three.exit_code, 0) << three.output;
  const auto a = files_of(dir_ / "one"), b = files_of(dir_ / "three");
  EXPECT_GE(a.size(), 6u);  // train shards, one each of val and test, tokenizer.json
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(fs::exists(dir_ / "one/.prepare"));
  // Not a terminal: a plain line for each tenth of the input.
  EXPECT_NE(one.output.find("prepare: encode 100% ("), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("MB/s"), std::string::npos) << one.output;
}

TEST_F(PrepareResume, AKillMidEncodeOrMidPublishResumesToTheSameShards) {
  auto whole = prepare("whole", "--threads 2");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const auto expected = files_of(dir_ / "whole");

  // Killed with the second batch's tokens written but not counted: a resume drops them.
  auto encode = killed_then_resumed("encode", "prepare.unrecorded:2");
  ASSERT_EQ(encode.exit_code, 0) << encode.output;
  EXPECT_NE(encode.output.find("resuming with "), std::string::npos) << encode.output;
  EXPECT_TRUE(files_of(dir_ / "encode") == expected);

  // Killed with one shard renamed into place: every other name is still absent, none is half
  // written, and the resume publishes them all.
  ::setenv("KILN_FAULT", "prepare.publishing", 1);
  auto cut = prepare("publish", "--threads 1");
  ::unsetenv("KILN_FAULT");
  EXPECT_NE(cut.exit_code, 0) << cut.output;
  const auto partial = files_of(dir_ / "publish");
  ASSERT_EQ(partial.size(), 1u) << cut.output;
  EXPECT_EQ(partial.begin()->second, expected.at(partial.begin()->first));
  auto published = prepare("publish", "--threads 1 --resume");
  ASSERT_EQ(published.exit_code, 0) << published.output;
  EXPECT_TRUE(files_of(dir_ / "publish") == expected);
  EXPECT_FALSE(fs::exists(dir_ / "publish/.prepare"));
}

// Ctrl-C mid-encode: the batch under way is finished and saved, nothing is published, the exit
// is 130 with a line saying how to go on, and --resume ends where a prepare never stopped does.
TEST_F(PrepareResume, ACtrlCStopsAfterASavedBatchAndResumeFinishesIt) {
  const std::string big = dir_ / "kjv10.txt";
  {
    std::ofstream out(big, std::ios::binary);
    const std::string kjv = testing::read_file(corpus_);
    for (int copy = 0; copy < 10; ++copy)
      out << kjv;
  }
  auto args = [&](const std::string& out) {
    return std::vector<std::string>{"prepare",   big, "--tokenizer", "gpt2",
                                    "--threads", "1", "--out",       dir_ / out};
  };
  const std::string state = dir_ / "cut/.prepare/state.json";
  const pid_t pid =
      testing::start_kiln(args("cut"), dir_ / "cut.log", {KILN_SOURCE_DIR, "", false});
  // A batch saved: the state's token count above 0 (the state is renamed into place whole).
  const bool saving = testing::wait_for(
      [&] {
        return fs::exists(state) &&
               nlohmann::json::parse(testing::read_file(state)).at("tokens").get<int64_t>() > 0;
      },
      std::chrono::seconds(60));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string log = testing::read_file(dir_ / "cut.log");
  ASSERT_TRUE(saving) << log;
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 130) << log;
  EXPECT_NE(log.find("interrupted: nothing published; the same command with --resume"),
            std::string::npos)
      << log;
  EXPECT_TRUE(files_of(dir_ / "cut").empty()) << log;

  auto resume_args = args("cut");
  resume_args.push_back("--resume");
  const pid_t resumed =
      testing::start_kiln(resume_args, dir_ / "resume.log", {KILN_SOURCE_DIR, "", false});
  ::waitpid(resumed, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << testing::read_file(dir_ / "resume.log");
  const pid_t whole =
      testing::start_kiln(args("whole"), dir_ / "whole.log", {KILN_SOURCE_DIR, "", false});
  ::waitpid(whole, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << testing::read_file(dir_ / "whole.log");
  EXPECT_TRUE(files_of(dir_ / "cut") == files_of(dir_ / "whole"));
}

TEST_F(PrepareResume, AResumeOfOtherInputsOrOfNothingIsRefused) {
  auto nothing = prepare("none", "--resume");
  testing::expect_one_error_line(nothing, "prepare --resume", "holds no interrupted prepare");

  ::setenv("KILN_FAULT", "prepare.unrecorded:1", 1);
  auto killed = prepare("other", "--threads 1");
  ::unsetenv("KILN_FAULT");
  EXPECT_NE(killed.exit_code, 0) << killed.output;
  auto other = run_kiln(
      fmt::format("prepare {} --tokenizer char --out {} --resume", corpus_, dir_ / "other"),
      KILN_SOURCE_DIR);
  testing::expect_one_error_line(other, "prepare --resume (char)",
                                 "read other inputs: tokenizer: \"gpt2\" then, \"char\" now");
  EXPECT_TRUE(fs::exists(dir_ / "other/.prepare/state.json"));  // kept for the right resume
}

}  // namespace
}  // namespace kiln
