// How a training session (core/train/session.h) ended, in a header without LibTorch so that the
// commands that start one (core/app/run/run_command.h, tools/kiln) stay light.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

// A session that fails throws instead, after closing the run's row as failed.
struct SessionOutcome {
  int64_t run_id = 0;
  std::string name;
  std::string status;      // completed | interrupted | paused (the store says interrupted)
  int64_t steps_done = 0;  // of the run, earlier sessions' included
  double final_loss = 0;   // the last step's loss; 0 when this session took no step
};

}  // namespace kiln
