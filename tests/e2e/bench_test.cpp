// `kiln bench` on the tiny experiment: --record keeps what it printed, --against prints the
// ratio to it (checked here from the two printed numbers), and the line of what runs the CPU
// products says what oneDNN itself reports (ONEDNN_VERBOSE), under a cap of its instruction set
// too, and what the dynamic loader links (ldd): one OpenMP runtime, no second oneDNN.
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

// The kernel's flags for this CPU (/proc/cpuinfo), independent of Kiln's cpuid reading.
std::set<std::string> cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string word; words >> word;)
      flags.insert(word);
    break;
  }
  return flags;
}

// The implementations of the matmuls oneDNN ran, as ONEDNN_VERBOSE=1 prints them:
// "brg_matmul:avx10_1_512_amx" from "onednn_verbose,v1,primitive,exec,cpu,matmul,IMPL,...".
std::vector<std::string> onednn_matmuls(const std::string& output) {
  std::vector<std::string> found;
  const std::regex exec(R"(onednn_verbose,[^,\n]*,primitive,exec,cpu,matmul,([^,\n]+),)");
  for (std::sregex_iterator it(output.begin(), output.end(), exec), end; it != end; ++it)
    found.push_back((*it)[1]);
  return found;
}

// `kiln bench` of the tiny experiment under precision bf16 with oneDNN's verbose log on, and
// ONEDNN_MAX_CPU_ISA set to `cap` where given.
testing::CommandResult bench_bf16_verbose(const std::string& experiment, const char* cap) {
  testing::ScopedEnv verbose("ONEDNN_VERBOSE", "1");
  testing::ScopedEnv capped("ONEDNN_MAX_CPU_ISA", cap);
  return run_kiln("bench " + experiment + " --steps 1 --warmup 0 --set precision.type=bf16");
}

// Where the CPU has AMX's bf16 tiles, bf16 products reach them: every matmul oneDNN reports
// names an AMX kernel, and the line says so; elsewhere none does and the line does not.
TEST_F(Bench, Bf16ProductsRunOnTheAmxKernelsOneDnnReportsWhereTheCpuHasThem) {
  const auto result = bench_bf16_verbose(experiment(), nullptr);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const bool amx = cpu_flags().count("amx_bf16") == 1;
  const auto matmuls = onednn_matmuls(result.output);
  if (amx) {
    ASSERT_FALSE(matmuls.empty()) << result.output;
  }
  for (const std::string& impl : matmuls)
    EXPECT_EQ(impl.find("amx") != std::string::npos, amx) << impl;
  EXPECT_EQ(result.output.find("; on AMX)") != std::string::npos, amx) << result.output;
}

// With oneDNN capped at SSE4.1, which every x86-64 CPU this runs on has, no product runs above
// the cap, whatever the CPU: no AVX2, AVX-512 or AMX kernel, and the line claims none; the
// step still trains.
TEST_F(Bench, ACapOnOneDnnsInstructionSetHoldsOnAnyX86Cpu) {
  const auto result = bench_bf16_verbose(experiment(), "SSE41");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const std::string& impl : onednn_matmuls(result.output)) {
    EXPECT_EQ(impl.find("avx"), std::string::npos) << impl;
    EXPECT_EQ(impl.find("amx"), std::string::npos) << impl;
  }
  EXPECT_EQ(result.output.find("; on AMX)"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("; on AVX512-BF16)"), std::string::npos) << result.output;
  EXPECT_EQ(lines_starting(result.output, "tokens/s").size(), 1u) << result.output;
}

// What the dynamic loader links into kiln (ldd's word, not Kiln's): one OpenMP runtime, the very
// libgomp beside LibTorch's libtorch_cpu, and no oneDNN library (LibTorch's is built in); the line
// names that runtime.
TEST_F(Bench, TheBinaryLinksOneOpenMpRuntimeLibTorchsOwnAndNoSecondOneDnn) {
  const auto linked = testing::run_shell(std::string("ldd '") + KILN_BINARY + "'");
  ASSERT_EQ(linked.exit_code, 0) << linked.output;
  std::vector<std::string> openmp, onednn;
  std::string torch_dir;
  std::istringstream lines(linked.output);
  const std::regex library(R"(^\s*(\S+) => (\S+))");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, library)) continue;
    const std::string name = m[1], path = m[2];
    if (std::regex_match(name, std::regex(R"(lib(gomp|iomp5|omp)[-.].*)"))) openmp.push_back(path);
    if (std::regex_match(name, std::regex(R"(lib(dnnl|mkldnn|onednn).*)"))) onednn.push_back(path);
    if (name == "libtorch_cpu.so") torch_dir = std::filesystem::path(path).parent_path();
  }
  ASSERT_FALSE(torch_dir.empty()) << linked.output;
  ASSERT_EQ(openmp.size(), 1u) << linked.output;
  if (std::filesystem::exists(torch_dir + "/libgomp.so.1")) {
    EXPECT_EQ(std::filesystem::path(openmp[0]).parent_path(), torch_dir) << linked.output;
  }
  EXPECT_TRUE(onednn.empty()) << linked.output;
  auto result = run_kiln("bench " + experiment() + " --steps 1 --warmup 0");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(
      result.output.find("; OpenMP " + std::filesystem::path(openmp[0]).filename().string() + ", "),
      std::string::npos)
      << result.output;
}

// The header names the malloc the binary runs on: jemalloc where the dynamic loader links it in
// (ldd's word, not Kiln's; core/util/freed_memory.h), the C library's otherwise.
TEST_F(Bench, TheCpuLineNamesTheMallocTheBinaryLoads) {
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

TEST_F(Bench, ARunsHeaderPrintsTheCpuLine) {
  auto result = run_kiln("run " + experiment() + " --set train.steps=2 --set eval.every=0");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(lines_starting(result.output, "CPU").size(), 1u) << result.output;
}

}  // namespace
}  // namespace kiln
