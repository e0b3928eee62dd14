// Who keeps freed memory (core/util/freed_memory.h), read back from jemalloc itself: its
// statistics at exit (MALLOC_CONF=stats_print:true) print the decay the process's arenas ended
// with beside the one jemalloc started with, "opt.dirty_decay_ms: 10000 (arenas.dirty_decay_ms:
// -1)". A run and a sweep's members keep freed pages (-1); `kiln serve` and a sweep's parent end on
// jemalloc's own default. A run's resident memory, read from /proc, stays flat after its first
// evaluation, whose task scoring takes far more memory than its steps. A member started beside
// another counts what that one is yet to take (core/train/memory_check.h).
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tiny_run.h"

namespace kiln {
namespace {

using testing::read_file;
using testing::run_kiln;

class FreedMemory : public testing::TinyRun {
 protected:
  void SetUp() override {
    TinyRun::SetUp();
    const auto linked = testing::run_shell(std::string("ldd '") + KILN_BINARY + "'");
    jemalloc_ = linked.output.find("libjemalloc.so") != std::string::npos;
    if (!jemalloc_ && std::getenv("CI") != nullptr) {
      FAIL() << "kiln is built without jemalloc (libjemalloc-dev missing, KILN_JEMALLOC=OFF or a "
                "sanitizer build), which CI's build links";
    }
    if (!jemalloc_) GTEST_SKIP() << "kiln is built without jemalloc: nothing keeps freed memory";
  }

  bool jemalloc_ = false;
};

// The decay jemalloc started with and the one its arenas ended with, from the statistics it printed
// in `output` at exit; {0, 0} and a failure when it printed none.
struct Decay {
  long at_start = 0, at_exit = 0;
};
Decay dirty_decay(const std::string& output) {
  static const std::regex line(
      R"(opt\.dirty_decay_ms: (-?\d+) \(arenas\.dirty_decay_ms: (-?\d+)\))");
  std::smatch match;
  if (!std::regex_search(output, match, line)) {
    ADD_FAILURE() << "no jemalloc statistics in:\n" << output.substr(0, 2000);
    return {};
  }
  return {std::stol(match[1]), std::stol(match[2])};
}

TEST_F(FreedMemory, RunsAndMembersKeepFreedPagesAndServeAndTheSweepParentDoNot) {
  const testing::ScopedEnv stats("MALLOC_CONF", "stats_print:true");
  auto run = run_kiln("run " + experiment() + " --name r --set train.steps=3");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Decay trained = dirty_decay(run.output);
  EXPECT_EQ(trained.at_exit, -1);
  EXPECT_GE(trained.at_start, 0) << "jemalloc's own default, which no setting changed";

  auto sweep =
      run_kiln("sweep " + experiment() + " --name s --grid run.seed=1,2 --set train.steps=2");
  ASSERT_EQ(sweep.exit_code, 0) << sweep.output;
  const Decay parent = dirty_decay(sweep.output);
  EXPECT_EQ(parent.at_exit, parent.at_start);
  EXPECT_GE(parent.at_exit, 0);
  const std::string member_log = read_file(folder_of("s/run.seed=1") + "/console.log");
  EXPECT_EQ(dirty_decay(member_log).at_exit, -1);

  const std::string log = dir_ / "serve.log";
  const pid_t serve = testing::start_kiln({"serve", "--db", db(), "--port", "0"}, log);
  const bool listening = testing::wait_for(
      [&] { return read_file(log).find("kiln serve: http://") != std::string::npos; },
      std::chrono::seconds(60));
  ::kill(serve, SIGTERM);
  ::waitpid(serve, nullptr, 0);
  ASSERT_TRUE(listening) << read_file(log);
  const Decay served = dirty_decay(read_file(log));
  EXPECT_EQ(served.at_exit, served.at_start);
  EXPECT_GE(served.at_exit, 0);
}

// VmRSS of `pid` in KiB (the kernel's figure), or -1 once it is gone.
long resident_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// The step of the last "step N/M" line in the last few KB of `log`; 0 before the first.
long last_step(const std::string& log) {
  std::ifstream in(log, std::ios::ate);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - 4096));
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const std::regex step(R"(step +(\d+)/\d+ \|)");
  long last = 0;
  for (auto it = std::sregex_iterator(tail.begin(), tail.end(), step); it != std::sregex_iterator();
       ++it)
    last = std::stol((*it)[1]);
  return last;
}

