// `kiln bench` on the tiny experiment: --record keeps what it printed, --against prints the
// ratio to it (checked here from the two printed numbers), and the BLAS line names the kernels
// OpenBLAS itself reports (OPENBLAS_VERBOSE=2) and warns about a user's weaker choice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <signal.h>
#include <sys/wait.h>

#include "core/util/core_share.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::expect_one_error_line;
using testing::query;
using testing::run_kiln;

using Bench = testing::TinyRun;

const char* const kShort = " --steps 3 --warmup 1";

// The words of every output line that starts with `first`.
std::vector<std::vector<std::string>> lines_starting(const std::string& output,
                                                     const std::string& first) {
  std::vector<std::vector<std::string>> found;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string word; words >> word;)
      row.push_back(word);
    if (!row.empty() && row[0] == first) found.push_back(row);
  }
  return found;
}

// The environment variable set for one kiln command, unset after it.

TEST_F(Bench, RecordThenAgainstPrintsTheRatioToTheRecordedResult) {
  const std::string exp = experiment();
  auto recorded = run_kiln("bench " + exp + kShort + " --record base");
  ASSERT_EQ(recorded.exit_code, 0) << recorded.output;
  EXPECT_NE(recorded.output.find("recorded as 'base' in "), std::string::npos);
  const auto printed = lines_starting(recorded.output, "tokens/s");
  ASSERT_EQ(printed.size(), 1u) << recorded.output;
  const double recorded_tps = std::stod(printed[0][1]);
  const auto stored = query(db(), "select tokens_per_sec, steps, config_hash from bench_results");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_NEAR(std::stod(stored[0][0]), recorded_tps, 0.5);
  EXPECT_EQ(stored[0][1], "3");

  // Compared and recorded again under the default label (commit and config hash).
  auto against = run_kiln("bench " + exp + kShort + " --against base --record");
  ASSERT_EQ(against.exit_code, 0) << against.output;
  const auto rows = lines_starting(against.output, "tokens/s");
  ASSERT_EQ(rows.size(), 2u) << against.output;  // the report's line, then the table's row
  const double now = std::stod(rows[0][1]);
  ASSERT_EQ(rows[1].size(), 4u) << against.output;
  EXPECT_DOUBLE_EQ(std::stod(rows[1][1]), std::round(now));
  EXPECT_DOUBLE_EQ(std::stod(rows[1][2]), std::round(recorded_tps));
  // `now` is printed rounded to whole tokens/s: on a slow machine that alone moves the ratio.
  EXPECT_NEAR(std::stod(rows[1][3]), now / recorded_tps, 0.002 + 1.0 / recorded_tps)
      << against.output;
  EXPECT_EQ(lines_starting(against.output, "step").size(), 2u);
  const auto labels = query(db(), "select label from bench_results order by rowid");
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_TRUE(
      std::regex_match(labels[1][0], std::regex("([0-9a-f]{7}-)?" + stored[0][2].substr(0, 8))))
      << labels[1][0];

  // Refused before anything is timed: another config, a taken label, an unknown label.
  const std::string other = "bench " + exp + kShort + " --set train.micro_batch=4 --against base";
  expect_one_error_line(run_kiln(other), other, "config hash '" + stored[0][2] + "' recorded");
  const std::string taken = "bench " + exp + kShort + " --record base";
  expect_one_error_line(run_kiln(taken), taken, "a bench result labelled 'base' is already in");
  const std::string unknown = "bench " + exp + kShort + " --against bsae";
  expect_one_error_line(run_kiln(unknown), unknown, "did you mean 'base'?");
  EXPECT_EQ(query(db(), "select count(*) from bench_results")[0][0], "2");
}

// The kernels the CPU warrants, from the kernel's own flags ("" for SSE-only CPUs).
std::string warranted_kernels() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string word; words >> word;)
      flags.insert(word);
    break;
  }
  auto has = [&](const char* flag) { return flags.count(flag) == 1; };
  if (has("avx512f") && has("avx512dq") && has("avx512bw") && has("avx512vl")) return "SkylakeX";
  if (has("avx2") && has("fma")) return "Haswell";
  return has("avx") ? "Sandybridge" : "";
}

