// `kiln runs list|show|compare|export|rm|plot` and `kiln report`: the run-history commands.
#pragma once

#include <memory>
#include <optional>

namespace CLI {
class App;
}

namespace kiln {

struct RunsCli;  // the subcommands and the options they parse into

// Adds `runs` (with its subcommands) and `report` to the app. The returned object receives the
// parsed options, so it must outlive app.parse().
std::shared_ptr<RunsCli> add_runs_commands(CLI::App& app);

// After app.parse(): the exit code when one of these commands was chosen, nothing otherwise.
std::optional<int> run_runs_commands(const RunsCli& cli);

}  // namespace kiln