// 1,000 steps of a tiny model scoring a task of 70 long contexts, 64 to a forward pass, every 100
// steps: the scoring takes ~150 MB more than a step. Flat: while it trains between two scorings
// (steps 10 to 90 past each hundred), the run holds no more than 16 MiB above what it held
// training before the first (steps 50 to 99). Keeping every freed page, it held the scoring's
// peak for the rest of the run.
TEST_F(FreedMemory, ResidentMemoryStaysFlatAfterTheFirstEval) {
  std::string items;
  for (int i = 0; i < 70; ++i) {
    std::string context;
    for (int j = i; j < i + 6; ++j)
      context += fmt::format("In the beginning was the word number {}, and the word was good. ", j);
    items += fmt::format(
        "{{\"context\": \"{}In the beginning was the word number {}, and the word was\", "
        "\"choices\": [\"light.\", \"good.\"], \"label\": {}}}\n",
        context, i, i % 7 == 0 ? 0 : 1);
  }
  testing::write_text(dir_ / "tasks/long.jsonl", items);
  testing::write_text(dir_ / "tasks/long.toml", "kind = \"choice\"\nitems = \"long.jsonl\"\n");
  const std::string log = dir_ / "run.log";
  const pid_t run = testing::start_kiln(
      {"run", experiment(), "--name", "flat", "--set", "train.steps=1000", "--set",
       "train.micro_batch=2", "--set", "model.block_size=512", "--set", "eval.every=100", "--set",
       "eval.task_batch=64", "--set", "eval.tasks=\"" + (dir_ / "tasks/long.toml") + "\""},
      log);
  long before = 0;
  std::vector<std::pair<long, long>> between;  // (step, KiB) while training between scorings
  int status = 0;
  while (::waitpid(run, &status, WNOHANG) == 0) {
    const long step = last_step(log);
    const long kib = resident_kib(run);
    if (step >= 50 && step < 100) before = std::max(before, kib);
    if (step > 100 && step % 100 >= 10 && step % 100 < 90) between.emplace_back(step, kib);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(log);
  ASSERT_NE(read_file(log).find("step 100: task long: acc"), std::string::npos) << read_file(log);
  ASSERT_GT(before, 0) << "no sample before the first eval";
  ASSERT_GT(between.size(), 20u) << "too few samples between evals";
  const auto most =
      *std::max_element(between.begin(), between.end(),
                        [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_LE(most.second, before + 16 * 1024)
      << "at step " << most.first << ": " << most.second << " KiB against " << before
      << " KiB before the first eval";
}

// A member's memory check counts what the members running beside it are yet to take
// (KILN_MEMORY_RESERVED, which the sweep sets): with all of MemAvailable taken by them, even
// the tiny model is refused, and told to run fewer members at once; with 1 MiB taken, it runs.
using MemberMemory = testing::TinyRun;

double mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) == 0) return std::stod(line.substr(13)) * 1024;
  }
  return 0;
}

TEST_F(MemberMemory, TheMemoryCheckCountsWhatRunningMembersAreYetToTake) {
  {
    const std::string all = fmt::format("{:.0f}", mem_available_bytes() + (1 << 30));
    const testing::ScopedEnv taken("KILN_MEMORY_RESERVED", all.c_str());
    const std::string args = "run " + experiment() + " --name full";
    testing::expect_one_error_line(run_kiln(args), args,
                                   "that the sweep's members running beside this one are yet to "
                                   "take): run fewer members at once (kiln sweep --jobs)");
  }
  const testing::ScopedEnv taken("KILN_MEMORY_RESERVED", "1048576");
  auto run = run_kiln("run " + experiment() + " --name room --set train.steps=2");
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

}  // namespace
}  // namespace kiln
