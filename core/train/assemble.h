// Assembly: a resolved config becomes a runnable set of parts, each built by the plugin the
// config names. Everything that can be checked before training starts is checked here, so a
// mistake surfaces before a run row or a snapshot exists.
#pragma once

#include <memory>

#include <torch/types.h>

#include "core/api/data_source.h"
#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/api/parallel.h"
#include "core/api/precision.h"
#include "core/api/schedule.h"
#include "core/config/config.h"
#include "core/config/options.h"

namespace kiln {

struct AssembledRun {
  ResolvedConfig config;
  RunOptions options;  // [run]
  TrainOptions train;
  EvalOptions eval;
  CheckpointOptions checkpoint;
  torch::Device device{torch::kCPU};
  int64_t grad_accum = 1;    // micro-steps per optimizer step on each rank
  int64_t batch_tokens = 0;  // tokens per optimizer step over all ranks

  std::shared_ptr<ParallelStrategy> parallel;
  std::shared_ptr<Model> model;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  std::shared_ptr<Schedule> schedule;
  std::shared_ptr<PrecisionPolicy> precision;
  std::shared_ptr<DataSource> train_data;
  std::shared_ptr<DataSource> val_data;   // null when the data plugin has no validation split
  std::shared_ptr<DataSource> test_data;  // null without a test split or eval.final_test
};

AssembledRun assemble(const ResolvedConfig& config);

// A data source for `split` ("train", "val", "test") with the run's geometry; null when the data
// has no such split.
std::shared_ptr<DataSource> open_split(const AssembledRun& run, const std::string& split);

// The CPU threads and seed of a run, applied before anything random happens.
void apply_runtime_settings(const RunOptions& run);

}  // namespace kiln
