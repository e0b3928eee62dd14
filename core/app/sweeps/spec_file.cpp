#include "core/app/sweeps/spec_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/app/sweeps/file_nodes.h"
#include "core/app/sweeps/search_file.h"
#include "core/config/canonical.h"
#include "core/config/extends.h"
#include "core/config/schema.h"
#include "core/config/toml_text.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

using namespace sweep_file;  // NOLINT: where, toml_text, key_path, put_by_key

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
  spec.file = std::filesystem::absolute(path).string();
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
  if (seeds) sweep_file::put_by_key(spec.grid, std::move(*seeds));
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
