// Where a config's values came from: a key's file position, a `--set`, or a default; and the
// files a config was read from. A resolved config keeps one for each key (resolved_config.h), so
// that an error raised after loading still points at the line that wrote the value, and
// `kiln config`, `kiln runs diff` and the run store (core/store/runs/sources.h) show them.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

// Where a value came from, for error messages raised after validation too.
struct SourceLoc {
  std::string file;  // experiment path, or "--set key=value" for an override
  int64_t line = 0;
  int64_t column = 0;
  std::string str() const;
};

// A UserError "file:line:col: what" (or "--set key=value: what"), the form of every config error.
[[noreturn]] void fail_at(const SourceLoc& at, const std::string& what);

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

}  // namespace kiln
