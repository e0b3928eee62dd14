// Reading sweep files (the format is in core/app/sweeps/spec.h): each file of an `extends` chain
// checked and laid over the ones before it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/app/sweeps/spec.h"
#include "core/config/canonical.h"
#include "core/config/extends.h"
#include "core/config/schema.h"
#include "core/config/toml_text.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// file:line:col of a node, in the file of the chain it was read from.
std::string where(const toml::source_region& region) {
  return fmt::format("{}:{}:{}", region.path ? *region.path : std::string("<sweep>"),
                     region.begin.line, region.begin.column);
}

// A TOML value as --set takes it, in canonical form (format_value): strings keep their quotes,
// so "1e-3" stays a string, and a float is its shortest exact text (3e-3 -> 0.003).
std::string toml_text(const toml::node& node) {
  const std::optional<ParamValue> value = scalar_value(node);
  if (!value) {
    throw UserError(fmt::format("{}: a sweep value must be a number, a string or a boolean",
                                where(node.source())));
  }
  return format_value(*value);
}

std::string key_path(const std::string& prefix, const toml::key& key) {
  return prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
}

// `item` (an axis, a distribution) in place of the item of its key, or after the others.
template <class Item>
void put_by_key(std::vector<Item>& items, Item item) {
  auto same =
      std::find_if(items.begin(), items.end(), [&](const Item& i) { return i.key == item.key; });
  if (same == items.end()) same = items.insert(items.end(), Item{});
  *same = std::move(item);
}

// [grid] optimizer.lr = [...] parses as grid.optimizer.lr: flattened back to "optimizer.lr".
void read_axes(const toml::table& table, const std::string& prefix, std::vector<SweepAxis>& out) {
  for (auto&& [key, node] : table) {
    const std::string path = key_path(prefix, key);
    if (const auto* nested = node.as_table()) {
      read_axes(*nested, path, out);
      continue;
    }
    const auto* list = node.as_array();
    if (!list || list->empty()) {
      throw UserError(
          fmt::format("{}: '{}' must be a non-empty list of values, e.g. {} = [1e-3, 3e-3]",
                      where(node.source()), path, path));
    }
    SweepAxis axis{path, {}};
    for (const auto& element : *list) {
      if (element.is_table() || element.is_array()) {
        throw UserError(fmt::format("{}: the values of '{}' must be numbers, strings or booleans",
                                    where(element.source()), path));
      }
      axis.values.push_back(toml_text(element));
    }
    put_by_key(out, std::move(axis));
  }
}

// section.key=value assignments of `table` ([set], or a [[variant]]'s keys) into `out`, each in
// place of an earlier assignment of its key.
void read_assignments(const toml::table& table, const std::string& prefix, const std::string& what,
                      std::vector<std::string>& out) {
  for (auto&& [key, node] : table) {
    const std::string path = key_path(prefix, key);
    if (const auto* nested = node.as_table()) {
      read_assignments(*nested, path, what, out);
      continue;
    }
    if (node.is_array()) {
      throw UserError(fmt::format("{}: {} takes single values; put lists of '{}' under [grid]",
                                  where(node.source()), what, path));
    }
    const std::string assignment = path + "=" + toml_text(node);
    auto same = std::find_if(out.begin(), out.end(), [&](const std::string& a) {
      return a.compare(0, path.size() + 1, path + "=") == 0;
    });
    if (same != out.end()) {
      *same = assignment;
    } else {
      out.push_back(assignment);
    }
  }
}

