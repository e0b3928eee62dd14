// `kiln run` and `kiln resume`: a resolved config becomes an assembled run, a row in the run
// store, snapshots and a trained model. The run row is created only after assembly succeeded,
// and is always closed: completed, failed (with the error) or interrupted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace kiln {

struct RunSummary {
  int64_t run_id = 0;
  std::string name;
  std::string status;  // completed | interrupted
  int64_t steps_done = 0;
  double final_loss = 0;
};

// `restart`: a run of the same name is deleted (rows and snapshots) and started afresh;
// otherwise an existing name is refused (with a hint to resume an unfinished run).
RunSummary run_experiment(ResolvedConfig config, bool restart);

// Continues a run from its latest intact snapshot to its configured steps. `overrides` may
// change only keys that leave the model, data and optimisation unchanged (steps, eval and
// checkpoint frequency, threads); anything else is refused with the list of keys.
RunSummary resume_run(const std::string& db, const std::string& name_or_id,
                      const std::vector<std::string>& overrides);

// Set by SIGINT/SIGTERM: the run stops after the current step and snapshots. A second signal
// ends the process at once.
void install_stop_handlers();
bool stop_requested();

}  // namespace kiln
