#include "tools/kiln/config_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/app/presentation/provenance.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "core/store/db/location.h"
#include "core/util/error.h"

namespace kiln {

namespace {

struct ConfigArgs {
  std::string experiment;
  std::vector<std::string> overrides;
};

}  // namespace

ChosenCommand add_config_command(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  CLI::App* config = app.add_subcommand(
      "config", "the resolved config of an experiment, with where each value came from");
  config->add_option("experiment", args->experiment, "experiment TOML file")->required();
  config->add_option("--set", args->overrides,
                     "override a key, as `kiln run` takes it: --set optimizer.lr=3e-3");
  return [config, args]() -> std::optional<int> {
    if (!*config) return std::nullopt;
    const ResolvedConfig config = load_config(args->experiment, args->overrides);
    // As `kiln run` does: a store URL with a password is refused, and so never printed.
    check_store_url(run_options(config).db);
    for (const auto& note : config.notes)
      std::cout << note << "\n";
    std::cout << describe_config(config);
    return kExitOk;
  };
}

}  // namespace kiln