// `variant = [...]`: a non-empty list of tables, each of section.key = value lines and an
// optional name.
std::vector<SweepVariant> read_variants(const toml::node& node) {
  const auto* list = node.as_array();
  if (!list || list->empty()) {
    throw UserError(fmt::format(
        "{}: 'variant' must be a non-empty list of tables: [[variant]] lines, each followed by "
        "the keys it sets, e.g. optimizer.type = \"lion\"",
        where(node.source())));
  }
  std::vector<SweepVariant> variants;
  for (const auto& element : *list) {
    const auto* table = element.as_table();
    if (!table) {
      throw UserError(
          fmt::format("{}: each variant must be a table: write [[variant]] and the "
                      "keys it sets below it",
                      where(element.source())));
    }
    SweepVariant variant{"", {}, where(element.source())};
    for (auto&& [key, value] : *table) {
      if (key.str() == "name") {
        if (!value.is_string()) {
          throw UserError(
              fmt::format("{}: a variant's 'name' must be a string, e.g. name = "
                          "\"lion\"",
                          where(value.source())));
        }
        variant.name = value.as_string()->get();
      } else if (const auto* section = value.as_table()) {
        read_assignments(*section, std::string(key.str()), "[[variant]]", variant.overrides);
      } else {
        throw UserError(fmt::format(
            "{}: '{}' is not section.key: a variant sets config keys, e.g. optimizer.lr = 1e-3 "
            "(and may have a name)",
            where(key.source()), key.str()));
      }
    }
    if (variant.overrides.empty()) {
      throw UserError(
          fmt::format("{}: this [[variant]] sets nothing: give it the keys it "
                      "varies, e.g. optimizer.type = \"lion\"",
                      variant.where));
    }
    variants.push_back(std::move(variant));
  }
  return variants;
}

const std::vector<std::string>& distribution_names() {
  static const std::vector<std::string> names = {"log_uniform", "uniform", "int_uniform", "choice"};
  return names;
}

// `[low, high]` of a numeric distribution: two numbers (integers for int_uniform), low <= high,
// and low > 0 for log_uniform.
void read_bounds(const toml::node& node, const std::string& path, SweepDistribution& out) {
  const auto* list = node.as_array();
  const bool whole = out.kind == SweepDistribution::Kind::kIntUniform;
  const auto number = [&](const toml::node& n) { return whole ? n.is_integer() : n.is_number(); };
  if (!list || list->size() != 2 || !number(*list->get(0)) || !number(*list->get(1))) {
    throw UserError(fmt::format("{}: '{}' takes [low, high], two {}", where(node.source()), path,
                                whole ? "integers" : "numbers"));
  }
  out.low = list->get(0)->value_or(0.0);
  out.high = list->get(1)->value_or(0.0);
  if (out.low > out.high) {
    throw UserError(fmt::format("{}: '{}' has low {} above high {}: write [low, high]",
                                where(node.source()), path, format_value(out.low),
                                format_value(out.high)));
  }
  if (out.kind == SweepDistribution::Kind::kLogUniform && out.low <= 0) {
    throw UserError(fmt::format(
        "{}: '{}' is log-uniform, so its bounds must be above 0 (it has {}): use uniform for a "
        "range that reaches 0",
        where(node.source()), path, format_value(out.low)));
  }
}

// One [space] key: `{ log_uniform = [a, b] }`, `{ uniform = [a, b] }`, `{ int_uniform = [a, b] }`
// or `{ choice = [...] }`.
SweepDistribution read_distribution(const toml::node& node, const std::string& path) {
  const auto* table = node.as_table();
  const std::string forms =
      "{ log_uniform = [low, high] }, { uniform = [low, high] }, { int_uniform = [low, high] } or "
      "{ choice = [...] }";
  if (!table || table->size() != 1) {
    throw UserError(
        fmt::format("{}: '{}' must be one distribution: {}", where(node.source()), path, forms));
  }
  const toml::key& name = table->cbegin()->first;
  const toml::node& value = table->cbegin()->second;
  SweepDistribution out{path, SweepDistribution::Kind::kUniform, 0, 0, {}, where(node.source())};
  const std::string kind(name.str());
  if (kind == "choice") {
    out.kind = SweepDistribution::Kind::kChoice;
    const auto* list = value.as_array();
    if (!list || list->empty()) {
      throw UserError(fmt::format("{}: '{}' choice must be a non-empty list of values",
                                  where(value.source()), path));
    }
    for (const auto& element : *list)
      out.choices.push_back(toml_text(element));
    return out;
  }
  if (kind == "log_uniform") {
    out.kind = SweepDistribution::Kind::kLogUniform;
  } else if (kind == "int_uniform") {
    out.kind = SweepDistribution::Kind::kIntUniform;
  } else if (kind != "uniform") {
    const std::string hint = nearest(kind, distribution_names());
    throw UserError(fmt::format("{}: '{}' is not a distribution{}: use {}", where(name.source()),
                                kind, hint.empty() ? "" : " (did you mean '" + hint + "'?)",
                                forms));
  }
  read_bounds(value, path, out);
  return out;
}

