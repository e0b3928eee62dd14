// `kiln bench --record` and `--against` without a benchmark: results written here go through the
// run store's table (core/store/runs/speed_records.h) and come back field for field, and the
// comparison's ratios are the ones computed here from the values put in.
#include "core/app/speed/compare.h"

#include <gtest/gtest.h>

#include <sstream>

#include "core/store/runs/writer.h"
#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::query;
using testing::TempDir;

BenchRecord result(const std::string& label, double tokens_per_sec, double step_ms) {
  BenchRecord r;
  r.label = label;
  r.git_commit = "d5013db0123456789abcdef0123456789abcdef0";
  r.experiment = "experiments/kjv_char.toml";
  r.config_hash = "3f2a9c1e55aa";
  r.machine = {"AMD EPYC", 2, "avx2 fma avx512f avx512_bf16", "cpu", 2};
  r.blas = "BLAS: OpenBLAS 0.3.21 (kernels Cooperlake, 2 threads; CPU: AMD EPYC, avx2 fma)";
  r.steps = 20;
  r.warmup = 5;
  r.tokens_per_sec = tokens_per_sec;
  r.ms = {0.25, 40, 70, 0.5, 2.5, 0.05, step_ms};
  r.achieved_flops = 85e9;
  r.hardware_peak_flops = 236e9;
  r.measured_peak_flops = 185e9;
  r.mfu = 85.0 / 236;
  r.mfu_of_measured_peak = 85.0 / 185;
  r.peak_memory_mb = 256;
  return r;
}

// The cells of the comparison table's row `name`.
std::vector<std::string> table_row(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "  ", 0) != 0) continue;
    std::istringstream words(line.substr(name.size()));
    std::vector<std::string> cells;
    for (std::string word; words >> word;)
      cells.push_back(word);
    return cells;
  }
  return {};
}

class BenchRecords : public ::testing::Test {
 protected:
  TempDir dir_;
  RunStore store_{dir_ / "kiln.db"};
  Connection& db() { return store_.connection(); }
};

TEST_F(BenchRecords, ARecordComesBackFieldForField) {
  BenchRecord put = result("baseline", 16496, 124.151);
  put.hardware_peak_flops.reset();  // a GPU: no hardware peak known
  put.mfu.reset();
  put.parameters = 37280;  // a mixture of experts: a token uses two thirds of them
  put.active_parameters = 24992;
  insert_bench_record(db(), put);
  const auto got = find_bench_record(db(), "baseline");
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->recorded_at.empty());
  EXPECT_EQ(got->git_commit, put.git_commit);
  EXPECT_EQ(got->config_hash, put.config_hash);
  EXPECT_EQ(got->machine.cpu_features, put.machine.cpu_features);
  EXPECT_EQ(got->machine.threads, 2);
  EXPECT_EQ(got->blas, put.blas);
  EXPECT_EQ(got->tokens_per_sec, 16496);
  EXPECT_EQ(got->ms.step, 124.151);
  EXPECT_EQ(got->ms.forward, 40);
  EXPECT_EQ(got->ms.logging, 0.05);
  EXPECT_EQ(got->hardware_peak_flops, std::nullopt);
  EXPECT_EQ(got->mfu, std::nullopt);
  EXPECT_EQ(got->mfu_of_measured_peak, 85.0 / 185);
  EXPECT_EQ(got->peak_memory_mb, 256);
  EXPECT_EQ(got->parameters, 37280);
  EXPECT_EQ(got->active_parameters, 24992);
  // The SQL columns a user queries hold the same.
  EXPECT_EQ(query(store_.path(),
                  "select label, step_ms, forward_ms, cpus, parameters, active_parameters from "
                  "bench_results")[0],
            (std::vector<std::string>{"baseline", "124.151", "40.0", "2", "37280.0", "24992.0"}));
  EXPECT_EQ(find_bench_record(db(), "other"), std::nullopt);
}

TEST_F(BenchRecords, ALabelIsNeverReplaced) {
  insert_bench_record(db(), result("baseline", 1000, 10));
  try {
    insert_bench_record(db(), result("baseline", 2000, 5));
    FAIL() << "a second 'baseline' was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("already in"), std::string::npos) << e.what();
  }
  EXPECT_EQ(find_bench_record(db(), "baseline")->tokens_per_sec, 1000);
}

