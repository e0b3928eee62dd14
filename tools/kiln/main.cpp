// The kiln command line. Each subcommand parses its flags and calls into core/; the work
// itself lives there. Exit codes: core/error.h.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "core/bench.h"
#include "core/config.h"
#include "core/error.h"
#include "core/experiment.h"
#include "core/launch.h"
#include "core/prepare.h"
#include "core/registry.h"
#include "core/snapshot_commands.h"
#include "core/sweep.h"
#include "tools/kiln/runs_command.h"

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

// An error is one line on stderr, whatever bytes it quotes (a key, a name, a file's text):
// control characters come out escaped.
std::string one_line(const std::string& message) {
  std::string out;
  for (unsigned char c : message) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 && c != '\t') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// The names of `app`'s subcommands.
std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands({}))
    names.push_back(sub->get_name());
  return names;
}

int finish(const kiln::RunSummary& summary) {
  if (summary.status == "interrupted") {
    std::cerr << fmt::format("kiln: run '{}' interrupted after step {}\n", summary.name,
                             summary.steps_done);
    return kiln::kExitInterrupted;
  }
  return kiln::kExitOk;
}

std::string toml_quoted(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

int run_command(const std::string& experiment, std::vector<std::string> overrides,
                const std::string& name, bool restart) {
  // Quoted, so that a name such as "nan", "42" or "true" stays a name and not a number.
  if (!name.empty()) overrides.push_back("run.name=" + toml_quoted(name));
  kiln::ResolvedConfig config = kiln::load_config(experiment, overrides);
  kiln::install_stop_handlers();
  return finish(kiln::run_experiment(std::move(config), restart));
}

int sweep_command(const std::string& file, const std::string& name,
                  const std::vector<std::string>& grid, const std::vector<std::string>& zip,
                  const std::vector<std::string>& fixed, const kiln::SweepOptions& options) {
  kiln::SweepSpec spec;
  if (kiln::is_sweep_file(file)) {
    spec = kiln::load_sweep_file(file);
  } else {
    spec.base = file;
    spec.name = std::filesystem::path(file).stem().string();
  }
  if (!name.empty()) spec.name = name;
  for (const auto& g : grid)
    spec.grid.push_back(kiln::parse_axis(g));
  for (const auto& z : zip)
    spec.zip.push_back(kiln::parse_axis(z));
  spec.fixed.insert(spec.fixed.end(), fixed.begin(), fixed.end());
  const int incomplete = kiln::run_sweep(
      spec, options, [](const std::string& line) { std::cout << line << std::endl; });
  return incomplete == 0 ? kiln::kExitOk : kiln::kExitSomeFailed;
}

int prepare_command(const kiln::PrepareOptions& options) {
  auto summary = kiln::prepare_dataset(
      options, [](const std::string& line) { std::cout << "prepare: " << line << std::endl; });
  std::cout << fmt::format(
      "prepare: wrote {} train, {} val and {} test tokens ({} + {} + {} shards) to {}/ "
      "(vocabulary {} ids, tokenizer.json)\n",
      summary.train_tokens, summary.val_tokens, summary.test_tokens, summary.train_shards,
      summary.val_shards, summary.test_shards, options.out_dir, summary.vocab_size);
  return kiln::kExitOk;
}

int dispatch(int argc, char** argv) {
  CLI::App app{"Kiln: declarative experiment-config training on LibTorch", "kiln"};
  app.require_subcommand(1);

  std::string experiment, name, db = "runs/kiln.db", run_ref;
  std::vector<std::string> overrides;
  bool restart = false;
  auto* run = app.add_subcommand("run", "train the experiment a TOML file describes");
  run->add_option("experiment", experiment, "experiment TOML file")->required();
  run->add_option("--set", overrides, "override a key: --set optimizer.lr=3e-3 (repeatable)");
  run->add_option("--name", name, "run name (same as --set run.name=NAME)");
  run->add_flag("--restart", restart, "replace a run of the same name, snapshots included");

  auto* resume = app.add_subcommand("resume", "continue a run from its latest intact snapshot");
  resume->add_option("run", run_ref, "run name or id")->required();
  resume->add_option("--set", overrides, "change steps, eval or checkpoint settings");
  resume->add_option("--db", db, "run store")->capture_default_str();

  std::string sweep_file, sweep_name;
  std::vector<std::string> grid, zip;
  kiln::SweepOptions sweep_options;
  auto* sweep = app.add_subcommand("sweep", "run a grid of experiments (a sweep file, or --grid)");
  sweep->add_option("file", sweep_file, "sweep file, or an experiment file with --grid/--zip")
      ->required();
  sweep->add_option("--grid", grid, "section.key=v1,v2,...: one axis of the product (repeatable)");
  sweep->add_option("--zip", zip, "section.key=v1,v2,...: varied together with other --zip keys");
  sweep->add_option("--set", overrides, "section.key=value for every member");
  sweep->add_option("--name", sweep_name, "sweep name (default: the file's name)");
  sweep->add_option("--jobs", sweep_options.jobs, "members run at once, sharing the cores")
      ->capture_default_str();
  sweep->add_option("--db", sweep_options.db, "run store (default: the experiment's run.db)");
  sweep->add_option("--sort", sweep_options.sort, "summary order: a `kiln runs list` key")
      ->capture_default_str();

  kiln::LaunchOptions launch_options;
  std::vector<std::string> launch_command;
  auto* launcher = app.add_subcommand(
      "launch", "start a kiln command on N ranks, torchrun-style, restarting them on failure");
  launcher->add_option("--nproc-per-node", launch_options.nproc_per_node, "ranks on this node")
      ->capture_default_str();
  launcher->add_option("--nnodes", launch_options.nnodes, "nodes")->capture_default_str();
  launcher->add_option("--node-rank", launch_options.node_rank, "this node's index")
      ->capture_default_str();
  launcher->add_option("--master-addr", launch_options.master_addr, "rank 0's host")
      ->capture_default_str();
  launcher->add_option("--master-port", launch_options.master_port, "rendezvous port")
      ->capture_default_str();
  launcher
      ->add_option("--max-restarts", launch_options.max_restarts,
                   "times to restart all ranks after a worker fails")
      ->capture_default_str();
  launcher->add_option("command", launch_command, "after --: the kiln command, e.g. run EXP.toml")
      ->required();

  kiln::BenchOptions bench_options;
  auto* bench = app.add_subcommand("bench", "time an experiment's training step, phase by phase");
  bench->add_option("experiment", experiment, "experiment TOML file")->required();
  bench->add_option("--set", overrides, "override a key, as for kiln run");
  bench->add_option("--steps", bench_options.steps, "timed steps")->capture_default_str();
  bench->add_option("--warmup", bench_options.warmup, "untimed steps first")->capture_default_str();

  kiln::SnapshotRequest snap;
  snap.note = [](const std::string& line) { std::cerr << "kiln: " << line << "\n"; };
  auto add_snapshot_options = [&](CLI::App* sub) {
    sub->add_option("run", snap.run, "run name or id")->required();
    sub->add_option("--checkpoint", snap.checkpoint, "latest, best or a step number")
        ->capture_default_str();
    sub->add_option("--db", snap.db, "run store")->capture_default_str();
  };
  std::string split = "val";
  int64_t eval_batches = 0;
  auto* eval = app.add_subcommand("eval", "loss and perplexity of a snapshot on a data split");
  add_snapshot_options(eval);
  eval->add_option("--split", split, "val, test or train")->capture_default_str();
  eval->add_option("--steps", eval_batches, "micro-batches to evaluate; 0 = the whole split")
      ->capture_default_str();

  kiln::SampleOptions sampling;
  auto* sample = app.add_subcommand("sample", "generate text from a snapshot");
  add_snapshot_options(sample);
  sample->add_option("--prompt", sampling.prompt, "text to continue")->capture_default_str();
  sample->add_option("--tokens", sampling.tokens, "tokens to generate")->capture_default_str();
  sample->add_option("--temperature", sampling.temperature, "0 = greedy")->capture_default_str();
  sample->add_option("--top-k", sampling.top_k, "sample among the k likeliest; 0 = all")
      ->capture_default_str();
  sample->add_option("--seed", sampling.seed, "sampling seed")->capture_default_str();

  std::string export_path;
  auto* exporter = app.add_subcommand("export", "write a snapshot's weights as safetensors");
  add_snapshot_options(exporter);
  exporter->add_option("-o,--output", export_path, "output .safetensors file")->required();

  auto* plugins = app.add_subcommand("plugins", "list config sections and plugins with their keys");

  kiln::PrepareOptions prep;
  auto* prepare = app.add_subcommand("prepare", "tokenize text files into token shards");
  prepare->add_option("text", prep.inputs, "text file(s)")->required();
  prepare->add_option("--tokenizer", prep.tokenizer, "tokenizer plugin")->capture_default_str();
  prepare->add_option("--out", prep.out_dir, "output directory")->required();
  prepare->add_option("--val-fraction", prep.val_fraction, "share of tokens kept for validation")
      ->capture_default_str();
  prepare->add_option("--test-fraction", prep.test_fraction, "share of tokens kept for test")
      ->capture_default_str();
  prepare->add_option("--shard-tokens", prep.shard_tokens, "tokens per shard file")
      ->capture_default_str();

  auto runs_cli = kiln::add_runs_commands(app);

  // CLI11 would report a stray first word as a missing subcommand: name it instead.
  const std::vector<std::string> commands = command_names(app);
  if (argc > 1) {
    const std::string first = argv[1];
    if (first[0] != '-' && std::find(commands.begin(), commands.end(), first) == commands.end()) {
      throw kiln::UserError(fmt::format("unknown command '{}': commands are {}; see `kiln --help`",
                                        first, fmt::join(commands, ", ")));
    }
    if (first[0] == '-' && first != "-h" && first != "--help") {
      throw kiln::UserError(fmt::format(
          "unknown option '{}': kiln takes a command first, one of {}; see `kiln --help`", first,
          fmt::join(commands, ", ")));
    }
  }
  if (argc > 2 && std::string(argv[1]) == "runs" && argv[2][0] != '-') {
    const std::vector<std::string> runs_commands = command_names(*app.get_subcommand("runs"));
    if (std::find(runs_commands.begin(), runs_commands.end(), argv[2]) == runs_commands.end()) {
      throw kiln::UserError(
          fmt::format("unknown command 'runs {}': runs commands are {}; see `kiln runs --help`",
                      argv[2], fmt::join(runs_commands, ", ")));
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
  if (auto code = kiln::run_runs_commands(*runs_cli)) return *code;
  if (*run) return run_command(experiment, overrides, name, restart);
  if (*resume) {
    kiln::install_stop_handlers();
    return finish(kiln::resume_run(db, run_ref, overrides));
  }
  if (*plugins) {
    list_plugins();
    return kiln::kExitOk;
  }
  if (*prepare) return prepare_command(prep);
  if (*launcher) {
    return kiln::launch(launch_options, launch_command,
                        [](const std::string& line) { std::cout << line << std::endl; });
  }
  if (*bench) {
    std::cout << kiln::run_bench(kiln::load_config(experiment, overrides), bench_options);
    return kiln::kExitOk;
  }
  if (*sweep) {
    return sweep_command(sweep_file, sweep_name, grid, zip, overrides, sweep_options);
  }
  if (*eval) {
    auto r = kiln::evaluate_snapshot(snap, split, eval_batches);
    std::cout << fmt::format(
        "{} {} step {} | {} loss {:.6f} | perplexity {:.4f} | {} batches, "
        "{} tokens\n",
        r.run, r.checkpoint, r.step, r.split, r.loss, r.perplexity, r.batches, r.tokens);
    return kiln::kExitOk;
  }
  if (*sample) {
    std::cout << kiln::sample_snapshot(snap, sampling) << std::endl;
    return kiln::kExitOk;
  }
  if (*exporter) {
    const int64_t tensors = kiln::export_snapshot(snap, export_path);
    std::cout << fmt::format("wrote {} tensors to {}\n", tensors, export_path);
    return kiln::kExitOk;
  }
  return kiln::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // glibc serves blocks above a dynamic threshold with fresh mmaps and trims freed memory, so
  // each step's activation-sized tensors were page-faulted in anew: ~10k faults and ~10 ms per
  // step of the default experiment (perf stat). Keeping them in the heap removes that.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  try {
    return dispatch(argc, argv);
  } catch (const kiln::DivergedError& e) {
    std::cerr << "kiln: error: " << one_line(e.what()) << "\n";
    return kiln::kExitDiverged;
  } catch (const kiln::UserError& e) {
    std::cerr << "kiln: error: " << one_line(e.what()) << "\n";
    return kiln::kExitUsage;
  } catch (const c10::Error& e) {
    std::cerr << "kiln: internal error: LibTorch: " << one_line(e.what_without_backtrace()) << "\n";
    return kiln::kExitInternal;
  } catch (const std::exception& e) {
    std::cerr << "kiln: internal error: " << one_line(e.what()) << "\n";
    return kiln::kExitInternal;
  }
}