// [space] optimizer.lr = { ... } parses as space.optimizer.lr: section tables (and a family's
// entries, data.sources.web: tables of tables), then the distribution of each key.
void read_space(const toml::table& table, const std::string& prefix,
                std::vector<SweepDistribution>& out) {
  for (auto&& [key, node] : table) {
    const std::string path = key_path(prefix, key);
    const auto* section = node.as_table();
    const bool level = section && !section->empty() &&
                       std::all_of(section->begin(), section->end(),
                                   [](auto&& kv) { return kv.second.is_table(); });
    if (prefix.empty() || level) {
      const auto is_distribution = [&](const std::string& name) { return section->contains(name); };
      if (!section ||
          std::any_of(distribution_names().begin(), distribution_names().end(), is_distribution)) {
        throw UserError(
            fmt::format("{}: '{}' is not section.key: [space] gives distributions "
                        "of config keys, e.g. optimizer.lr = {{ log_uniform = "
                        "[1e-4, 3e-2] }}",
                        where(node.source()), path));
      }
      read_space(*section, path, out);
      continue;
    }
    put_by_key(out, read_distribution(node, path));
  }
}

// [search]: type = "grid" | "random" | "tpe", trials, seed, startup; each key replaces an
// earlier file's.
void read_search(const toml::table& table, SweepSearch& out) {
  out.where = where(table.source());
  static const std::vector<std::string> keys = {"type",    "trials", "seed",
                                                "startup", "metric", "mode"};
  static const std::vector<std::string> types = {"grid", "random", "tpe"};
  for (auto&& [key, node] : table) {
    const std::string k(key.str());
    if (k == "type") {
      const std::string type = node.value_or(std::string());
      const auto known = std::find(types.begin(), types.end(), type);
      if (known == types.end()) {
        throw UserError(fmt::format(
            "{}: search type '{}' is not one this Kiln runs: use grid, random or tpe{}",
            where(node.source()), type, type == "asha" ? " (asha is not built yet)" : ""));
      }
      out.type = static_cast<SweepSearch::Type>(known - types.begin());
    } else if (k == "metric" || k == "mode") {
      const std::string text = node.value_or(std::string());
      if (k == "metric" ? text.empty() : text != "min" && text != "max") {
        throw UserError(fmt::format("{}: {}", where(node.source()),
                                    k == "metric" ? "metric must be a metric's name: \"val_loss\""
                                                  : "mode must be \"min\" or \"max\""));
      }
      if (k == "mode") out.maximize = text == "max";
      if (k == "metric")
        std::tie(out.metric, out.metric_where) = std::pair(text, where(node.source()));
    } else if (k == "trials" || k == "seed" || k == "startup") {
      const auto value = node.value<int64_t>();
      const int64_t least = k == "seed" ? 0 : 1;
      if (!node.is_integer() || !value || *value < least) {
        throw UserError(fmt::format("{}: {} must be a whole number, at least {}",
                                    where(node.source()), k, least));
      }
      int64_t* target = k == "seed" ? &out.seed : &out.trials;
      *(k == "startup" ? &out.startup : target) = *value;
    } else {
      const std::string hint = nearest(k, keys);
      throw UserError(fmt::format(
          "{}: unknown [search] key '{}': {}", where(key.source()), k,
          hint.empty() ? "[search] takes " + join(keys, ", ") : "did you mean '" + hint + "'?"));
    }
  }
}

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

const std::vector<std::string>& sweep_keys() {
  static const std::vector<std::string> keys = {"base", "name",    "seeds",  "grid", "zip",
                                                "set",  "variant", "search", "space"};
  return keys;
}

