// Experiment config: a TOML file plus `--set section.key=value` overrides, validated against
// the sections core declares and the parameters each chosen plugin declares, then resolved
// (every default filled in). Nothing is silently accepted: an unknown key, a wrong type or an
// out-of-range value is a UserError naming file:line:col, the key path and, for a typo, the
// nearest valid key.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/params.h"

namespace kiln {

// The config sections in the order a resolved config lists them. A plugin section's `type`
// picks a plugin of the same kind as the section's name.
struct SectionSchema {
  std::string name;
  bool is_plugin = false;
  std::string doc;
  // A core section's keys; for a plugin section, keys every plugin of the kind takes besides
  // its own (e.g. model.init_from).
  std::vector<ParamSpec> params;
};
const std::vector<SectionSchema>& config_sections();

// Where a value came from, for error messages raised after validation too.
struct SourceLoc {
  std::string file;  // experiment path, or "--set key=value" for an override
  int64_t line = 0;
  int64_t column = 0;
  std::string str() const;
};

struct Section {
  std::string name;
  std::string type;  // chosen plugin; empty for core sections
  Params params;
};

class ResolvedConfig {
 public:
  std::string experiment;  // the file it was loaded from (or "<db>" when rebuilt from a run)
  std::vector<Section> sections;
  std::map<std::string, SourceLoc> locations;  // "train.steps" -> where it was written

  const Section& section(const std::string& name) const;
  const Params& params(const std::string& name) const { return section(name).params; }
  const std::string& type(const std::string& name) const { return section(name).type; }
  SourceLoc where(const std::string& key_path) const;

  // Canonical TOML: sections in schema order, `type` first, keys sorted. Reloading it gives the
  // same config, and the same text, whatever the layout of the original file.
  std::string to_toml() const;
  // 16 hex digits of FNV-1a over the canonical text of the keys that can change the numbers
  // (run.name, run.out_dir, run.db are left out), so reruns of one experiment share a hash.
  std::string hash() const;
};

ResolvedConfig load_config(const std::string& path, const std::vector<std::string>& overrides);

// Checked before any TOML text reaches the parser: toml++ 3.3.0 (Debian 12's) reaches a
// __builtin_unreachable() when it meets some non-ASCII characters where it expects whitespace
// or a key (outside strings and comments, in quoted keys, after a line-ending backslash in a
// """ string; upstream issues 190 and 295). Such characters are never valid there, or (the
// last) vanishingly rare, so they are refused with their position. Nothing when `text` is safe.
struct TomlTextProblem {
  int64_t line = 0;
  int64_t column = 0;
  std::string what;
};
std::optional<TomlTextProblem> unsafe_toml_text(const std::string& text);
ResolvedConfig load_config_text(const std::string& toml_text, const std::string& source_name,
                                const std::vector<std::string>& overrides);

}  // namespace kiln
