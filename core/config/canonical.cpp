#include "core/config/canonical.h"

#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "core/config/registry.h"
#include "core/config/resolved_config.h"
#include "core/config/schema.h"
#include "core/config/toml_text.h"
#include "core/util/counter_hash.h"

namespace kiln {

std::string quote_toml(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {  // TOML escapes DEL too
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

namespace {

// Shortest text that reads back to the same double, always recognisable as a TOML float.
std::string format_float(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string format_value(const ParamValue& value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return format_float(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return quote_toml(v); }
  };
  return std::visit(Visitor{}, value);
}

FlatConfig flatten_config(const std::string& toml_text) {
  FlatConfig out;
  const std::optional<toml::table> root = try_parse_toml(toml_text);
  if (!root) return out;
  // Keys of nested tables (a family's entries, core/config/params.h) as section.family.NAME.KEY.
  std::function<void(const toml::table&, const std::string&)> add = [&](const toml::table& table,
                                                                        const std::string& prefix) {
    for (const auto& [key, value] : table) {
      const std::string name = prefix + std::string(key.str());
      if (const toml::table* inner = value.as_table()) {
        add(*inner, name + ".");
      } else if (auto v = scalar_value(value)) {
        out[name] = format_value(*v);
      }
    }
  };
  for (const auto& [section, node] : *root) {
    if (const toml::table* table = node.as_table()) add(*table, std::string(section.str()) + ".");
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<std::string>>> differing_keys(
    const std::vector<FlatConfig>& configs) {
  std::set<std::string> keys;
  for (const auto& config : configs) {
    for (const auto& entry : config)
      keys.insert(entry.first);
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& key : keys) {
    if (key == "run.name") continue;
    std::vector<std::string> values;
    for (const auto& config : configs)
      values.push_back(config.count(key) ? config.at(key) : "-");
    if (std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) != values.end()) {
      out.emplace_back(key, std::move(values));
    }
  }
  return out;
}

bool is_hashed_key(const std::string& section, const std::string& type, const std::string& key) {
  const ParamSpec* spec = declared_param(section, type, key);
  return !spec || spec->hashed;
}

namespace {

// Whether the hash reads `key`'s value: a hashed key, unless it is a key added later that is at
// its default.
bool hashes_value(const Section& section, const std::string& key, const ParamValue& value) {
  const ParamSpec* spec = declared_param(section.name, section.type, key);
  if (!spec) return true;
  return spec->hashed && !(spec->hashed_when_set && value == spec->default_value);
}

// A section added later, at its kind's default plugin: as if the config had no such section.
bool is_absent_section(const Section& section) {
  for (const auto& schema : config_sections()) {
    if (schema.name != section.name) continue;
    const PluginSpec* fallback = Catalog::global().default_for(section.name);
    return schema.added_later && fallback && fallback->name == section.type;
  }
  return false;
}

std::string render(const ResolvedConfig& config, bool hashed_only) {
  std::string out;
  for (const auto& section : config.sections) {
    std::string keys;
    for (const auto& [key, value] : section.params.values()) {
      if (hashed_only && !hashes_value(section, key, value)) continue;
      keys += key + " = " + format_value(value) + "\n";
    }
    // A section of unhashed keys only ([metrics]) leaves every hash as it was before the
    // section existed.
    if (hashed_only && section.type.empty() && keys.empty()) continue;
    if (hashed_only && keys.empty() && is_absent_section(section)) continue;
    out += "[" + section.name + "]\n";
    if (!section.type.empty()) out += "type = " + format_value(section.type) + "\n";
    out += keys + "\n";
  }
  return out;
}

}  // namespace

std::string ResolvedConfig::to_toml() const {
  return render(*this, false);
}

FlatConfig ResolvedConfig::flat() const {
  FlatConfig out;
  for (const auto& section : sections) {
    if (!section.type.empty()) out[section.name + ".type"] = format_value(section.type);
    for (const auto& [key, value] : section.params.values())
      out[section.name + "." + key] = format_value(value);
  }
  return out;
}

std::string ResolvedConfig::hash() const {
  return fmt::format("{:016x}", fnv1a64(render(*this, true)));
}

}  // namespace kiln