TEST_F(Bench, TheBlasLineNamesTheKernelsOpenBlasReports) {
  const std::string command = "bench " + experiment() + " --steps 1 --warmup 0";
  testing::CommandResult result;
  {
    testing::ScopedEnv verbose("OPENBLAS_VERBOSE",
                               "2");  // OpenBLAS prints "Core: NAME" as it loads
    result = run_kiln(command);
  }
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto core = lines_starting(result.output, "Core:");
  if (core.empty()) GTEST_SKIP() << "SKIP: this LibTorch's BLAS is not a DYNAMIC_ARCH OpenBLAS";
  EXPECT_NE(result.output.find("BLAS: OpenBLAS "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("(kernels " + core.back()[1]), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("1 thread;"), std::string::npos) << result.output;  // threads = 1
}

// The header names the malloc the binary runs on: jemalloc where the dynamic loader links it in
// (ldd's word, not Kiln's; tools/kiln/allocator.cpp), the C library's otherwise.
TEST_F(Bench, TheBlasLineNamesTheMallocTheBinaryLoads) {
  const auto linked = testing::run_shell(std::string("ldd '") + KILN_BINARY + "'");
  ASSERT_EQ(linked.exit_code, 0) << linked.output;
  auto result = run_kiln("bench " + experiment() + " --steps 1 --warmup 0");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const bool jemalloc = linked.output.find("libjemalloc.so") != std::string::npos;
  EXPECT_NE(result.output.find(jemalloc ? "; malloc: jemalloc 5." : "; malloc: the C library's"),
            std::string::npos)
      << result.output;
}

// Kiln processes on one machine share its cores when asked (run.share_cores, core/util/
// core_share.h): with a run training, `kiln bench` of another experiment with share_cores starts
// with half the cores' threads; without it, with all of them, as it would alone (a rerun's count
// does not depend on what else runs); and none is left registered once both are gone. Its own
// registry, so that tests beside it count for nothing.
TEST_F(Bench, ASecondKilnProcessStartsWithItsShareOfTheCoresWhenItAsks) {
  testing::TempDir runtime;
  testing::ScopedEnv registry("XDG_RUNTIME_DIR", runtime.str().c_str());
  testing::ScopedEnv shared("OMP_NUM_THREADS",
                            nullptr);  // ctest fixes a thread per test (CMakeLists.txt)
  const std::string exp = experiment();
  const std::string running = runtime / "kiln/running";
  const pid_t first =
      testing::start_kiln({"run", exp, "--name", "long", "--set", "train.steps=1000000", "--set",
                           "run.threads=0", "--set", "eval.every=0", "--set", "checkpoint.every=0"},
                          dir_ / "long.log");
  const bool registered = testing::wait_for(
      [&] {
        return std::filesystem::exists(running) && !std::filesystem::is_empty(running) &&
               testing::read_file(dir_ / "long.log").find("step") != std::string::npos;
      },
      std::chrono::seconds(120));
  auto second = run_kiln("bench " + exp +
                         " --steps 1 --warmup 0 --set run.threads=0 --set run.share_cores=true");
  auto unshared = run_kiln("bench " + exp + " --steps 1 --warmup 0 --set run.threads=0");
  // OMP_NUM_THREADS fixes the count as run.threads does: nothing is shared.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  auto pinned = [&] {
    testing::ScopedEnv omp("OMP_NUM_THREADS", std::to_string(cores).c_str());
    return run_kiln("bench " + exp + " --steps 1 --warmup 0 --set run.threads=0");
  }();
  ::kill(first, SIGKILL);
  ::waitpid(first, nullptr, 0);
  ASSERT_TRUE(registered) << testing::read_file(dir_ / "long.log");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const int share = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  EXPECT_NE(second.output.find(fmt::format("{} thread{};", share, share == 1 ? "" : "s")),
            std::string::npos)
      << second.output;
  ASSERT_EQ(unshared.exit_code, 0) << unshared.output;
  EXPECT_NE(unshared.output.find(fmt::format("{} thread{};", cores, cores == 1 ? "" : "s")),
            std::string::npos)
      << unshared.output;
  ASSERT_EQ(pinned.exit_code, 0) << pinned.output;
  EXPECT_NE(pinned.output.find(fmt::format("{} thread{};", cores, cores == 1 ? "" : "s")),
            std::string::npos)
      << pinned.output;
  // The killed run's entry is stale: the next count removes it.
  CoreShare counter(2);
  EXPECT_EQ(counter.processes(), 1);
}

TEST_F(Bench, AUsersWeakerKernelsAreKeptWithOneWarningLine) {
  const std::string better = warranted_kernels();
  if (better.empty()) GTEST_SKIP() << "SKIP: this CPU has no AVX: Prescott is its kernel set";
  testing::CommandResult result;
  {
    testing::ScopedEnv weak("OPENBLAS_CORETYPE", "Prescott");
    testing::ScopedEnv verbose("OPENBLAS_VERBOSE",
                               "2");  // OpenBLAS prints "Core: NAME" as it loads
    result = run_kiln("bench " + experiment() + " --steps 1 --warmup 0");
  }
  ASSERT_EQ(result.exit_code, 0) << result.output;
  if (result.output.find("BLAS: OpenBLAS") == std::string::npos) {
    GTEST_SKIP() << "SKIP: this LibTorch's BLAS is not OpenBLAS";
  }
  // Only an OpenBLAS built with DYNAMIC_ARCH reads OPENBLAS_CORETYPE (and says "Core:").
  if (lines_starting(result.output, "Core:").empty()) {
    GTEST_SKIP() << "SKIP: this OpenBLAS is not built with DYNAMIC_ARCH: it has one kernel set";
  }
  EXPECT_NE(result.output.find("(kernels Prescott, "), std::string::npos) << result.output;
  const auto warnings = lines_starting(result.output, "warning:");
  ASSERT_EQ(warnings.size(), 1u) << result.output;
  EXPECT_NE(result.output.find("as OPENBLAS_CORETYPE=Prescott asks: unset it, or run `export "
                               "OPENBLAS_CORETYPE=" +
                               better + "`"),
            std::string::npos)
      << result.output;
}

