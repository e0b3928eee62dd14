// The kiln command groups, one file each (tools/kiln/*_command(s).cpp). A group adds its
// subcommands, flags and help to the app, and returns what main runs after parsing: the exit
// code when one of the group's commands was chosen, nothing otherwise. main.cpp adds the groups
// in the order `kiln --help` lists them and owns the one place errors become exit codes.
#pragma once

#include <functional>
#include <optional>

namespace CLI {
class App;
}

namespace kiln {

using ChosenCommand = std::function<std::optional<int>()>;

ChosenCommand add_run_commands(CLI::App& app);    // run, resume (run_commands.cpp)
ChosenCommand add_sweep_command(CLI::App& app);   // sweep (sweep_command.cpp)
ChosenCommand add_launch_command(CLI::App& app);  // launch (launch_command.cpp)
ChosenCommand add_bench_command(CLI::App& app);   // bench (bench_command.cpp)
ChosenCommand add_snapshot_commands(
    CLI::App& app);  // eval, sample, export (core/app/run/from_snapshot.cpp)
ChosenCommand add_plugins_command(CLI::App& app);  // plugins (plugins_command.cpp)
ChosenCommand add_config_command(CLI::App& app);   // config (config_command.cpp)
ChosenCommand add_prepare_command(CLI::App& app);  // prepare (data_command.cpp)
ChosenCommand add_runs_commands(CLI::App& app);    // runs ..., report (runs_command.cpp)
ChosenCommand add_serve_command(CLI::App& app);    // serve (serve_command.cpp)

}  // namespace kiln
