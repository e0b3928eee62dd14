// The lines a run starts with (its name, folder, model, threads, BLAS, precision, data, batch),
// and what it records of the environment its config left to the machine (the thread count,
// precision "auto"'s choice: core/store/runs/run_environment.h). Apart from the session, whose
// loop they are not part of.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/store/runs/run_environment.h"
#include "core/train/assemble.h"

namespace kiln {

struct HeaderFacts {
  std::string name;
  int64_t run_id = 0;
  std::string store;   // the run store's path or URL
  std::string folder;  // the run's folder
  int64_t start_step = 0;
  int64_t tokens_seen = 0;
};

// The header's lines, in order.
std::vector<std::string> header_lines(const AssembledRun& run, const HeaderFacts& facts);

// "threads": LibTorch's CPU threads now; "precision": the policy's choice (auto's) or its type.
RunEnvironment run_environment(const AssembledRun& run);

}  // namespace kiln
