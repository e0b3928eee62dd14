// The kiln command line: the app, its command groups (one module each, tools/kiln/commands.h) and
// the one place an error becomes a line on stderr and an exit code (core/util/error.h). The work
// itself lives in core/.
#include <malloc.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "core/distributed/distributed.h"
#include "core/util/build_info.h"
#include "core/util/error.h"
#include "core/util/process.h"
#include "core/util/torch_compat.h"
#include "tools/kiln/bench_command.h"
#include "tools/kiln/config_command.h"
#include "tools/kiln/data_command.h"
#include "tools/kiln/launch_command.h"
#include "tools/kiln/plugins_command.h"
#include "tools/kiln/run_commands.h"
#include "tools/kiln/runs_command.h"
#include "tools/kiln/serve_command.h"
#include "tools/kiln/snapshot_commands.h"
#include "tools/kiln/sweep_command.h"

namespace {

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

// CLI11 would report a stray first word as a missing subcommand: name it instead.
void refuse_unknown_command(const CLI::App& app, int argc, char** argv) {
  const std::vector<std::string> commands = command_names(app);
  if (argc > 1) {
    const std::string first = argv[1];
    if (first[0] != '-' && std::find(commands.begin(), commands.end(), first) == commands.end()) {
      throw kiln::UserError(fmt::format("unknown command '{}': commands are {}; see `kiln --help`",
                                        first, fmt::join(commands, ", ")));
    }
    if (first[0] == '-' && first != "-h" && first != "--help" && first != "--version") {
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
}

// The docs/ page each command's --help points to; a command not named here takes its group's.
const std::map<std::string, std::string> kCommandPages = {
    {"run", "experiments.md"},     {"resume", "snapshots.md"},       {"sweep", "sweeps.md"},
    {"sweep status", "slurm.md"},  {"sweep cancel", "slurm.md"},     {"sweep resubmit", "slurm.md"},
    {"sweep task", "slurm.md"},    {"launch", "parallelism.md"},     {"bench", "speed.md"},
    {"eval", "tasks.md"},          {"sample", "snapshots.md"},       {"export", "huggingface.md"},
    {"plugins", "plugins.md"},     {"config", "experiments.md"},     {"prepare", "data.md"},
    {"runs", "run-store.md"},      {"runs compare", "comparing.md"}, {"runs diff", "comparing.md"},
    {"runs plot", "comparing.md"}, {"report", "comparing.md"},       {"serve", "dashboard.md"}};

// Ends each command's --help with the page that documents it (tests/e2e/cli_help_test.cpp checks
// that every command names one and that it exists).
void point_to_docs(CLI::App& command, const std::string& path, const std::string& group_page) {
  const auto named = kCommandPages.find(path);
  const std::string page = named != kCommandPages.end() ? named->second : group_page;
  command.footer(fmt::format("Documented in docs/{} of Kiln's source tree.", page));
  for (auto* sub : command.get_subcommands({}))
    point_to_docs(*sub, path + " " + sub->get_name(), page);
}

// "kiln 5de6efb (LibTorch 1.13.1, CUDA build)": what `kiln --version` prints.
std::string version_line() {
  const std::string commit = kiln::build_git_commit();
  return fmt::format("kiln {} (LibTorch {}, {})",
                     commit.empty() ? "(not built from a git checkout)" : commit.substr(0, 12),
                     kiln::compat::torch_version(), KILN_WITH_CUDA ? "CUDA build" : "CPU build");
}

int dispatch(int argc, char** argv) {
  CLI::App app{"Kiln: declarative experiment-config training on LibTorch", "kiln"};
  app.set_version_flag("--version", version_line(), "print kiln's commit and LibTorch, and exit");
  app.require_subcommand(1);
  // Every option's --help line shows its default (the value its variable holds before parsing).
  app.option_defaults()->always_capture_default();
  // In the order `kiln --help` lists them (a braced list is evaluated left to right).
  const std::vector<kiln::ChosenCommand> groups = {
      kiln::add_run_commands(app),      kiln::add_sweep_command(app),
      kiln::add_launch_command(app),    kiln::add_bench_command(app),
      kiln::add_snapshot_commands(app), kiln::add_plugins_command(app),
      kiln::add_config_command(app),    kiln::add_prepare_command(app),
      kiln::add_runs_commands(app),     kiln::add_serve_command(app)};

  app.footer("Start with README.md; docs/ in Kiln's source tree has one page per topic.");
  for (auto* command : app.get_subcommands({}))
    point_to_docs(*command, command->get_name(), "README.md");

  refuse_unknown_command(app, argc, argv);
  // `kiln runs` alone: the runs commands, as `kiln runs --help` lists them.
  if (argc == 2 && std::string(argv[1]) == "runs") {
    std::cout << app.get_subcommand("runs")->help("kiln");
    return kiln::kExitOk;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw kiln::UserError(std::string(e.what()) + ": see `kiln --help`");
  }
  for (const auto& chosen : groups) {
    if (auto code = chosen()) return *code;
  }
  return kiln::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  kiln::die_with_parent();  // a sweep's member whose worker is gone stops (snapshots) at once
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
  } catch (const kiln::PeerLostError& e) {  // the environment failed, and the line says how
    std::cerr << "kiln: error: " << one_line(e.what()) << "\n";
    return kiln::kExitInternal;
  } catch (const c10::Error& e) {
    std::cerr << "kiln: internal error: LibTorch: " << one_line(e.what_without_backtrace()) << "\n";
    return kiln::kExitInternal;
  } catch (const std::exception& e) {
    std::cerr << "kiln: internal error: " << one_line(e.what()) << "\n";
    return kiln::kExitInternal;
  }
}
