// Experiment config: a TOML file plus `--set section.key=value` overrides, validated against
// the sections core declares and the parameters each chosen plugin declares, then resolved
// (every default filled in). Nothing is silently accepted: an unknown key, a wrong type or an
// out-of-range value is a UserError naming file:line:col, the key path and, for a typo, the
// nearest valid key.
//
// The room's other parts: schema.h (the sections core declares), toml_text.h (the one guarded
// TOML parse), canonical.h (how values and configs are written, flattened and hashed). This
// header includes the two that callers almost always want with it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/config/canonical.h"
#include "core/config/params.h"
#include "core/config/schema.h"

namespace kiln {

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

  // Canonical TOML (canonical.cpp): sections in schema order, `type` first, keys sorted. Reloading
  // it gives the same config, and the same text, whatever the layout of the original file.
  std::string to_toml() const;
  // 16 hex digits of FNV-1a over the canonical text of the keys that can change the numbers
  // (run.name, run.out_dir, run.db are left out), so reruns of one experiment share a hash.
  std::string hash() const;
};

ResolvedConfig load_config(const std::string& path, const std::vector<std::string>& overrides);
// The same for text already in memory; `source_name` names it in errors.
ResolvedConfig load_config_text(const std::string& toml_text, const std::string& source_name,
                                const std::vector<std::string>& overrides);

}  // namespace kiln
