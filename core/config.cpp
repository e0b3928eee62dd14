#include "core/config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/error.h"
#include "core/registry.h"
#include "core/text.h"

namespace kiln {

const std::vector<SectionSchema>& config_sections() {
  using P = ParamSpec;
  static const std::vector<SectionSchema> sections = {
      {"run",
       false,
       "what the run is called, where it goes, how it is seeded",
       {P::text("name", "", "run name, unique in the db; empty = <experiment>-<UTC time>")
            .unhashed(),
        P::integer("seed", 1337, "seeds every random stream: init, dropout, sampling").at_least(0),
        P::text("out_dir", "runs", "directory for snapshots, one folder per run").unhashed(),
        P::text("db", "runs/kiln.db", "SQLite run store shared by all runs").unhashed(),
        P::text("sweep", "", "the sweep this run belongs to (kiln sweep sets it)").unhashed(),
        P::integer("threads", 0, "CPU threads for LibTorch; 0 = all cores").at_least(0),
        P::text("device", "auto", "where to train; auto = cuda when present, else cpu")
            .one_of({"auto", "cpu", "cuda"})}},
      {"model",
       true,
       "the network; type picks a model plugin",
       {P::text("init_from", "",
                "safetensors weights to start from (e.g. GPT-2 in Hugging Face names); "
                "empty = the model's own initialisation")}},
      {"data", true, "where the tokens come from; type picks a data plugin", {}},
      {"train",
       false,
       "the optimisation loop",
       {P::integer("steps", 1000, "optimizer steps to run").at_least(1),
        P::integer("micro_batch", 8, "sequences per forward/backward on each rank").at_least(1),
        P::integer("seq_len", 256, "tokens per sequence").at_least(1),
        P::integer("batch_tokens", 0,
                   "tokens per optimizer step over all ranks and micro-steps; "
                   "0 = micro_batch x seq_len x world_size (no accumulation)")
            .at_least(0),
        P::real("grad_clip", 1.0, "clip the global gradient norm to this; 0 = no clipping")
            .at_least(0),
        P::integer("log_every", 1, "print a console line every N steps (the db gets every step)")
            .at_least(1)
            .unhashed()}},
      {"optimizer", true, "the update rule; type picks an optimizer plugin", {}},
      {"schedule", true, "the learning rate over steps; type picks a schedule plugin", {}},
      {"precision", true, "number formats of compute and weights; type picks a policy", {}},
      {"parallel", true, "how work is spread over processes; type picks a strategy", {}},
      {"eval",
       false,
       "validation during training",
       {P::integer("every", 0, "evaluate every N steps and at the end; 0 = never").at_least(0),
        P::integer("steps", 20, "validation batches per evaluation").at_least(1),
        P::flag("final_test", true,
                "at the end of the run, evaluate the whole test split when the data has one")}},
      {"checkpoint",
       false,
       "snapshots for resuming",
       {P::integer("every", 0, "snapshot every N steps and at the end; 0 = never").at_least(0),
        P::integer("keep", 3, "latest snapshots kept on disk").at_least(1)}},
  };
  return sections;
}

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

bool is_hashed(const std::string& section, const std::string& type, const std::string& key) {
  for (const auto& schema : config_sections()) {
    if (schema.name != section) continue;
    for (const auto& p : schema.params) {
      if (p.name == key) return p.hashed;
    }
    const PluginSpec* plugin = Catalog::global().find(section, type);
    for (const auto& p : plugin ? plugin->params : std::vector<ParamSpec>{}) {
      if (p.name == key) return p.hashed;
    }
  }
  return true;
}

std::string render(const ResolvedConfig& config, bool hashed_only) {
  std::string out;
  for (const auto& section : config.sections) {
    out += "[" + section.name + "]\n";
    if (!section.type.empty()) out += "type = " + format_value(section.type) + "\n";
    for (const auto& [key, value] : section.params.values()) {
      if (hashed_only && !is_hashed(section.name, section.type, key)) continue;
      out += key + " = " + format_value(value) + "\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string ResolvedConfig::to_toml() const {
  return render(*this, false);
}

std::string ResolvedConfig::hash() const {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64: stable across builds and machines
  for (unsigned char c : render(*this, true)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
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
    toml::table parsed;
    try {
      parsed = toml::parse("v = " + text);
    } catch (const toml::parse_error&) {
      parsed = toml::table{{"v", text}};  // not a TOML value: take the text as a bare string
    }
    if (!root.contains(parts[0])) root.insert(parts[0], toml::table{});
    toml::table* section = root.get_as<toml::table>(parts[0]);
    if (!section) fail(at, fmt::format("'{}' is not a section", parts[0]));
    parsed.get("v")->visit([&](auto&& v) { section->insert_or_assign(parts[1], v); });
    override_locations[path] = at;
  }
};

ResolvedConfig load(toml::table root, Loader& loader, const std::vector<std::string>& overrides) {
  for (const auto& o : overrides)
    loader.apply_override(root, o);
  return loader.resolve(root);
}

}  // namespace

ResolvedConfig load_config_text(const std::string& toml_text, const std::string& source_name,
                                const std::vector<std::string>& overrides) {
  Loader loader{source_name, {}};
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    loader.fail(SourceLoc{source_name, static_cast<int64_t>(begin.line),
                          static_cast<int64_t>(begin.column)},
                std::string("TOML syntax error: ") + std::string(e.description()));
  }
  return load(std::move(root), loader, overrides);
}

ResolvedConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
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
