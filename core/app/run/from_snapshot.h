// Commands that work on a finished or stopped run's snapshots: `kiln eval`, `kiln sample`,
// `kiln export` (core/app/run/model_export.h). Each rebuilds the run from the config stored in the
// run store, loads the chosen snapshot's weights and leaves the snapshot itself untouched.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config/schema.h"
#include "core/train/task_scoring.h"

namespace kiln {

struct SnapshotRequest {
  std::string db = default_run_db();
  std::string run;  // name or id
  std::string
      hf;  // instead of a run: a Hugging Face model directory (core/app/run/hf_checkpoint.h)
  std::string checkpoint = "latest";  // latest | best | a step number
  // CPU threads (--threads, as `--set run.threads=N`); 0 = the run's run.threads, and for `hf`
  // run.threads's default.
  int64_t threads = 0;
  std::function<void(const std::string&)> note;  // progress and warnings, one line each
};

struct EvalReport {
  std::string run, checkpoint, split;
  int64_t step = 0;
  int64_t batches = 0;
  int64_t tokens = 0;
  int64_t counted_tokens = 0;  // data whose loss counts only some tokens: how many; else 0
  double loss = 0;
  double perplexity = 0;
  double seconds = 0;  // the evaluation itself, without loading the snapshot
};

struct EvalOn {
  std::string split = "val";  // the run's own split: val, test or train
  // Instead of a split: a path or glob of files in the run's data format (token shards for
  // data "shards"), relative to the current directory; recorded under its absolute form.
  std::string data;
  int64_t batches = 0;  // micro-batches to read; 0 = one pass over the files
  // Where to write the logits of the first micro-batch read, float32 [micro_batch, seq_len,
  // vocab] as a NumPy .npy file (the model's padding columns left out), for a comparison with
  // another library's; empty = none.
  std::string logits;
};

// Mean loss over the micro-batches `on` names, recorded in evals (split = the split's name,
// or the absolute path or glob of --data).
EvalReport evaluate_snapshot(const SnapshotRequest& request, const EvalOn& on);

// `kiln eval --task`: evaluation tasks scored on a snapshot (core/train/task_scoring.h).
struct TaskEvalOn {
  // A task file, or a glob of them, or the name of a task of the run's eval.tasks.
  std::string task;
  // Where to write each request's token ids, log-likelihoods and generations (JSON Lines), for
  // a comparison with another library's scoring; empty = none.
  std::string details;
  int64_t batch = 0;  // requests per forward pass; 0 = the run's eval.task_batch
};

struct TaskReport {
  std::string run, checkpoint;
  int64_t step = 0;
  std::vector<TaskResult> results;
  double seconds = 0;  // scoring, all tasks
};

// The tasks' scores, recorded in task_scores under the snapshot's label; of request.hf's
// directory when it is set (evaluate_hf_tasks).
TaskReport evaluate_tasks(const SnapshotRequest& request, const TaskEvalOn& on);

// What --details writes: per request, its token ids, log-likelihoods or generation.
std::string details_lines(const std::vector<TaskResult>& results);

}  // namespace kiln
