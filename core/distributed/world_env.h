// Who this process is in a world of ranks: torchrun's environment (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID),
// checked for a set that cannot be one launch's.
#pragma once

#include <optional>
#include <string>

namespace kiln {

struct WorldEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Where this rank's Gloo connections listen: under srun, its Slurm node's NodeAddr (the address
  // Slurm reaches it at; a cluster's host names may resolve to another network or to nothing);
  // empty: Gloo's own choice (GLOO_SOCKET_IFNAME's interface, else the host name's address).
  std::string bind_address;
};

// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (torchrun), or SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID; a UserError naming what is missing when only part is set, or
// what cannot hold together (a local index above the global one, SLURM_NODEID past
// SLURM_NNODES). No variables at all means a world of one.
// Under srun (SLURMD_NODENAME set, GLOO_SOCKET_IFNAME not), bind_address is that node's NodeAddr.
WorldEnv read_world_env();

// Slurm node `node`'s NodeAddr as `scontrol show node` gives it; nullopt when scontrol is missing
// or does not say.
std::optional<std::string> slurm_node_address(const std::string& node);

}  // namespace kiln
