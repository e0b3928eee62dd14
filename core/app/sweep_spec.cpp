#include "core/app/sweep_spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/config/canonical.h"
#include "core/config/config.h"
#include "core/config/toml_text.h"
#include "core/store/run_paths.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

std::string where(const std::string& file, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", file, region.begin.line, region.begin.column);
}

// A TOML value as --set takes it, in canonical form (format_value): strings keep their quotes,
// so "1e-3" stays a string, and a float is its shortest exact text (3e-3 -> 0.003).
std::string toml_text(const std::string& file, const toml::node& node) {
  const std::optional<ParamValue> value = scalar_value(node);
  if (!value) {
    throw UserError(fmt::format("{}: a sweep value must be a number, a string or a boolean",
                                where(file, node.source())));
  }
  return format_value(*value);
}

// The label of a value in a member's name: strings without their quotes.
std::string label_of(const std::string& value_text) {
  if (value_text.size() >= 2 && value_text.front() == '"' && value_text.back() == '"') {
    return value_text.substr(1, value_text.size() - 2);
  }
  return value_text;
}

// [grid] optimizer.lr = [...] parses as grid.optimizer.lr: flattened back to "optimizer.lr".
void flatten_axes(const std::string& file, const toml::table& table, const std::string& prefix,
                  std::vector<SweepAxis>& out) {
  for (auto&& [key, node] : table) {
    const std::string path =
        prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const auto* nested = node.as_table()) {
      flatten_axes(file, *nested, path, out);
      continue;
    }
    const auto* list = node.as_array();
    if (!list || list->empty()) {
      throw UserError(
          fmt::format("{}: '{}' must be a non-empty list of values, e.g. {} = [1e-3, "
                      "3e-3]",
                      where(file, node.source()), path, path));
    }
    SweepAxis axis{path, {}};
    for (const auto& element : *list) {
      if (element.is_table() || element.is_array()) {
        throw UserError(fmt::format("{}: the values of '{}' must be numbers, strings or booleans",
                                    where(file, element.source()), path));
      }
      axis.values.push_back(toml_text(file, element));
    }
    out.push_back(std::move(axis));
  }
}

void add_fixed(const std::string& file, const toml::table& table, const std::string& prefix,
               std::vector<std::string>& out) {
  for (auto&& [key, node] : table) {
    const std::string path =
        prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const auto* nested = node.as_table()) {
      add_fixed(file, *nested, path, out);
    } else if (node.is_array()) {
      throw UserError(fmt::format("{}: [set] takes single values; put lists of '{}' under [grid]",
                                  where(file, node.source()), path));
    } else {
      out.push_back(path + "=" + toml_text(file, node));
    }
  }
}

// Members are runs named <sweep>/<key=value,...>: the rule of `kiln run`'s names
// (core/store/run_paths.h), checked before any member starts rather than by each member's process.
void check_name(const std::string& what, const std::string& name) {
  check_run_name(name, fmt::format("it is the {}: rename the sweep (name = \"...\" or --name) or "
                                   "vary other values",
                                   what));
}

// Far more runs than anyone sweeps by hand: a grid this big is a mistake, and expanding it would
// take the machine's memory before the first member starts.
constexpr size_t kMaxMembers = 10000;

// The file's text, or nothing when it cannot be read.
std::optional<std::string> read_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Each top-level key is one a sweep file takes, with the type it takes.
void check_top_level_keys(const std::string& path, const toml::table& root) {
  const std::vector<std::string> keys = {"base", "name", "seeds", "grid", "zip", "set"};
  for (auto&& [key, node] : root) {
    const std::string k(key.str());
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      std::string hint = nearest(k, keys);
      throw UserError(fmt::format("{}: unknown sweep key '{}': {}", where(path, key.source()), k,
                                  hint.empty() ? "a sweep file takes " + join(keys, ", ")
                                               : "did you mean '" + hint + "'?"));
    }
    const bool table_key = k == "grid" || k == "zip" || k == "set";
    const bool ok =
        table_key ? node.is_table() : (k == "seeds" ? node.is_array() : node.is_string());
    if (!ok) {
      throw UserError(fmt::format("{}: '{}' must be {}", where(path, node.source()), k,
                                  table_key ? "a table ([" + k + "])"
                                            : (k == "seeds" ? "a list of integers" : "a string")));
    }
  }
}

}  // namespace

