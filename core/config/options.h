// Typed views of the core config sections ([run], [train], [eval], [checkpoint], [metrics]), so
// the trainer reads fields instead of looking keys up by string.
#pragma once

#include <cstdint>
#include <string>

#include "core/config/config.h"

namespace kiln {

struct RunOptions {
  std::string name;
  int64_t seed = 0;
  std::string out_dir;
  std::string db;
  std::string sweep;
  int64_t threads = 0;
  std::string device;
  bool share_cores = false;  // threads follow the Kiln processes on this machine (core_share.h)
};

struct TrainOptions {
  int64_t steps = 0;
  int64_t micro_batch = 0;
  int64_t seq_len = 0;
  int64_t batch_tokens = 0;  // 0 = micro_batch x seq_len x world_size
  double grad_clip = 0;
  int64_t log_every = 1;
  bool abort_on_nonfinite = true;  // train.on_nonfinite: "abort" or "skip"
  bool cuda_graphs = false;        // replay each micro-step as a captured CUDA graph
  std::string pinned_batches;      // "auto" (on CUDA), "on", "off"

  // Micro-steps per optimizer step on each rank; a UserError when batch_tokens does not divide.
  int64_t grad_accum(int world_size, const ResolvedConfig& config) const;
};

struct EvalOptions {
  int64_t every = 0;
  int64_t steps = 0;
  bool final_test = true;
  std::string tasks;  // the task files' path or glob, absolute; "" = none
  int64_t task_every = 0;
  int64_t task_batch = 16;
};

struct CheckpointOptions {
  int64_t every = 0;
  int64_t keep = 0;
  bool async = false;  // written by a background thread (core/checkpoint/background_save.h)
};

struct MetricsOptions {
  std::string tensorboard;  // a folder for TensorBoard event files; empty = none
};

RunOptions run_options(const ResolvedConfig& config);
TrainOptions train_options(const ResolvedConfig& config);
EvalOptions eval_options(const ResolvedConfig& config);
CheckpointOptions checkpoint_options(const ResolvedConfig& config);
MetricsOptions metrics_options(const ResolvedConfig& config);

}  // namespace kiln
