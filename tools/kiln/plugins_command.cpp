#include "tools/kiln/plugins_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/config/config.h"
#include "core/config/registry.h"
#include "core/util/error.h"

namespace kiln {

namespace {

void print_params(const std::vector<ParamSpec>& params) {
  for (const auto& p : params) {
    if (p.is_family()) {  // its entries' keys, as a [section.family.NAME] table takes them
      std::cout << fmt::format("    {}.NAME.KEY  {}\n", p.name, p.doc);
      std::vector<ParamSpec> fields = p.fields;
      for (auto& f : fields)
        f.name = p.name + ".NAME." + f.name;
      print_params(fields);
      continue;
    }
    std::string range = p.describe_range();
    std::cout << fmt::format("    {:<16} {:<7} {:<14} {}{}{}\n", p.name, type_name(p.type),
                             format_value(p.default_value), p.doc,
                             range == "any value" ? "" : " (" + range + ")",
                             p.names_files ? " [files: kept with the run, absolute]" : "");
  }
}

void list_plugins() {
  std::cout << "Config sections. Core sections take the keys listed; a plugin section takes "
               "`type` and the keys of the plugin it names.\n"
               "Columns: key, type, default, meaning (allowed values).\n\n";
  for (const auto& section : config_sections()) {
    std::cout << fmt::format("[{}]  {}\n", section.name, section.doc);
    print_params(section.params);
  }
  const auto& catalog = Catalog::global();
  for (const auto& kind : catalog.kinds()) {
    std::cout << fmt::format("\n{} plugins\n", kind);
    for (const auto* plugin : catalog.plugins(kind)) {
      std::cout << fmt::format("  {}{}  {}\n", plugin->name, plugin->is_default ? " (default)" : "",
                               plugin->doc);
      print_params(plugin->params);
    }
  }
}

}  // namespace

ChosenCommand add_plugins_command(CLI::App& app) {
  CLI::App* plugins =
      app.add_subcommand("plugins", "list config sections and plugins with their keys");
  return [plugins]() -> std::optional<int> {
    if (!*plugins) return std::nullopt;
    list_plugins();
    return kExitOk;
  };
}

}  // namespace kiln
