// `kiln bench`: time an experiment's training step, phase by phase (core/app/bench.h).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/app/bench.h"
#include "core/config/config.h"
#include "core/util/error.h"
#include "tools/kiln/commands.h"

namespace kiln {

namespace {

struct BenchArgs {
  std::string experiment;
  std::vector<std::string> overrides;
  BenchOptions options;
};

}  // namespace

ChosenCommand add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* bench =
      app.add_subcommand("bench", "time an experiment's training step, phase by phase");
  bench->add_option("experiment", args->experiment, "experiment TOML file")->required();
  bench->add_option("--set", args->overrides, "override a key, as for kiln run");
  bench->add_option("--steps", args->options.steps, "timed steps")->capture_default_str();
  bench->add_option("--warmup", args->options.warmup, "untimed steps first")->capture_default_str();

  return [bench, args]() -> std::optional<int> {
    if (!*bench) return std::nullopt;
    std::cout << run_bench(load_config(args->experiment, args->overrides), args->options);
    return kExitOk;
  };
}

}  // namespace kiln
