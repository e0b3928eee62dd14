#include "core/config/config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "core/config/registry.h"
#include "core/config/toml_text.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

std::string SourceLoc::str() const {
  if (line <= 0) return file;
  return fmt::format("{}:{}:{}", file, line, column);
}

const Section& ResolvedConfig::section(const std::string& name) const {
  for (const auto& s : sections) {
    if (s.name == name) return s;
  }
  throw std::logic_error("config has no section '" + name + "'");
}

SourceLoc ResolvedConfig::where(const std::string& key_path) const {
  auto it = locations.find(key_path);
  if (it != locations.end()) return it->second;
  return SourceLoc{experiment + " (default of " + key_path + ")", 0, 0};
}

namespace {

struct Loader {
  std::string file;
  std::map<std::string, SourceLoc> override_locations;  // key path -> the --set that wrote it

  SourceLoc locate(const std::string& path, const toml::source_region& region) const {
    auto it = override_locations.find(path);
    if (it != override_locations.end()) return it->second;
    return SourceLoc{file, static_cast<int64_t>(region.begin.line),
                     static_cast<int64_t>(region.begin.column)};
  }

  [[noreturn]] void fail(const SourceLoc& at, const std::string& what) const {
    throw UserError(at.str() + ": " + what);
  }

  static std::string describe(const toml::node& node) {
    std::ostringstream s;
    if (node.is_table()) return "a table";
    if (node.is_array()) return "an array";
    s << node.type() << " ";
    node.visit([&](auto&& v) {
      if constexpr (toml::is_value<decltype(v)>) s << v;
    });
    return s.str();
  }

  ParamValue convert(const ParamSpec& spec, const toml::node& node, const SourceLoc& at,
                     const std::string& path) const {
    auto wrong = [&]() {
      fail(at, fmt::format("'{}' must be {} ({}), got {}", path, type_name(spec.type), spec.doc,
                           describe(node)));
    };
    ParamValue value;
    switch (spec.type) {
      case ParamType::kInt:
        if (!node.is_integer()) wrong();
        value = node.as_integer()->get();
        break;
      case ParamType::kFloat:
        if (node.is_integer()) {
          value = static_cast<double>(node.as_integer()->get());
        } else if (node.is_floating_point()) {
          value = node.as_floating_point()->get();
        } else {
          wrong();
        }
        break;
      case ParamType::kBool:
        if (!node.is_boolean()) wrong();
        value = node.as_boolean()->get();
        break;
      case ParamType::kString:
        if (!node.is_string()) wrong();
        value = node.as_string()->get();
        break;
    }
    if (auto problem = spec.check(value)) fail(at, "'" + path + "' " + *problem);
    return value;
  }

  // Fills `section` from `table` (which may be null: the section was not written at all).
  void resolve_section(const SectionSchema& schema, const toml::table* table,
                       const toml::source_region& header, ResolvedConfig& out) const {
    Section section{schema.name, "", {}};
    // A plugin section takes the plugin's keys plus the keys core gives every plugin of the kind.
    std::vector<ParamSpec> keys = schema.params;
    const std::vector<ParamSpec>* params = &keys;
    if (schema.is_plugin) {
      const PluginSpec* plugin = choose_plugin(schema.name, table, header, out);
      section.type = plugin->name;
      keys.insert(keys.begin(), plugin->params.begin(), plugin->params.end());
    }
    std::vector<std::string> valid;
    for (const auto& p : *params)
      valid.push_back(p.name);
    if (schema.is_plugin) valid.push_back("type");

    if (table) {
      for (auto&& [key, node] : *table) {
        const std::string name(key.str());
        const std::string path = schema.name + "." + name;
        if (name == "type" && schema.is_plugin) continue;
        auto spec = std::find_if(params->begin(), params->end(),
                                 [&](const ParamSpec& p) { return p.name == name; });
        if (spec == params->end()) {
          std::string hint = nearest(name, valid);
          std::string owner = schema.is_plugin
                                  ? fmt::format("{} plugin '{}'", schema.name, section.type)
                                  : fmt::format("section [{}]", schema.name);
          fail(locate(path, key.source()),
               fmt::format("unknown key '{}': {}", path,
                           hint.empty() ? fmt::format("{} takes: {}", owner, join(valid, ", "))
                                        : fmt::format("did you mean '{}.{}'?", schema.name, hint)));
        }
        SourceLoc at = locate(path, node.source());
        section.params.set(name, convert(*spec, node, at, path));
        out.locations[path] = at;
      }
    }
    for (const auto& p : *params) {
      if (!section.params.has(p.name)) section.params.set(p.name, p.default_value);
    }
    out.sections.push_back(std::move(section));
  }

