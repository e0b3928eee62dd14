// What reading a sweep file's nodes needs in every part of it (core/app/sweeps/spec_file.cpp,
// core/app/sweeps/search_file.cpp): a node's place for errors, a value as --set takes it, the
// dotted key of a nested table's entry, and replacing an earlier file's item of the same key.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/config/canonical.h"
#include "core/config/toml_text.h"
#include "core/util/error.h"

namespace kiln::sweep_file {

// file:line:col of a node, in the file of the chain it was read from.
inline std::string where(const toml::source_region& region) {
  return fmt::format("{}:{}:{}", region.path ? *region.path : std::string("<sweep>"),
                     region.begin.line, region.begin.column);
}

// A TOML value as --set takes it, in canonical form (format_value): strings keep their quotes,
// so "1e-3" stays a string, and a float is its shortest exact text (3e-3 -> 0.003).
inline std::string toml_text(const toml::node& node) {
  const std::optional<ParamValue> value = scalar_value(node);
  if (!value) {
    throw UserError(fmt::format("{}: a sweep value must be a number, a string or a boolean",
                                where(node.source())));
  }
  return format_value(*value);
}

inline std::string key_path(const std::string& prefix, const toml::key& key) {
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

}  // namespace kiln::sweep_file
