#include "core/distributed/world_env.h"

#include <fmt/format.h>

#include "core/util/env.h"
#include "core/util/error.h"
#include "core/util/process.h"

namespace kiln {

namespace {

constexpr int64_t kMostRanks = 1 << 20;

// A rank count or index from the environment (set, checked by the caller).
int env_rank(const char* name, int64_t min) {
  return static_cast<int>(env_integer(name, 0, min, kMostRanks));
}

}  // namespace

std::optional<std::string> slurm_node_address(const std::string& node) {
  ProcessOptions options;
  options.program = "scontrol";
  options.argv = {"scontrol", "show", "node", node};
  CapturedRun shown;
  try {
    shown = run_captured(options);
  } catch (const ProcessStartError&) {
    return std::nullopt;
  }
  const std::string key = "NodeAddr=";
  const size_t at = shown.code == 0 ? shown.output.find(key) : std::string::npos;
  if (at == std::string::npos) return std::nullopt;
  const size_t start = at + key.size();
  const std::string address =
      shown.output.substr(start, shown.output.find_first_of(" \n", start) - start);
  if (address.empty()) return std::nullopt;
  return address;
}

WorldEnv read_world_env() {
  WorldEnv w;
  const char* rank_name = "RANK";
  const char* size_name = "WORLD_SIZE";
  const char* local_name = "LOCAL_RANK";
  if (!env_text("RANK") && !env_text("WORLD_SIZE") && env_text("SLURM_PROCID")) {
    rank_name = "SLURM_PROCID";  // srun without torchrun
    size_name = "SLURM_NTASKS";
    local_name = "SLURM_LOCALID";
  }
  const bool rank = env_text(rank_name).has_value();
  const bool size = env_text(size_name).has_value();
  if (!rank && !size) return w;
  if (!rank || !size) {
    throw UserError(
        fmt::format("{} is set but {} is not: launch with torchrun, kiln launch or "
                    "srun, which set both (and MASTER_ADDR, MASTER_PORT)",
                    rank ? rank_name : size_name, rank ? size_name : rank_name));
  }
  w.rank = env_rank(rank_name, 0);
  w.world_size = env_rank(size_name, 1);
  w.local_rank = env_text(local_name) ? env_rank(local_name, 0) : w.rank;
  if (w.world_size < 1 || w.rank < 0 || w.rank >= w.world_size) {
    throw UserError(
        fmt::format("{}={} does not fit {}={}", rank_name, w.rank, size_name, w.world_size));
  }
  // A rank's index on its machine counts the ranks there before it, so it is at most its index
  // in the world; a node's index is below the node count. A launcher that sets otherwise was
  // given another job's environment.
  if (w.local_rank > w.rank) {
    throw UserError(fmt::format(
        "{}={} is above {}={}: a rank's index on its node cannot pass its index in the world; "
        "launch with torchrun, kiln launch or srun, which set both",
        local_name, w.local_rank, rank_name, w.rank));
  }
  if (env_text("SLURM_NODEID") && env_text("SLURM_NNODES") &&
      env_rank("SLURM_NODEID", 0) >= env_rank("SLURM_NNODES", 1)) {
    throw UserError(fmt::format(
        "SLURM_NODEID={} does not fit SLURM_NNODES={}: this environment is not one Slurm job's "
        "(run under srun in the job, not with another job's variables)",
        env_rank("SLURM_NODEID", 0), env_rank("SLURM_NNODES", 1)));
  }
  if (w.world_size > 1) {
    const std::optional<std::string> addr = env_text("MASTER_ADDR");
    const bool port = env_text("MASTER_PORT").has_value();
    if (!addr || !port) {
      throw UserError(
          fmt::format("a world of {} needs MASTER_ADDR and MASTER_PORT (the address "
                      "of rank 0's rendezvous): {} missing",
                      w.world_size, addr ? "MASTER_PORT" : "MASTER_ADDR"));
    }
    w.master_addr = *addr;
    w.master_port = static_cast<int>(env_integer("MASTER_PORT", 0, 1, 65535));
    const std::optional<std::string> node = env_text("SLURMD_NODENAME");
    if (node && !env_text("GLOO_SOCKET_IFNAME")) {
      w.bind_address = slurm_node_address(*node).value_or("");
    }
  }
  return w;
}

}  // namespace kiln