  const PluginSpec* choose_plugin(const std::string& kind, const toml::table* table,
                                  const toml::source_region& header, ResolvedConfig& out) const {
    const Catalog& catalog = Catalog::global();
    const std::string available = join(catalog.names(kind), ", ");
    const toml::node* type_node = table ? table->get("type") : nullptr;
    if (!type_node) {
      if (const PluginSpec* fallback = catalog.default_for(kind)) return fallback;
      SourceLoc at = table ? locate(kind, header) : SourceLoc{file, 0, 0};
      fail(at, fmt::format("[{}] needs a type: add `type = \"...\"` under [{}] (available: {})",
                           kind, kind, available));
    }
    const std::string path = kind + ".type";
    SourceLoc at = locate(path, type_node->source());
    if (!type_node->is_string()) {
      fail(at, fmt::format("'{}' must be a string naming a {} plugin (available: {})", path, kind,
                           available));
    }
    const std::string name = type_node->as_string()->get();
    const PluginSpec* plugin = catalog.find(kind, name);
    if (!plugin) {
      std::string hint = nearest(name, catalog.names(kind));
      fail(at, fmt::format("unknown {} plugin '{}': {}available: {}", kind, name,
                           hint.empty() ? "" : "did you mean '" + hint + "'? ", available));
    }
    out.locations[path] = at;
    return plugin;
  }

  ResolvedConfig resolve(toml::table& root) const {
    ResolvedConfig out;
    out.experiment = file;
    std::vector<std::string> section_names;
    for (const auto& schema : config_sections())
      section_names.push_back(schema.name);

    for (auto&& [key, node] : root) {
      const std::string name(key.str());
      auto schema = std::find(section_names.begin(), section_names.end(), name);
      SourceLoc at = locate(name, key.source());
      if (schema == section_names.end()) {
        std::string hint = nearest(name, section_names);
        fail(at, fmt::format("unknown section [{}]: {}", name,
                             hint.empty() ? "sections are " + join(section_names, ", ")
                                          : "did you mean [" + hint + "]?"));
      }
      if (!node.is_table()) {
        fail(at, fmt::format("'{}' must be a section ([{}] followed by its keys), not a value",
                             name, name));
      }
    }
    for (const auto& schema : config_sections()) {
      const toml::table* table = root.get_as<toml::table>(schema.name);
      toml::source_region header = table ? table->source() : toml::source_region{};
      resolve_section(schema, table, header, out);
    }
    return out;
  }

  void apply_override(toml::table& root, const std::string& assignment) {
    SourceLoc at{"--set " + assignment, 0, 0};
    auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) {
      fail(at, "expected section.key=value, e.g. --set optimizer.lr=3e-3");
    }
    const std::string path = assignment.substr(0, eq);
    const std::string text = assignment.substr(eq + 1);
    auto parts = split(path, '.');
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      fail(at, fmt::format("'{}' is not a section.key path, e.g. train.steps", path));
    }
    std::optional<toml::table> parsed = try_parse_toml("v = " + text);
    if (!parsed) {
      // Not a TOML value: the text as a bare string. It goes into the run's canonical TOML,
      // which must load again: so it must be UTF-8.
      if (!is_valid_utf8(text)) {
        fail(at,
             "the value is not valid UTF-8 (configs are UTF-8 text): write the characters "
             "themselves, or \\uXXXX escapes in a quoted string");
      }
      parsed = toml::table{{"v", text}};
    }
    if (!root.contains(parts[0])) {
      root.insert(parts[0], toml::table{});
      override_locations[parts[0]] = at;  // a section only this --set names: errors point here
    }
    toml::table* section = root.get_as<toml::table>(parts[0]);
    if (!section) fail(at, fmt::format("'{}' is not a section", parts[0]));
    parsed->get("v")->visit([&](auto&& v) { section->insert_or_assign(parts[1], v); });
    override_locations[path] = at;
  }
};

}  // namespace

ResolvedConfig load_config_text(const std::string& toml_text, const std::string& source_name,
                                const std::vector<std::string>& overrides) {
  Loader loader{source_name, {}};
  toml::table root = parse_toml(toml_text, source_name);
  for (const auto& o : overrides)
    loader.apply_override(root, o);
  return loader.resolve(root);
}

ResolvedConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError(fmt::format(
        "experiment file '{}' is a directory: give the path of a .toml file in it", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UserError(fmt::format("cannot open experiment file '{}': {}: check the path", path,
                                std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return load_config_text(text.str(), path, overrides);
}

}  // namespace kiln
