// Who this process is in a world of ranks: torchrun's environment (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID),
// checked for a set that cannot be one launch's.
#pragma once

#include <string>

namespace kiln {

struct WorldEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (torchrun), or SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID; a UserError naming what is missing when only part is set, or
// what cannot hold together (a local index above the global one, SLURM_NODEID past
// SLURM_NNODES). No variables at all means a world of one.
WorldEnv read_world_env();

}  // namespace kiln