// A CPU OpenBLAS does not recognise, for real: QEMU's user-mode emulator with its "max" CPU (AVX2
// and FMA, an unknown model), on which OpenBLAS 0.3.21 falls back to its SSE kernels. QEMU runs
// an exec of /proc/self/exe, or of any program, natively, so only the first kiln process is
// emulated. `kiln_arguments` run so, with OpenBLAS saying "Core: NAME" each time it loads:
// returns the output and OpenBLAS's "Core:" lines, or why that cannot run here.
struct UnderQemu {
  std::string output;
  std::vector<std::string> cores;  // the kernels of each OpenBLAS load, in order
  std::string skip;                // non-empty: why not
};

UnderQemu run_under_qemu_max(const std::string& kiln_arguments, const std::string& log) {
  if (std::system("command -v qemu-x86_64 >/dev/null 2>&1") != 0) {
    return {"", {}, "SKIP: qemu-x86_64 (Debian's qemu-user) is not installed"};
  }
  // Kiln picks kernels from the emulated CPU (AVX2 and FMA), then runs natively: on a host
  // without them those kernels would stop it with SIGILL.
  const std::string host = warranted_kernels();
  if (host != "Haswell" && host != "SkylakeX") {
    return {"", {}, "SKIP: this CPU has no AVX2 and FMA, which QEMU's max CPU offers"};
  }
  const std::string command =
      fmt::format("QEMU_CPU=max OPENBLAS_VERBOSE=2 qemu-x86_64 '{}' {} >'{}' 2>&1", KILN_BINARY,
                  kiln_arguments, log);
  const int status = std::system(command.c_str());
  UnderQemu result{testing::read_file(log), {}, ""};
  if (status != 0 && result.output.find("Unable to reserve") != std::string::npos) {
    result.skip =
        "SKIP: QEMU cannot reserve its guest address space here (overcommit or "
        "ulimit -v): " +
        result.output.substr(0, result.output.find('\n'));
    return result;
  }
  EXPECT_EQ(status, 0) << result.output;
  // A rank's lines come prefixed by `kiln launch`: "[rank 0] Core: Haswell".
  const std::regex core_line(R"((?:^|\n)(?:\[rank \d+\] )?Core: (\S+))");
  for (std::sregex_iterator it(result.output.begin(), result.output.end(), core_line), end;
       it != end; ++it)
    result.cores.push_back((*it)[1]);
  const std::set<std::string> fitting = {"Haswell", "Zen", "SkylakeX"};
  if (!result.cores.empty() && fitting.count(result.cores[0]) > 0) {
    result.skip = "SKIP: OpenBLAS chose fitting kernels under QEMU here";
  }
  return result;
}

// Two OpenBLAS loads, the second with wider kernels than the first, and that second process's BLAS
// line saying kiln chose them over OpenBLAS's choice in the first: what OpenBLAS itself reports.
void expect_the_second_load_runs_kilns_choice(const UnderQemu& run) {
  ASSERT_EQ(run.cores.size(), 2u) << run.output;
  const std::string first = run.cores[0], second = run.cores[1];
  EXPECT_TRUE(second == "Haswell" || second == "SkylakeX") << run.output;
  EXPECT_NE(
      run.output.find("(kernels " + second + ", set by kiln over OpenBLAS's choice, " + first),
      std::string::npos)
      << run.output;
}

// Kiln must restart itself with wider kernels: the two loads are its two processes.
TEST_F(Bench, AGenericKernelFallbackIsReplacedByARestart) {
  const UnderQemu run = run_under_qemu_max(
      fmt::format("bench {} --steps 1 --warmup 0", experiment()), dir_ / "qemu.log");
  if (!run.skip.empty()) GTEST_SKIP() << run.skip;
  expect_the_second_load_runs_kilns_choice(run);
}

// A command that computes nothing itself does not load LibTorch a second time: `kiln launch`
// keeps OpenBLAS's first choice and restarts nowhere, and the rank it starts loads OpenBLAS once,
// with the kernels kiln chose, and says so. The two loads are the launcher's and the rank's.
TEST_F(Bench, OnlyACommandThatComputesRestartsAndTheKilnItStartsInheritsTheKernels) {
  const UnderQemu run = run_under_qemu_max(
      fmt::format("launch --nproc-per-node 1 --master-port {} -- bench {} --steps 1 --warmup 0",
                  testing::free_local_port(), experiment()),
      dir_ / "qemu.log");
  if (!run.skip.empty()) GTEST_SKIP() << run.skip;
  expect_the_second_load_runs_kilns_choice(run);
}

TEST_F(Bench, ARunsHeaderPrintsTheBlasLine) {
  auto result = run_kiln("run " + experiment() + " --set train.steps=2 --set eval.every=0");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(lines_starting(result.output, "BLAS:").size(), 1u) << result.output;
}

}  // namespace
}  // namespace kiln
