// Loading an experiment (load_config, config.h): the files of its `extends` chain and the --sets
// laid over one another section by section, every key checked against the section's schema or
// its plugin's parameters, and every default filled in.
#include "core/config/config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/config/extends.h"
#include "core/config/param_value.h"
#include "core/config/registry.h"
#include "core/config/set_override.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

SourceLoc at(const std::string& file, const toml::source_region& region) {
  return SourceLoc{file, static_cast<int64_t>(region.begin.line),
                   static_cast<int64_t>(region.begin.column)};
}

// One key of a section, as the layer that wins wrote it.
struct Written {
  std::string key;
  const toml::node* value = nullptr;
  SourceLoc key_at;    // for an unknown key
  SourceLoc value_at;  // for a wrong value
  KeySource::Kind kind = KeySource::Kind::kFile;
};

// A section as the files and the --sets wrote it, merged.
struct SectionInput {
  bool written = false;
  // The plugin the files named, when a --set names another: the files' keys the new plugin does
  // not take are dropped (as a file that switches the plugin drops its base's), not refused.
  std::string set_switched_from;
  SourceLoc header;           // the last file's [section], else the first --set that names it
  std::vector<Written> keys;  // in the order first written; a later layer replaces the value

  const Written* find(const std::string& key) const {
    for (const auto& w : keys) {
      if (w.key == key) return &w;
    }
    return nullptr;
  }
  void put(Written w) {
    for (auto& old : keys) {
      if (old.key == w.key) {
        old = std::move(w);
        return;
      }
    }
    keys.push_back(std::move(w));
  }

  // A file's keys of `table`, under `prefix`: a nested table ([data.sources.web]) gives the keys
  // of a family's entry, spelled sources.web.train and so on.
  void put_table(const toml::table& table, const std::string& prefix, const std::string& path) {
    for (auto&& [key, node] : table) {
      const std::string name = prefix + std::string(key.str());
      if (const toml::table* inner = node.as_table()) {
        put_table(*inner, name + ".", path);
        continue;
      }
      put({name, &node, at(path, key.source()), at(path, node.source()), KeySource::Kind::kFile});
    }
  }
};

// A file that names another plugin than the files before it starts the section afresh: keys
// chosen for the old plugin (an adamw learning rate, say) are no guide to the new one's. A base
// that names no type has left the choice open, and keeps its keys.
bool switches_plugin(const SectionInput& before, const toml::table& table) {
  const Written* old_type = before.find("type");
  const toml::node* new_type = table.get("type");
  if (!old_type || !new_type) return false;
  const auto* a = old_type->value->as_string();
  const auto* b = new_type->as_string();
  return a && b && a->get() != b->get();
}

// A sweep file (core/app/sweeps/spec_file.h) names its experiment with a top-level `base`.
std::string refuse_sweep_file(const toml::table& root) {
  if (!root.contains("base")) return "";
  return "is a sweep file (it has `base = ...`), not an experiment file: extend the experiment "
         "its base names";
}

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const auto& schema : config_sections())
    names.push_back(schema.name);
  return names;
}

}  // namespace

// The files of the chain as layers, then the --sets on top, resolved section by section.
class ConfigLoader {
 public:
  ResolvedConfig load(const std::string& path, const std::string& text,
                      const std::vector<std::string>& overrides) {
    layers_ = read_extends_chain(path, text, "an experiment file", refuse_sweep_file);
    for (const auto& o : overrides)
      add_override(o);
    for (const auto& layer : layers_)
      check_sections(layer);
    ResolvedConfig out;
    out.experiment = path;
    for (const auto& layer : layers_)
      out.sources_.push_back({layer.path, layer.sha256});
    for (const auto& schema : config_sections())
      resolve_section(schema, merged(schema), out);
    return out;
  }

 private:
  void add_override(const std::string& assignment) {
    SetOverride set = read_set_override(assignment);
    // The file that writes the name last decides what it is.
    for (auto layer = layers_.rbegin(); layer != layers_.rend(); ++layer) {
      if (const toml::node* node = layer->root.get(set.section)) {
        if (!node->is_table()) fail_at(set.at, fmt::format("'{}' is not a section", set.section));
        break;
      }
    }
    const std::vector<std::string> names = section_names();
    if (std::find(names.begin(), names.end(), set.section) == names.end())
      unknown_section(set.section, set.at);
    sets_.push_back(std::move(set));
  }

