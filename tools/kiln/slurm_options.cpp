#include "tools/kiln/slurm_options.h"

namespace kiln {

namespace {

const char* const kGroup = "Slurm (with --launcher slurm)";

}  // namespace

void add_slurm_options(CLI::App& command, SlurmOptions& slurm, bool array) {
  const std::string each = array ? "each member's" : "the run's";
  command.add_option("--partition", slurm.partition, "the partition " + each + " task runs in")
      ->group(kGroup);
  command.add_option("--time", slurm.time, each + " time limit, as sbatch's --time")->group(kGroup);
  command.add_option("--nodes", slurm.nodes, array ? "nodes per member" : "nodes")
      ->check(CLI::Range(1, 100000))
      ->group(kGroup)
      ->capture_default_str();
  command
      .add_option("--ntasks-per-node", slurm.ntasks_per_node,
                  "ranks per node (default: one per GPU, else 1)")
      ->check(CLI::Range(1, 100000))
      ->group(kGroup);
  command.add_option("--gpus-per-node", slurm.gpus_per_node, "GPUs per node, one rank each")
      ->group(kGroup);
  command.add_option("--cpus-per-task", slurm.cpus_per_task, "CPU cores per rank (run.threads)")
      ->check(CLI::Range(1, 100000))
      ->group(kGroup)
      ->capture_default_str();
  if (array) {
    command.add_option("--max-parallel", slurm.max_parallel, "members running at once (array %K)")
        ->check(CLI::Range(0, 100000))
        ->group(kGroup);
  }
  command
      .add_option("--signal-seconds", slurm.signal_seconds,
                  "seconds before the time limit at which a run snapshots and requeues")
      ->group(kGroup)
      ->capture_default_str();
  command.add_option("--sbatch-arg", slurm.sbatch_args, "an sbatch option, e.g. --account=A")
      ->group(kGroup)
      ->allow_extra_args(false);
}

bool slurm_options_given(const CLI::App& command) {
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_group() == kGroup && option->count() > 0) return true;
  }
  return false;
}

}  // namespace kiln