SweepSpec load_sweep_file(const std::string& path) {
  const std::optional<std::string> text = read_text(path);
  if (!text) throw UserError(fmt::format("cannot read sweep file '{}': check the path", path));
  const toml::table root = parse_toml(*text, path);
  check_top_level_keys(path, root);
  if (!root.contains("base")) {
    throw UserError(
        fmt::format("{}: a sweep file needs base = \"experiments/....toml\", the "
                    "experiment its members start from",
                    path));
  }
  SweepSpec spec;
  spec.base = root["base"].value<std::string>().value_or("");
  spec.name =
      root["name"].value<std::string>().value_or(std::filesystem::path(path).stem().string());
  if (auto* grid = root["grid"].as_table()) flatten_axes(path, *grid, "", spec.grid);
  if (auto* zip = root["zip"].as_table()) flatten_axes(path, *zip, "", spec.zip);
  if (auto* fixed = root["set"].as_table()) add_fixed(path, *fixed, "", spec.fixed);
  if (auto* seeds = root["seeds"].as_array()) {
    SweepAxis axis{"run.seed", {}};
    for (const auto& s : *seeds) {
      if (!s.is_integer()) {
        throw UserError(fmt::format("{}: seeds must be integers", where(path, s.source())));
      }
      axis.values.push_back(toml_text(path, s));
    }
    spec.grid.push_back(std::move(axis));
  }
  return spec;
}

bool is_sweep_file(const std::string& path) {
  const std::optional<std::string> text = read_text(path);
  // Unreadable, unsafe or malformed text: the experiment loader reports it, with its position.
  if (!text) return false;
  const std::optional<toml::table> root = try_parse_toml(*text);
  return root && root->contains("base");
}

SweepAxis parse_axis(const std::string& argument) {
  auto eq = argument.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == argument.size()) {
    throw UserError(
        fmt::format("'{}' is not section.key=v1,v2,...: e.g. --grid "
                    "optimizer.lr=1e-3,3e-3",
                    argument));
  }
  return SweepAxis{argument.substr(0, eq), split(argument.substr(eq + 1), ',')};
}

namespace {

// One key=value per axis: a member's values, in axis order.
using Combination = std::vector<std::pair<std::string, std::string>>;

// The [zip] lists line up, and the product is not absurd (checked before it is expanded).
void check_shape(const SweepSpec& spec) {
  if (spec.grid.empty() && spec.zip.empty()) {
    throw UserError("the sweep varies nothing: give [grid], [zip] or seeds (or --grid/--zip)");
  }
  for (const auto& axis : spec.zip) {
    if (axis.values.size() != spec.zip.front().values.size()) {
      throw UserError(fmt::format(
          "[zip] lists must have equal lengths: '{}' has {} values, '{}' "
          "has {}",
          spec.zip.front().key, spec.zip.front().values.size(), axis.key, axis.values.size()));
    }
  }
  double count = spec.zip.empty() ? 1.0 : static_cast<double>(spec.zip.front().values.size());
  for (const auto& axis : spec.grid)
    count *= static_cast<double>(axis.values.size());
  if (count > static_cast<double>(kMaxMembers)) {
    throw UserError(fmt::format(
        "the sweep would have {:.0f} members, more than the {} a sweep may have: vary fewer keys "
        "or fewer values",
        count, kMaxMembers));
  }
}

// Each combination: one value per grid axis (odometer order), then one zip position.
std::vector<Combination> combinations(const SweepSpec& spec) {
  std::vector<Combination> combos = {{}};
  for (const auto& axis : spec.grid) {
    std::vector<Combination> next;
    for (const auto& combo : combos) {
      for (const auto& value : axis.values) {
        auto extended = combo;
        extended.emplace_back(axis.key, value);
        next.push_back(std::move(extended));
      }
    }
    combos = std::move(next);
  }
  if (spec.zip.empty()) return combos;
  std::vector<Combination> next;
  for (const auto& combo : combos) {
    for (size_t i = 0; i < spec.zip.front().values.size(); ++i) {
      auto extended = combo;
      for (const auto& axis : spec.zip)
        extended.emplace_back(axis.key, axis.values[i]);
      next.push_back(std::move(extended));
    }
  }
  return next;
}

}  // namespace

std::vector<SweepMember> expand_sweep(const SweepSpec& spec) {
  // The base first: a mistake in it (a syntax error, say) is the one to report.
  load_config(spec.base, spec.fixed);
  check_name("sweep name", spec.name);
  check_shape(spec);
  std::vector<SweepMember> members;
  for (const auto& combo : combinations(spec)) {
    SweepMember member{"", spec.fixed};
    std::vector<std::string> labels;
    for (const auto& [key, value] : combo) {
      member.overrides.push_back(key + "=" + value);
      labels.push_back(key + "=" + label_of(value));
    }
    member.name = spec.name + "/" + join(labels, ",");
    check_name("sweep member name", member.name);
    // Every member's config is checked now, so a typo stops the sweep before anything runs.
    load_config(spec.base, member.overrides);
    members.push_back(std::move(member));
  }
  return members;
}

}  // namespace kiln
