#include "core/config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
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
        P::integer("threads", 0,
                   "CPU threads for LibTorch; 0 = the cores / processes on this machine")
            .at_least(0)
            .at_most(1024),
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
        // Upper bounds far beyond any real batch keep micro_batch x seq_len x world_size (and
        // the token counts derived from it) well inside int64.
        P::integer("micro_batch", 8, "sequences per forward/backward on each rank")
            .at_least(1)
            .at_most(1 << 20),
        P::integer("seq_len", 256, "tokens per sequence").at_least(1).at_most(1 << 24),
        P::integer("batch_tokens", 0,
                   "tokens per optimizer step over all ranks and micro-steps; "
                   "0 = micro_batch x seq_len x world_size (no accumulation)")
            .at_least(0)
            .at_most(static_cast<double>(int64_t{1} << 40)),
        P::real("grad_clip", 1.0, "clip the global gradient norm to this; 0 = no clipping")
            .at_least(0),
        P::integer("log_every", 1, "print a console line every N steps (the db gets every step)")
            .at_least(1)
            .unhashed(),
        P::text("on_nonfinite", "abort",
                "a step whose gradients are inf/NaN is never applied; then: abort = stop the "
                "run (its last snapshot stays the last good one), skip = go on with the next "
                "batch. Both are recorded in the db (metrics.skipped, runs.error)")
            .one_of({"abort", "skip"})
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

std::optional<TomlTextProblem> unsafe_toml_text(const std::string& text) {
  // A small TOML lexer, conservative: a non-ASCII byte passes only where it is surely inside a
  // comment or a string value as toml++ reads them. (Where this lexer and the parser could
  // disagree, as inside a malformed value, the text is outside any string for it.)
  enum class Nesting { kArray, kInlineTable };
  std::vector<Nesting> nesting;
  bool key_next = true;      // a string here would be a key (line start, [header], `{`, `,` in {})
  bool value_start = false;  // a value may start here (after `=`, `[` or `,` in an array)
  int64_t line = 1, column = 1;
  size_t i = 0;
  const size_t n = text.size();
  auto byte = [&](size_t at) { return static_cast<unsigned char>(text[at]); };
  auto step = [&] {
    const unsigned char c = byte(i++);
    if (c == '\n') {
      ++line;
      column = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++column;  // columns count characters: UTF-8 continuation bytes do not move them
    }
  };
  auto problem = [&](const std::string& what) {
    return std::optional<TomlTextProblem>(TomlTextProblem{line, column, what});
  };
  auto blank = [](unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  const std::string outside =
      "a non-ASCII character outside a string or comment: TOML allows them only in those";
  const std::string in_key =
      "a non-ASCII character in a key: Kiln's keys are ASCII (`kiln plugins` lists them)";
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // a UTF-8 byte order mark
  while (i < n) {
    const unsigned char c = byte(i);
    if (c >= 0x80) return problem(outside);
    if (c == '#') {
      while (i < n && byte(i) != '\n')
        step();
      continue;
    }
    if ((c == '"' || c == '\'') && (key_next || value_start)) {
      const bool key = key_next, basic = c == '"';
      value_start = false;
      const std::string triple(3, static_cast<char>(c));
      if (text.compare(i, 3, triple) == 0) {
        for (int k = 0; k < 3; ++k)
          step();
        while (i < n) {
          const unsigned char d = byte(i);
          if (d >= 0x80 && key) return problem(in_key);
          if (basic && d == '\\') {
            step();
            if (i >= n) break;
            if (byte(i) >= 0x80) {
              return problem("a non-ASCII character right after a backslash: write it as \\uXXXX");
            }
            if (blank(byte(i))) {
              // A line-ending backslash: the whitespace and line breaks after it are trimmed.
              while (i < n && blank(byte(i)))
                step();
              if (i < n && byte(i) >= 0x80) {
                return problem(
                    "a non-ASCII character first after a line-ending backslash in a \"\"\" "
                    "string: write it as \\uXXXX, or begin the line with an ASCII character");
              }
              continue;
            }
            step();  // the escaped character
            continue;
          }
          if (text.compare(i, 3, triple) == 0) {
            while (i < n && byte(i) == c)  // up to two quotes more belong to the string
              step();
            break;
          }
          step();
        }
      } else {
        step();
        while (i < n && byte(i) != '\n') {
          const unsigned char d = byte(i);
          if (d >= 0x80 && key) return problem(in_key);
          step();
          if (basic && d == '\\') {
            if (i < n && byte(i) != '\n') {
              if (byte(i) >= 0x80 && key) return problem(in_key);
              step();  // the escaped character
            }
            continue;
          }
          if (d == c) break;
        }
      }
      continue;
    }
    if (!blank(c)) value_start = false;
    if (c == '\n') {
      if (nesting.empty()) {
        key_next = true;
      } else if (nesting.back() == Nesting::kArray) {
        value_start = true;  // arrays span lines; a value may follow (or `,`, `]`)
      }
    } else if (c == '=' && key_next) {
      key_next = false;
      value_start = true;
    } else if (c == '[' && !key_next) {
      nesting.push_back(Nesting::kArray);  // (`[` where a key goes opens a [table] header)
      value_start = true;
    } else if (c == ']') {
      if (!nesting.empty() && nesting.back() == Nesting::kArray) nesting.pop_back();
    } else if (c == '{' && !key_next) {
      nesting.push_back(Nesting::kInlineTable);
      key_next = true;
    } else if (c == '}') {
      if (!nesting.empty() && nesting.back() == Nesting::kInlineTable) {
        nesting.pop_back();
        key_next = false;
      }
    } else if (c == ',' && !nesting.empty()) {
      key_next = nesting.back() == Nesting::kInlineTable;
      value_start = !key_next;
    }
    step();
  }
  return std::nullopt;
}

namespace {

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

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
      if (unsafe_toml_text("v = " + text)) throw std::invalid_argument("not a TOML value");
      parsed = toml::parse("v = " + text);
    } catch (const std::exception&) {  // toml::parse_error, or the above
      // Not a TOML value: the text as a bare string. It goes into the run's canonical TOML,
      // which must load again: so it must be UTF-8.
      if (!valid_utf8(text)) {
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
  if (auto problem = unsafe_toml_text(toml_text)) {
    loader.fail(SourceLoc{source_name, problem->line, problem->column},
                "TOML syntax error: " + problem->what);
  }
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
