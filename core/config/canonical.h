// The canonical text of config values, the one way Kiln writes them: a resolved config's TOML
// (ResolvedConfig::to_toml, resolved_config.h) and flat map (ResolvedConfig::flat), the values
// `kiln plugins` and error messages show, the `--set` values a sweep writes, a stored config
// flattened for `kiln runs`, and the keys in which configs differ.
// Strings are quoted and escaped as TOML basic strings; floats are the shortest text that reads
// back to the same double and always reads as a float. No toml++ here: callers that only format
// a value stay light.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/config/params.h"

namespace kiln {

// A config as "section.key" -> its value as format_value writes it.
using FlatConfig = std::map<std::string, std::string>;

// `s` as a TOML basic string: quoted, with `"`, `\` and every control character escaped, so
// that any name or path reads back as the same string (never as a number or a boolean).
std::string quote_toml(const std::string& s);

// A value as canonical TOML writes it: 3, 0.003, 1.0, true, "adamw".
std::string format_value(const ParamValue& value);

// Whether `section.key` takes part in the config hash (`type` names the section's plugin): false
// for the keys that name or place a run (run.name, run.out_dir, ...) but cannot change its
// numbers.
bool is_hashed_key(const std::string& section, const std::string& type, const std::string& key);

// A config's TOML text flattened: "optimizer.lr" -> "0.003", "optimizer.type" -> "\"adamw\"",
// every value in the form format_value gives it. Only section.key pairs with a number, boolean
// or string value are kept (the only kind Kiln writes); text that is not TOML (a run store
// edited by hand) gives an empty map.
FlatConfig flatten_config(const std::string& toml_text);

// The keys whose values are not the same in every config (run.name left out: it labels a run),
// in key order, each with every config's value: "-" where a config lacks the key.
std::vector<std::pair<std::string, std::vector<std::string>>> differing_keys(
    const std::vector<FlatConfig>& configs);

}  // namespace kiln
