// Experiment config: a TOML file plus `--set section.key=value` overrides, validated against
// the sections core declares and the parameters each chosen plugin declares, then resolved
// (every default filled in). Nothing is silently accepted: an unknown key, a wrong type or an
// out-of-range value is a UserError naming file:line:col, the key path and, for a typo, the
// nearest valid key.
//
// An experiment file may extend others (`extends = "base.toml"`, extends.h): its own keys win
// over its bases', and `--set` wins over all. Every key of a resolved config knows where its
// value came from (source_of: a file's line, a --set, or a default), and the config knows the
// files it was read from (sources), for `kiln config`, the run store and `kiln runs diff`.
//
// The room's other parts: loader.cpp (load_config: the layers merged and checked), schema.h (the
// sections core declares), toml_text.h (the one guarded TOML parse), extends.h (the chain of
// files), canonical.h (how values and configs are written, flattened and hashed). This header
// includes the two that callers almost always want with it.
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

// Where a resolved key's value came from.
struct KeySource {
  enum class Kind {
    kFile,     // a file of the chain wrote it: `at` is the value's file:line:col
    kSet,      // a --set wrote it: `at` is "--set key=value"
    kDefault,  // no one wrote it: the default of the plugin `plugin` (empty: of core, or the
               // kind's default plugin for a `type`)
  };
  Kind kind = Kind::kDefault;
  SourceLoc at;
  std::string plugin;
  // "experiments/x.toml:12", "--set", "default (plugin gpt)" or "default".
  std::string str() const;
};

// A file a config was read from, with the SHA-256 of the bytes read.
struct ConfigFile {
  std::string path;
  std::string sha256;
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
  // it gives the same config, and the same text, whatever the layout of the original file.
  std::string to_toml() const;
  // 16 hex digits of FNV-1a over the canonical text of the keys that can change the numbers
  // (run.name, run.out_dir, run.db are left out), so reruns of one experiment share a hash.
  std::string hash() const;

 private:
  friend class ConfigLoader;                      // loader.cpp: fills what follows
  std::map<std::string, KeySource> key_sources_;  // every key of `sections`, `type`s included
  std::vector<ConfigFile> sources_;
};

ResolvedConfig load_config(const std::string& path, const std::vector<std::string>& overrides);
// The same for text already in memory; `source_name` names it in errors, and the files its
// `extends` names are found relative to the folder that `source_name` would be in.
ResolvedConfig load_config_text(const std::string& toml_text, const std::string& source_name,
                                const std::vector<std::string>& overrides);

}  // namespace kiln
