// `kiln run`: a resolved config becomes an assembled run, a row in the run store and a trained
// model. The run row is created only after assembly succeeded, and is always closed: completed,
// failed (with the error) or interrupted.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"

namespace kiln {

struct RunSummary {
  int64_t run_id = 0;
  std::string name;
  std::string status;  // completed | interrupted
  int64_t steps_done = 0;
  double final_loss = 0;
};

RunSummary run_experiment(ResolvedConfig config);

// Set by SIGINT/SIGTERM: the run stops after the current step. A second signal kills at once.
void install_stop_handlers();
bool stop_requested();

}  // namespace kiln