  [[noreturn]] static void unknown_section(const std::string& name, const SourceLoc& at) {
    const std::vector<std::string> names = section_names();
    const std::string hint = nearest(name, names);
    fail_at(at, fmt::format("unknown section [{}]: {}", name,
                            hint.empty() ? "sections are " + join(names, ", ")
                                         : "did you mean [" + hint + "]?"));
  }

  // Every top-level key of a file names a section and holds its table.
  static void check_sections(const TomlLayer& layer) {
    // A sweep file given to `kiln run` or `kiln config` is the wrong command: say so, rather than
    // refuse its `base` as an unknown section.
    if (const toml::node* base = layer.root.get("base"); base && base->is_string()) {
      fail_at(
          at(layer.path, base->source()),
          "this is a sweep file, not an experiment: run it with `kiln sweep " + layer.path + "`");
    }
    const std::vector<std::string> names = section_names();
    for (auto&& [key, node] : layer.root) {
      const std::string name(key.str());
      const SourceLoc where = at(layer.path, key.source());
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        unknown_section(name, where);
      }
      if (!node.is_table()) {
        fail_at(where,
                fmt::format("'{}' must be a section ([{}] followed by its keys), not a value", name,
                            name));
      }
    }
  }

  SectionInput merged(const SectionSchema& schema) const {
    SectionInput input;
    for (const auto& layer : layers_) {
      const toml::table* table = layer.root.get_as<toml::table>(schema.name);
      if (!table) continue;
      if (schema.is_plugin && switches_plugin(input, *table)) input.keys.clear();
      input.written = true;
      input.header = at(layer.path, table->source());
      input.put_table(*table, "", layer.path);
    }
    // The files' plugin: the type they write, else the kind's default when they write the section
    // at all (an [optimizer] of AdamW's keys without `type` is AdamW's as much as with it).
    const Written* file_type = input.find("type");
    std::string files_plugin =
        file_type && file_type->value->is_string() ? file_type->value->value_or(std::string()) : "";
    const PluginSpec* fallback =
        schema.is_plugin ? Catalog::global().default_for(schema.name) : nullptr;
    if (files_plugin.empty() && !input.keys.empty() && fallback) files_plugin = fallback->name;
    for (const auto& s : sets_) {
      if (s.section != schema.name) continue;
      if (!input.written) input.header = s.at;  // a section only --sets name: errors point there
      input.written = true;
      input.put({s.key, s.value(), s.at, s.at, KeySource::Kind::kSet});
    }
    const Written* type = input.find("type");
    if (schema.is_plugin && !files_plugin.empty() && type && type->kind == KeySource::Kind::kSet &&
        type->value->value_or(std::string()) != files_plugin) {
      input.set_switched_from = files_plugin;
    }
    return input;
  }

  void resolve_section(const SectionSchema& schema, const SectionInput& input,
                       ResolvedConfig& out) const {
    Section section{schema.name, "", {}};
    // A plugin section takes the plugin's keys plus the keys core gives every plugin of the kind.
    std::vector<ParamSpec> keys;
    size_t plugin_keys = 0;  // the first ones of `keys` are the plugin's own
    if (schema.is_plugin) {
      const PluginSpec* plugin = choose_plugin(schema.name, input, out);
      section.type = plugin->name;
      keys = plugin->params;
      plugin_keys = keys.size();
    }
    keys.insert(keys.end(), schema.params.begin(), schema.params.end());
    std::vector<std::string> dropped, kept;  // the files' keys, when a --set switched plugins
    for (const auto& w : input.keys) {
      if (w.key == "type" && schema.is_plugin) continue;
      const std::string path = schema.name + "." + w.key;
      const ParamSpec* spec = find_param(keys, w.key);
      if (!input.set_switched_from.empty() && w.kind == KeySource::Kind::kFile) {
        (spec ? kept : dropped).push_back(path);
        if (!spec) continue;
      }
      if (!spec) fail_at(w.key_at, unknown_key(schema, section.type, w, keys));
      if (auto problem = entry_name_problem(w.key)) fail_at(w.key_at, *problem);
      section.params.set(w.key, param_value(*spec, *w.value, w.value_at, path));
      out.key_sources_[path] = KeySource{w.kind, w.value_at, ""};
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      KeySource source;  // a default: the plugin's, or core's
      if (i < plugin_keys) source.plugin = section.type;
      for (const std::string& key : missing_keys(keys[i], section.params)) {
        section.params.set(key, find_param(keys, key)->default_value);
        out.key_sources_[schema.name + "." + key] = source;
      }
    }
    if (!dropped.empty()) {
      out.notes.push_back(fmt::format(
          "note: --set {}.type={} replaces the files' {}: left out {} ({} takes no such key); "
          "kept {}",
          schema.name, section.type, input.set_switched_from, join(dropped, ", "), section.type,
          kept.empty() ? "none" : join(kept, ", ")));
    }
    out.sections.push_back(std::move(section));
  }

  static std::string unknown_key(const SectionSchema& schema, const std::string& type,
                                 const Written& w, const std::vector<ParamSpec>& keys) {
    if (auto problem = family_key_problem(keys, schema.name, w.key)) return *problem;
    // A dotted key outside a family: a --set with too many parts, or a table in a file (its first
    // part names the key the table stands in for).
    const std::string name = w.key.substr(0, w.key.find('.'));
    const std::string path = schema.name + "." + name;
    if (name != w.key && w.kind == KeySource::Kind::kSet) {
      return fmt::format(
          "'{}.{}' is not a section.key path, e.g. train.steps (only a family's entries take more "
          "parts, as data.sources.NAME.weight)",
          schema.name, w.key);
    }
    if (const ParamSpec* plain = find_param(keys, name); plain && name != w.key) {
      return fmt::format("'{}' must be {} ({}), got a table", path, type_name(plain->type),
                         plain->doc);
    }
    if (name == "extends") {
      return fmt::format(
          "unknown key '{}': extends = ... goes at the top of the file, before the first "
          "[section]",
          path);
    }
    std::vector<std::string> valid;
    for (const auto& p : keys)
      valid.push_back(p.name);
    if (schema.is_plugin) valid.push_back("type");
    const std::string hint = nearest(name, valid);
    if (!hint.empty()) {
      return fmt::format("unknown key '{}': did you mean '{}.{}'?", path, schema.name, hint);
    }
    const std::string owner = schema.is_plugin ? fmt::format("{} plugin '{}'", schema.name, type)
                                               : fmt::format("section [{}]", schema.name);
    return fmt::format("unknown key '{}': {} takes: {}", path, owner, join(valid, ", "));
  }

  const PluginSpec* choose_plugin(const std::string& kind, const SectionInput& input,
                                  ResolvedConfig& out) const {
    const Catalog& catalog = Catalog::global();
    const std::string available = join(catalog.names(kind), ", ");
    const std::string path = kind + ".type";
    const Written* type = input.find("type");
    if (!type) {
      out.key_sources_[path] = KeySource{};
      if (const PluginSpec* fallback = catalog.default_for(kind)) return fallback;
      const SourceLoc where = input.written ? input.header : SourceLoc{layers_.back().path, 0, 0};
      fail_at(where,
              fmt::format("[{}] needs a type: add `type = \"...\"` under [{}] (available: {})",
                          kind, kind, available));
    }
    if (!type->value->is_string()) {
      fail_at(type->value_at,
              fmt::format("'{}' must be a string naming a {} plugin (available: {})", path, kind,
                          available));
    }
    const std::string name = type->value->as_string()->get();
    const PluginSpec* plugin = catalog.find(kind, name);
    if (!plugin) {
      std::string hint = nearest(name, catalog.names(kind));
      fail_at(type->value_at,
              fmt::format("unknown {} plugin '{}': {}available: {}", kind, name,
                          hint.empty() ? "" : "did you mean '" + hint + "'? ", available));
    }
    out.key_sources_[path] = KeySource{type->kind, type->value_at, ""};
    return plugin;
  }

  std::vector<TomlLayer> layers_;
  std::vector<SetOverride> sets_;  // in the order given: a later one wins
};

ResolvedConfig load_config_text(const std::string& toml_text, const std::string& source_name,
                                const std::vector<std::string>& overrides) {
  return ConfigLoader().load(source_name, toml_text, overrides);
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
