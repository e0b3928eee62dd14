// `kiln sweep`: a grid of experiments from a sweep file, or from an experiment file with
// --grid/--zip axes; --dry-run checks and lists the members without running them. Exit code
// kExitInterrupted when a SIGINT or SIGTERM stopped it, kExitSomeFailed when a member did not
// complete otherwise.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/app/sweep_runner.h"
#include "core/app/sweep_spec.h"
#include "core/util/error.h"
#include "tools/kiln/commands.h"

namespace kiln {

namespace {

struct SweepArgs {
  std::string file, name;
  std::vector<std::string> grid, zip, fixed;
  SweepOptions options;
};

int sweep_command(const SweepArgs& args) {
  SweepSpec spec;
  if (is_sweep_file(args.file)) {
    spec = load_sweep_file(args.file);
  } else {
    spec.base = args.file;
    spec.name = std::filesystem::path(args.file).stem().string();
  }
  if (!args.name.empty()) spec.name = args.name;
  for (const auto& g : args.grid)
    spec.grid.push_back(parse_axis(g));
  for (const auto& z : args.zip)
    spec.zip.push_back(parse_axis(z));
  spec.fixed.insert(spec.fixed.end(), args.fixed.begin(), args.fixed.end());
  const SweepOutcome outcome = run_sweep(
      spec, args.options, [](const std::string& line) { std::cout << line << std::endl; });
  if (outcome.interrupted) return kExitInterrupted;
  return outcome.incomplete == 0 ? kExitOk : kExitSomeFailed;
}

}  // namespace

ChosenCommand add_sweep_command(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* sweep =
      app.add_subcommand("sweep", "run a grid of experiments (a sweep file, or --grid)");
  sweep->add_option("file", args->file, "sweep file, or an experiment file with --grid/--zip")
      ->required();
  sweep->add_option("--grid", args->grid,
                    "section.key=v1,v2,...: one axis of the product (repeatable)");
  sweep->add_option("--zip", args->zip,
                    "section.key=v1,v2,...: varied together with other --zip keys");
  sweep->add_option("--set", args->fixed, "section.key=value for every member");
  sweep->add_option("--name", args->name, "sweep name (default: the file's name)");
  sweep->add_option("--jobs", args->options.jobs, "members run at once, sharing the cores")
      ->capture_default_str();
  sweep->add_option("--db", args->options.db, "run store (default: the experiment's run.db)");
  sweep->add_option("--sort", args->options.sort, "summary order: a `kiln runs list` key")
      ->capture_default_str();
  sweep->add_flag("--dry-run", args->options.dry_run,
                  "check every member (assembled without training) and print them; run nothing");

  return [sweep, args]() -> std::optional<int> {
    if (!*sweep) return std::nullopt;
    return sweep_command(*args);
  };
}

}  // namespace kiln
