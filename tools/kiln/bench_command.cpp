#include "tools/kiln/bench_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/app/speed/compare.h"
#include "core/app/speed/measure.h"
#include "core/app/speed/precision_check.h"
#include "core/config/config.h"
#include "core/util/error.h"

namespace kiln {

namespace {

struct BenchArgs {
  std::string experiment;
  std::vector<std::string> overrides;
  BenchOptions options;
  std::string record, against;
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
  // Without a value --record takes the CLI's default string, which no typed label can equal.
  CLI::Option* record =
      bench
          ->add_option("--record", args->record,
                       "keep the result in the run store (run.db) under this label")
          ->expected(0, 1)
          ->type_name("LABEL")
          ->default_str(kDefaultBenchLabel);
  CLI::Option* against = bench
                             ->add_option("--against", args->against,
                                          "print this result's ratio to the one kept as LABEL")
                             ->type_name("LABEL");
  bench->add_flag("--allow-mismatch", args->options.allow_mismatch,
                  "compare with a result from another machine or config");

  return [bench, args, record, against]() -> std::optional<int> {
    if (!*bench) return std::nullopt;
    if (*record) args->options.record = args->record;
    if (*against) args->options.against = args->against;
    const ResolvedConfig config = load_config(args->experiment, args->overrides);
    std::cout << (config.type("precision") == "auto"
                      ? run_precision_check(args->experiment, args->overrides, args->options)
                      : run_bench(config, args->options).report);
    return kExitOk;
  };
}

}  // namespace kiln