TEST(BenchLabels, AreShortPlainWordsAndDefaultToCommitAndConfigHash) {
  for (const std::string& bad : std::vector<std::string>{
           "", "a b", "../x", "-x", ".hidden", "tab\t", "é", "a;b", std::string(65, 'a')}) {
    EXPECT_THROW(check_bench_label(bad), UserError) << bad;
  }
  for (const std::string& good :
       std::vector<std::string>{"baseline", "v1.2_fused-adamw", std::string(64, 'a')})
    EXPECT_NO_THROW(check_bench_label(good)) << good;
  EXPECT_EQ(resolve_bench_label(kDefaultBenchLabel, "d5013db0123", "3f2a9c1e55aa"),
            "d5013db-3f2a9c1e");
  EXPECT_EQ(resolve_bench_label(kDefaultBenchLabel, "", "3f2a9c1e55aa"), "3f2a9c1e");
  EXPECT_EQ(resolve_bench_label("mine", "d5013db0123", "3f2a9c1e55aa"), "mine");
  EXPECT_THROW(resolve_bench_label("not mine", "d5013db0123", "3f2a9c1e55aa"), UserError);
}

TEST_F(BenchRecords, AnUnknownLabelNamesTheKnownOnes) {
  try {
    require_bench_baseline(db(), "baseline", result("", 1, 1), false);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("none is recorded there yet"), std::string::npos);
  }
  insert_bench_record(db(), result("baseline", 1000, 10));
  insert_bench_record(db(), result("fused", 1000, 10));
  try {
    require_bench_baseline(db(), "baselin", result("", 1, 1), false);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'baseline'? recorded labels: baseline, "
                                         "fused"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(BenchRecords, AnotherMachineOrConfigIsRefusedSayingWhatDiffersUnlessAllowed) {
  insert_bench_record(db(), result("baseline", 1000, 10));
  BenchRecord here = result("", 1000, 10);
  EXPECT_EQ(require_bench_baseline(db(), "baseline", here, false).tokens_per_sec, 1000);
  here.machine.cpu_model = "Intel(R) Xeon(R) Processor";
  here.config_hash = "77777777";
  try {
    require_bench_baseline(db(), "baseline", here, false);
    FAIL();
  } catch (const UserError& e) {
    const std::string line = e.what();
    EXPECT_NE(line.find("CPU 'AMD EPYC' recorded, 'Intel(R) Xeon(R) Processor' here"),
              std::string::npos)
        << line;
    EXPECT_NE(line.find("config hash '3f2a9c1e55aa' recorded, '77777777' here"), std::string::npos)
        << line;
    EXPECT_NE(line.find("--allow-mismatch"), std::string::npos) << line;
    EXPECT_EQ(line.find("CPU count"), std::string::npos) << line;  // the same: not named
  }
  EXPECT_NO_THROW(require_bench_baseline(db(), "baseline", here, true));
  EXPECT_EQ(bench_mismatches(result("a", 1, 1), result("b", 2, 2)).size(), 0u);
}

TEST_F(BenchRecords, TheComparisonIsThisRunOverTheRecordedOne) {
  insert_bench_record(db(), result("baseline", 1000, 10));
  BenchRecord now = result("", 1500, 8);
  now.ms.forward = 30;
  now.mfu = 0.5;
  const std::string text = format_bench_comparison(*find_bench_record(db(), "baseline"), now);
  EXPECT_EQ(table_row(text, "tokens/s"), (std::vector<std::string>{"1500", "1000", "1.500"}))
      << text;
  EXPECT_EQ(table_row(text, "step ms"), (std::vector<std::string>{"8.000", "10.000", "0.800"}))
      << text;
  EXPECT_EQ(table_row(text, "  forward"), (std::vector<std::string>{"30.000", "40.000", "0.750"}))
      << text;
  EXPECT_EQ(table_row(text, "MFU %"), (std::vector<std::string>{"50.0", "36.0", "1.388"})) << text;
  EXPECT_EQ(text.rfind("against 'baseline' (recorded ", 0), 0u) << text;
  EXPECT_NE(text.find("at commit d5013db; BLAS: OpenBLAS 0.3.21"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
