#include "tools/kiln/launch_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/distributed/launch.h"

namespace kiln {

namespace {

struct LaunchArgs {
  LaunchOptions options;
  std::vector<std::string> command;
};

}  // namespace

ChosenCommand add_launch_command(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* launcher = app.add_subcommand(
      "launch", "start a kiln command on N ranks, torchrun-style, restarting them on failure");
  LaunchOptions& options = args->options;
  launcher->add_option("--nproc-per-node", options.nproc_per_node, "ranks on this node")
      ->capture_default_str();
  launcher->add_option("--nnodes", options.nnodes, "nodes")->capture_default_str();
  launcher->add_option("--node-rank", options.node_rank, "this node's index")
      ->capture_default_str();
  launcher->add_option("--master-addr", options.master_addr, "rank 0's host")
      ->capture_default_str();
  launcher->add_option("--master-port", options.master_port, "rendezvous port")
      ->capture_default_str();
  launcher
      ->add_option("--max-restarts", options.max_restarts,
                   "times to restart all ranks after a worker fails")
      ->capture_default_str();
  launcher->add_option("command", args->command, "after --: the kiln command, e.g. run EXP.toml")
      ->required();

  return [launcher, args]() -> std::optional<int> {
    if (!*launcher) return std::nullopt;
    return launch(args->options, args->command,
                  [](const std::string& line) { std::cout << line << std::endl; });
  };
}

}  // namespace kiln
