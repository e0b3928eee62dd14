// The kiln command line. Each subcommand parses its flags and calls into core/; the work
// itself lives there. Exit codes: 0 ok, 1 internal error, 2 user mistake, 130 interrupted.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/experiment.h"
#include "core/prepare.h"
#include "core/registry.h"

namespace {

using kiln::ParamSpec;

void print_params(const std::vector<ParamSpec>& params) {
  for (const auto& p : params) {
    std::string range = p.describe_range();
    std::cout << fmt::format("    {:<16} {:<7} {:<14} {}{}\n", p.name, kiln::type_name(p.type),
                             kiln::format_value(p.default_value), p.doc,
                             range == "any value" ? "" : " (" + range + ")");
  }
}

void list_plugins() {
  std::cout << "Config sections. Core sections take the keys listed; a plugin section takes "
               "`type` and the keys of the plugin it names.\n"
               "Columns: key, type, default, meaning (allowed values).\n\n";
  for (const auto& section : kiln::config_sections()) {
    std::cout << fmt::format("[{}]  {}\n", section.name, section.doc);
    print_params(section.params);
  }
  const auto& catalog = kiln::Catalog::global();
  for (const auto& kind : catalog.kinds()) {
    std::cout << fmt::format("\n{} plugins\n", kind);
    for (const auto* plugin : catalog.plugins(kind)) {
      std::cout << fmt::format("  {}{}  {}\n", plugin->name, plugin->is_default ? " (default)" : "",
                               plugin->doc);
      print_params(plugin->params);
    }
  }
}

int run_command(const std::string& experiment, std::vector<std::string> overrides,
                const std::string& name) {
  if (!name.empty()) overrides.push_back("run.name=" + name);
  kiln::ResolvedConfig config = kiln::load_config(experiment, overrides);
  kiln::install_stop_handlers();
  kiln::RunSummary summary = kiln::run_experiment(std::move(config));
  if (summary.status == "interrupted") {
    std::cerr << fmt::format("kiln: run '{}' interrupted after step {}\n", summary.name,
                             summary.steps_done);
    return kiln::kExitInterrupted;
  }
  return kiln::kExitOk;
}

int prepare_command(const kiln::PrepareOptions& options) {
  auto summary = kiln::prepare_dataset(
      options, [](const std::string& line) { std::cout << "prepare: " << line << std::endl; });
  std::cout << fmt::format(
      "prepare: wrote {} train tokens in {} shard(s) and {} val tokens in {} shard(s) to {}/ "
      "(vocabulary {} ids, tokenizer.json)\n",
      summary.train_tokens, summary.train_shards, summary.val_tokens, summary.val_shards,
      options.out_dir, summary.vocab_size);
  return kiln::kExitOk;
}

int dispatch(int argc, char** argv) {
  CLI::App app{"Kiln: declarative experiment-config training on LibTorch", "kiln"};
  app.require_subcommand(1);

  std::string experiment, name;
  std::vector<std::string> overrides;
  auto* run = app.add_subcommand("run", "train the experiment a TOML file describes");
  run->add_option("experiment", experiment, "experiment TOML file")->required();
  run->add_option("--set", overrides, "override a key: --set optimizer.lr=3e-3 (repeatable)");
  run->add_option("--name", name, "run name (same as --set run.name=NAME)");

  auto* plugins = app.add_subcommand("plugins", "list config sections and plugins with their keys");

  kiln::PrepareOptions prep;
  auto* prepare = app.add_subcommand("prepare", "tokenize text files into token shards");
  prepare->add_option("text", prep.inputs, "text file(s)")->required();
  prepare->add_option("--tokenizer", prep.tokenizer, "tokenizer plugin")->capture_default_str();
  prepare->add_option("--out", prep.out_dir, "output directory")->required();
  prepare->add_option("--val-fraction", prep.val_fraction, "share of tokens kept for validation")
      ->capture_default_str();
  prepare->add_option("--shard-tokens", prep.shard_tokens, "tokens per shard file")
      ->capture_default_str();

  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> commands;
    for (const auto* sub : app.get_subcommands({}))
      commands.push_back(sub->get_name());
    if (std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
      throw kiln::UserError(fmt::format("unknown command '{}': commands are {}; see `kiln --help`",
                                        argv[1], fmt::join(commands, ", ")));
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw kiln::UserError(std::string(e.what()) + ": see `kiln --help`");
  }
  if (*run) return run_command(experiment, overrides, name);
  if (*plugins) {
    list_plugins();
    return kiln::kExitOk;
  }
  if (*prepare) return prepare_command(prep);
  return kiln::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const kiln::UserError& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return kiln::kExitUsage;
  } catch (const c10::Error& e) {
    std::cerr << "kiln: internal error: LibTorch: " << e.what_without_backtrace() << "\n";
    return kiln::kExitInternal;
  } catch (const std::exception& e) {
    std::cerr << "kiln: internal error: " << e.what() << "\n";
    return kiln::kExitInternal;
  }
}
