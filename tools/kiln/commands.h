// What a kiln command group is (tools/kiln/*_command(s).h, one module each): it adds its
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

}  // namespace kiln
