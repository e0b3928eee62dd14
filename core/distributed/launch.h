// `kiln launch`: torchrun without Python. Starts nproc_per_node copies of a kiln command with
// the environment a rank expects (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, TORCHELASTIC_RESTART_COUNT), streams each one's output prefixed with its rank,
// and when a worker dies stops the others and starts them all again (up to max_restarts): a
// restarted `kiln run` continues its run from the latest snapshot.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace kiln {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int max_restarts = 0;
};

// Returns the exit code: 0 when every worker of the last attempt succeeded, else the first
// failing worker's code.
int launch(const LaunchOptions& options, const std::vector<std::string>& command,
           const std::function<void(const std::string&)>& print);

}  // namespace kiln