// Each top-level key is one a sweep file takes, with the type it takes.
void check_top_level_keys(const toml::table& root) {
  for (auto&& [key, node] : root) {
    const std::string k(key.str());
    if (std::find(sweep_keys().begin(), sweep_keys().end(), k) == sweep_keys().end()) {
      std::string hint = nearest(k, sweep_keys());
      throw UserError(fmt::format("{}: unknown sweep key '{}': {}", where(key.source()), k,
                                  hint.empty() ? "a sweep file takes " + join(sweep_keys(), ", ")
                                               : "did you mean '" + hint + "'?"));
    }
    if (k == "variant") continue;  // read_variants says what it takes
    const bool table_key = k == "grid" || k == "zip" || k == "set" || k == "search" || k == "space";
    const bool ok =
        table_key ? node.is_table() : (k == "seeds" ? node.is_array() : node.is_string());
    if (!ok) {
      throw UserError(fmt::format("{}: '{}' must be {}", where(node.source()), k,
                                  table_key ? "a table ([" + k + "])"
                                            : (k == "seeds" ? "a list of integers" : "a string")));
    }
  }
}

// An experiment file named by `extends`: its place is `base = ...`.
std::string refuse_experiment_file(const toml::table& root) {
  for (const auto& section : config_sections()) {
    if (root.contains(section.name)) {
      return fmt::format(
          "is an experiment file (it has [{}]), not a sweep file: name the experiment with "
          "base = \"...\"",
          section.name);
    }
  }
  return "";
}

// One file of the chain over what the files before it gave.
void apply_layer(const toml::table& root, SweepSpec& spec, std::optional<SweepAxis>& seeds) {
  check_top_level_keys(root);
  if (auto base = root["base"].value<std::string>()) spec.base = *base;
  if (auto name = root["name"].value<std::string>()) spec.name = *name;
  if (auto* grid = root["grid"].as_table()) read_axes(*grid, "", spec.grid);
  if (auto* zip = root["zip"].as_table()) read_axes(*zip, "", spec.zip);
  if (auto* fixed = root["set"].as_table()) read_assignments(*fixed, "", "[set]", spec.fixed);
  if (const toml::node* variants = root.get("variant")) spec.variants = read_variants(*variants);
  if (auto* search = root["search"].as_table()) read_search(*search, spec.search);
  if (auto* space = root["space"].as_table()) read_space(*space, "", spec.space);
  if (auto* list = root["seeds"].as_array()) {
    seeds = SweepAxis{"run.seed", {}};
    for (const auto& s : *list) {
      if (!s.is_integer()) {
        throw UserError(fmt::format("{}: seeds must be integers", where(s.source())));
      }
      seeds->values.push_back(toml_text(s));
    }
  }
}

}  // namespace

SweepSpec load_sweep_file(const std::string& path) {
  const std::optional<std::string> text = read_text(path);
  if (!text) throw UserError(fmt::format("cannot read sweep file '{}': check the path", path));
  SweepSpec spec;
  spec.name = std::filesystem::path(path).stem().string();
  std::optional<SweepAxis> seeds;
  for (const TomlLayer& layer :
       read_extends_chain(path, *text, "a sweep file", refuse_experiment_file)) {
    apply_layer(layer.root, spec, seeds);
  }
  if (spec.base.empty()) {
    throw UserError(
        fmt::format("{}: a sweep file needs base = \"experiments/....toml\", the "
                    "experiment its members start from",
                    path));
  }
  // Seeds vary fastest, after the grid's own axes.
  if (seeds) put_by_key(spec.grid, std::move(*seeds));
  return spec;
}

bool is_sweep_file(const std::string& path) {
  const std::optional<std::string> text = read_text(path);
  // Unreadable, unsafe or malformed text: the experiment loader reports it, with its position.
  if (!text) return false;
  const std::optional<toml::table> root = try_parse_toml(*text);
  if (!root) return false;
  return std::any_of(sweep_keys().begin(), sweep_keys().end(),
                     [&](const std::string& key) { return key != "name" && root->contains(key); });
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

}  // namespace kiln
