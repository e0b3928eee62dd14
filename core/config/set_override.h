// One `--set section.key=value` as the loader (config.h) lays it over the files: the path split
// into its section and the key within it (a family's entry takes more parts, as
// data.sources.web.weight), and the value as TOML reads it, or as a bare string where the text
// is not a TOML value (`--set run.name=baseline`). Whether the section and key exist is the
// loader's question: it knows the files and the plugins.
#pragma once

#include <string>

#include <toml++/toml.h>

#include "core/config/key_source.h"

namespace kiln {

struct SetOverride {
  std::string section;
  std::string key;     // the path after the section
  SourceLoc at;        // "--set section.key=value", where its errors point
  toml::table holder;  // { v = value }: a toml++ value lives in a table

  const toml::node* value() const { return holder.get("v"); }
};

// `assignment` read; a UserError at "--set ..." when it has no `=`, its path has fewer than two
// parts or an empty one, or its bare-string value is not UTF-8 (it goes into the run's canonical
// TOML, which must load again).
SetOverride read_set_override(const std::string& assignment);

}  // namespace kiln
