// A resolved experiment config: every section the schema declares, with its chosen plugin and
// every key's value (defaults filled in), where each value came from (key_source.h) and the
// files it was read from. The loader (config.h) makes one. It is passed as data: callers read
// its sections, its flat key -> value map or its hash, and its canonical TOML (canonical.cpp
// writes all three) only where the text itself is kept or shown.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/config/canonical.h"
#include "core/config/key_source.h"
#include "core/config/params.h"

namespace kiln {

struct Section {
  std::string name;
  std::string type;  // chosen plugin; empty for core sections
  Params params;
};

class ResolvedConfig {
 public:
  std::string experiment;  // the file it was loaded from (or "<db>" when rebuilt from a run)
  std::vector<Section> sections;
  // Lines for the user about what loading decided ("note: --set optimizer.type=muon replaces
  // ..."), which `kiln run` and `kiln config` print; not part of the config.
  std::vector<std::string> notes;

  const Section& section(const std::string& name) const;
  const Params& params(const std::string& name) const { return section(name).params; }
  const std::string& type(const std::string& name) const { return section(name).type; }
  // Where "section.key" (or "section.type") got its value; a default for a key it lacks.
  KeySource source_of(const std::string& key_path) const;
  // For an error about a key: where it was written, or "<experiment> (default of KEY)".
  SourceLoc where(const std::string& key_path) const;
  // The files read, in the order applied: each base before the files that extend it, the
  // experiment file last (a later file's keys win). Text loaded from memory is one entry named
  // by its source name.
  const std::vector<ConfigFile>& sources() const { return sources_; }

  // Canonical TOML (canonical.cpp): sections in schema order, `type` first, keys sorted. Reloading
  // it gives the same config, and the same text, whatever the layout of the original file. For
  // text that is stored or shown; in-process comparisons read flat().
  std::string to_toml() const;
  // Every key as "section.key" (a family's entries as "section.family.NAME.KEY", a plugin as
  // "section.type") with its value as format_value writes it: what flatten_config(to_toml())
  // gives, read from the sections themselves.
  FlatConfig flat() const;
  // 16 hex digits of FNV-1a over the canonical text of the keys that can change the numbers
  // (run.name, run.out_dir, run.db are left out), so reruns of one experiment share a hash.
  std::string hash() const;

 private:
  friend class ConfigLoader;                      // loader.cpp: fills what follows
  std::map<std::string, KeySource> key_sources_;  // every key of `sections`, `type`s included
  std::vector<ConfigFile> sources_;
};

}  // namespace kiln
