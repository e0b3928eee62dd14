#include "tools/kiln/slurm_options.h"

#include <optional>
#include <string>
#include <utility>

#include "core/util/env.h"

namespace kiln {

namespace {

const char* const kGroup = "Slurm (with --launcher slurm)";

// "N" or "MIN-MAX", 1 <= MIN <= MAX <= 100000, as (MIN, MAX); nullopt otherwise.
std::optional<std::pair<int, int>> node_range(const std::string& text) {
  const size_t dash = text.find('-');
  const auto fewest = parse_integer(text.substr(0, dash), 1, 100000);
  const auto most =
      dash == std::string::npos ? fewest : parse_integer(text.substr(dash + 1), 1, 100000);
  if (!fewest || !most || *most < *fewest) return std::nullopt;
  return std::make_pair(static_cast<int>(*fewest), static_cast<int>(*most));
}

}  // namespace

void add_slurm_options(CLI::App& command, SlurmOptions& slurm, bool array) {
  const std::string each = array ? "each member's" : "the run's";
  command.add_option("--partition", slurm.partition, "the partition " + each + " task runs in")
      ->group(kGroup);
  command.add_option("--time", slurm.time, each + " time limit, as sbatch's --time")->group(kGroup);
  const CLI::Validator node_count(
      [](std::string& text) -> std::string {
        return node_range(text) ? "" : text + " is not a node count N or a range MIN-MAX";
      },
      "N or MIN-MAX");
  command
      .add_option_function<std::string>(
          "--nodes",
          [&slurm](const std::string& text) {
            const auto [fewest, most] = *node_range(text);
            slurm.nodes = most;
            slurm.min_nodes = fewest < most ? fewest : 0;
          },
          std::string(array ? "nodes per member" : "nodes") +
              " (default 1); MIN-MAX: one that loses nodes resumes at once on those left, "
              "down to MIN")
      ->check(node_count)
      ->group(kGroup);
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
