// Commands that work on a finished or stopped run's snapshots: `kiln eval`, `kiln sample`,
// `kiln export`. Each rebuilds the run from the config stored in the run store, loads the
// chosen snapshot's weights and leaves the snapshot itself untouched.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace kiln {

struct SnapshotRequest {
  std::string db = "runs/kiln.db";
  std::string run;                               // name or id
  std::string checkpoint = "latest";             // latest | best | a step number
  std::function<void(const std::string&)> note;  // progress and warnings, one line each
};

struct EvalReport {
  std::string run, checkpoint, split;
  int64_t step = 0;
  int64_t batches = 0;
  int64_t tokens = 0;
  double loss = 0;
  double perplexity = 0;
};

// Mean loss over `batches` micro-batches of the split (0 = the whole split), recorded in evals.
EvalReport evaluate_snapshot(const SnapshotRequest& request, const std::string& split,
                             int64_t batches);

struct SampleOptions {
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 1.0;  // 0 = always the most likely token
  int64_t top_k = 0;         // 0 = no cut
  int64_t seed = 1337;
};

// The prompt followed by the generated text.
std::string sample_snapshot(const SnapshotRequest& request, const SampleOptions& options);

// Writes the model's weights in its interchange format (safetensors); returns the tensor count.
int64_t export_snapshot(const SnapshotRequest& request, const std::string& out_path);

}  // namespace kiln
