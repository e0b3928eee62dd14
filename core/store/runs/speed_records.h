// `kiln bench --record`: benchmark results kept in the run store (table bench_results, one row
// per label), so that `kiln bench --against LABEL` can put a later measurement beside one. They
// are not runs: no metrics rows, no folder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/store/db/connection.h"

namespace kiln {

// What a result was measured on: two results compare only when all of it is the same.
struct BenchMachine {
  std::string cpu_model;     // the brand string; "" when unknown
  int64_t cpus = 0;          // logical CPUs this process may use
  std::string cpu_features;  // core/kernels/cpu_features.h feature_summary
  std::string device;        // "cpu", "cuda:0"
  int64_t threads = 0;       // LibTorch's CPU threads
};

// Milliseconds per optimizer step, in total and by phase.
struct BenchPhases {
  double data = 0, forward = 0, backward = 0, communication = 0, optimizer = 0, logging = 0;
  double step = 0;
};

struct BenchRecord {
  std::string label;
  std::string recorded_at;  // ISO-8601 UTC, set by the store
  std::string git_commit;   // "" when the build did not know it
  std::string experiment;
  std::string config_hash;
  BenchMachine machine;
  std::string blas;  // what ran the CPU products (core/kernels/cpu_runtime.h)
  int64_t steps = 0, warmup = 0;
  double tokens_per_sec = 0;
  BenchPhases ms;
  double achieved_flops = 0;                  // model FLOP/s
  std::optional<double> hardware_peak_flops;  // none where Kiln knows no peak (a GPU)
  double measured_peak_flops = 0;             // the best large matmul
  std::optional<double> mfu;                  // achieved / hardware peak
  double mfu_of_measured_peak = 0;            // achieved / measured peak
  double peak_memory_mb = 0;
  // The model's parameters, and those a token uses (a mixture of experts' top k, not all of
  // them); none in a record from before they were kept.
  std::optional<double> parameters, active_parameters;
};

// A label is 1 to 64 letters, digits, '.', '_' and '-', not starting with '-' or '.': it goes
// on command lines and into messages unquoted. A UserError naming the rule otherwise.
void check_bench_label(const std::string& label);

// A UserError when `label` is taken: results are never replaced.
void require_free_bench_label(Connection& db, const std::string& label);
// require_free_bench_label, then the row.
void insert_bench_record(Connection& db, const BenchRecord& record);
std::optional<BenchRecord> find_bench_record(Connection& db, const std::string& label);
// Every label, oldest first.
std::vector<std::string> bench_labels(Connection& db);

}  // namespace kiln
